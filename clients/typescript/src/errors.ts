/**
 * The error codes of protocol v1 and one exception class per code (docs/protocol.md §12).
 *
 * Every error a call can fail with is a {@link WireError}: the server's per-call errors, the
 * connection-level errors that end calls (`peer-lost`, `unsupported-version`), and the errors
 * this client raises itself with the same codes (`too-large` before sending, `peer-lost` on
 * silence, `unavailable` on close, ...). Callers branch on the class or on `code`, never on
 * `message` (§12: messages are for people and may change).
 */

import type { WireValue } from "./codec.js";

/** The cancel reasons of §7.2, in `cancel.reason` and in `details.reason` of `cancelled`. */
export type CancelReason = "caller" | "deadline" | "superseded" | "peer-lost" | "shutdown";

export const CANCEL_REASONS: readonly CancelReason[] = [
  "caller",
  "deadline",
  "superseded",
  "peer-lost",
  "shutdown",
];

/** `details` of an error: a map with string keys, as it came off the wire. */
export type ErrorDetails = Readonly<Record<string, WireValue>>;

/** An error with a stable protocol code. */
export class WireError extends Error {
  /** The code this class stands for; {@link InternalError} also stands in for unknown ones. */
  static readonly code: string = "internal";
  readonly code: string;
  readonly details: ErrorDetails;

  constructor(message: string, details: ErrorDetails = {}, code?: string) {
    super(message);
    this.code = code ?? (new.target as typeof WireError).code;
    this.details = details;
    this.name = new.target.name;
  }
}

export class BadRequestError extends WireError {
  static override readonly code = "bad-request";
}
export class UnsupportedVersionError extends WireError {
  static override readonly code = "unsupported-version";
}
export class UnknownEndpointError extends WireError {
  static override readonly code = "unknown-endpoint";
}
export class ArgumentsInvalidError extends WireError {
  static override readonly code = "arguments-invalid";
}
export class ResultInvalidError extends WireError {
  static override readonly code = "result-invalid";
}
export class SessionNotFoundError extends WireError {
  static override readonly code = "session-not-found";
}
export class AgentBusyError extends WireError {
  static override readonly code = "agent-busy";
}
export class DeadlineExceededError extends WireError {
  static override readonly code = "deadline-exceeded";
}
export class OverloadedError extends WireError {
  static override readonly code = "overloaded";
}
export class TooLargeError extends WireError {
  static override readonly code = "too-large";
}
export class UnauthorizedError extends WireError {
  static override readonly code = "unauthorized";
}
export class PeerLostError extends WireError {
  static override readonly code = "peer-lost";
}
export class UnavailableError extends WireError {
  static override readonly code = "unavailable";
}
export class InternalError extends WireError {
  static override readonly code = "internal";
}
export class MovedError extends WireError {
  static override readonly code = "moved";
}

/** A call ended `cancelled` (§7.3): by a supersede, a server shutdown, or a cancel that the
 * caller did not make through this call's own signal. */
export class CallCancelledError extends WireError {
  static override readonly code = "cancelled";

  /** `queued` or `running`: the call's state when the cancel landed. */
  get state(): string | undefined {
    const state = this.details["state"];
    return typeof state === "string" ? state : undefined;
  }

  /** The reason of the first cancellation (§7.2). */
  get reason(): string | undefined {
    const reason = this.details["reason"];
    return typeof reason === "string" ? reason : undefined;
  }
}

/** Any `SESSION_REFERENCE_*` code of upstream DSH; `code` keeps the exact one (§12.2). */
export class SessionReferenceError extends WireError {
  static override readonly code = "SESSION_REFERENCE_INVALID_REFERENCE";
}

/** The upstream DSH session-reference codes, passed through unchanged. */
export const SESSION_REFERENCE_CODES = [
  "SESSION_REFERENCE_INVALID_CONFIG",
  "SESSION_REFERENCE_INVALID_REFERENCE",
  "SESSION_REFERENCE_SELF_REFERENCE",
  "SESSION_REFERENCE_TOO_MANY",
  "SESSION_REFERENCE_READ_FAILED",
  "SESSION_REFERENCE_BUDGET_EXCEEDED",
  "SESSION_REFERENCE_CANCELLED",
] as const;

type WireErrorClass = new (message: string, details?: ErrorDetails, code?: string) => WireError;

const CLASSES: ReadonlyMap<string, WireErrorClass> = new Map<string, WireErrorClass>([
  ...[
    BadRequestError,
    UnsupportedVersionError,
    UnknownEndpointError,
    ArgumentsInvalidError,
    ResultInvalidError,
    SessionNotFoundError,
    AgentBusyError,
    CallCancelledError,
    DeadlineExceededError,
    OverloadedError,
    TooLargeError,
    UnauthorizedError,
    PeerLostError,
    UnavailableError,
    InternalError,
    MovedError,
  ].map((cls): [string, WireErrorClass] => [cls.code, cls]),
  ...SESSION_REFERENCE_CODES.map((code): [string, WireErrorClass] => [code, SessionReferenceError]),
]);

/** Every code this client knows. */
export const ERROR_CODES: readonly string[] = [...CLASSES.keys()];

/**
 * The typed error for an `error` frame's `code`, `message` and `details`.
 *
 * A code this client does not know becomes {@link InternalError} with the original code kept
 * in `details.code` (§12: a client MUST handle unknown codes, and treats them as `internal`).
 */
export function errorFromWire(code: string, message: string, details: ErrorDetails): WireError {
  const cls = CLASSES.get(code);
  if (cls === undefined) {
    return new InternalError(message, { ...details, code });
  }
  return new cls(message, details, code);
}
