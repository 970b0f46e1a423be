/**
 * The nine message types of protocol v1 (docs/protocol.md §3): building the frames a client
 * sends, and reading and validating the frames a server sends.
 *
 * Frames are written with their keys in the order of the §3 tables (`type` and `id` first),
 * so that a server which rejects a frame can still read its call id (§11.1).
 */

import { DecodeError, decodeFrame, encodeFrame, type WireMap, type WireValue } from "./codec.js";
import type { CancelReason, ErrorDetails } from "./errors.js";

/** The protocol versions this client speaks. */
export const PROTOCOL_VERSIONS: readonly number[] = [1];

/** Call ids are 0..2^53-1 (§5.1): exact in a JavaScript number. */
export const MAX_CALL_ID = Number.MAX_SAFE_INTEGER;

/** The server's `welcome`: the limits and timers in force for this connection (§3.2). */
export interface Welcome {
  readonly type: "welcome";
  readonly version: number;
  readonly name: string;
  readonly heartbeatMs: number;
  readonly peerTimeoutMs: number;
  readonly maxFrameBytes: number;
  readonly maxInFlight: number;
}

export interface ResultMessage {
  readonly type: "result";
  readonly id: number;
  readonly value: WireValue;
}

/** A per-call error (`id` set) or a connection-level one (`id` null) (§3.6). */
export interface ErrorMessage {
  readonly type: "error";
  readonly id: number | null;
  readonly code: string;
  readonly message: string;
  readonly details: ErrorDetails;
}

export interface SignalMessage {
  readonly type: "ping" | "pong" | "bye";
}

/** `hello`, `call` or `cancel` from a server: never sent by one; ignored (§4.6). */
export interface IgnoredMessage {
  readonly type: "ignored";
  readonly original: string;
}

export type ServerMessage = Welcome | ResultMessage | ErrorMessage | SignalMessage | IgnoredMessage;

/** A frame from the server that is not a valid protocol message (§12.2). */
export class InvalidFrameError extends Error {
  override name = "InvalidFrameError";
}

// -- frames a client sends ---------------------------------------------------------------------

export function encodeHello(name: string): Uint8Array {
  return encodeFrame({ type: "hello", versions: [...PROTOCOL_VERSIONS], name });
}

export interface CallFrame {
  readonly id: number;
  readonly endpoint: string;
  readonly args: WireMap;
  /** Remaining budget in ms at the moment of sending; omitted when there is none. */
  readonly deadlineMs?: number | undefined;
  readonly supersede?: string | undefined;
}

/** @throws EncodeError an argument cannot be encoded (its path starts with `args`). */
export function encodeCall(call: CallFrame): Uint8Array {
  return encodeFrame({
    type: "call",
    id: call.id,
    endpoint: call.endpoint,
    args: call.args,
    deadlineMs: call.deadlineMs,
    supersede: call.supersede,
  });
}

export function encodeCancel(id: number, reason: CancelReason): Uint8Array {
  return encodeFrame({ type: "cancel", id, reason });
}

export const PING: Uint8Array = encodeFrame({ type: "ping" });
export const PONG: Uint8Array = encodeFrame({ type: "pong" });
export const BYE: Uint8Array = encodeFrame({ type: "bye" });

// -- frames a server sends ---------------------------------------------------------------------

type Fields = Readonly<Record<string, unknown>>;

function isMap(value: unknown): value is Fields {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    !(value instanceof Uint8Array)
  );
}

function isCallId(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 0 && value <= MAX_CALL_ID;
}

function positiveInteger(fields: Fields, key: string): number {
  const value = fields[key];
  if (typeof value !== "number" || !Number.isInteger(value) || value <= 0) {
    throw new InvalidFrameError(`welcome: field '${key}' must be a positive integer`);
  }
  return value;
}

function optionalString(fields: Fields, kind: string, key: string): string {
  const value = fields[key];
  if (value === undefined || value === null) {
    return "";
  }
  if (typeof value !== "string") {
    throw new InvalidFrameError(`${kind}: field '${key}' must be a string`);
  }
  return value;
}

function readWelcome(fields: Fields): Welcome {
  const version = fields["version"];
  if (typeof version !== "number" || !PROTOCOL_VERSIONS.includes(version)) {
    throw new InvalidFrameError(`welcome: version ${String(version)} was not offered`);
  }
  return {
    type: "welcome",
    version,
    name: optionalString(fields, "welcome", "name"),
    heartbeatMs: positiveInteger(fields, "heartbeatMs"),
    peerTimeoutMs: positiveInteger(fields, "peerTimeoutMs"),
    maxFrameBytes: positiveInteger(fields, "maxFrameBytes"),
    maxInFlight: positiveInteger(fields, "maxInFlight"),
  };
}

function readError(fields: Fields): ErrorMessage {
  const id = fields["id"] ?? null;
  if (id !== null && !isCallId(id)) {
    throw new InvalidFrameError("error: field 'id' must be a call id or nil");
  }
  const code = fields["code"];
  if (typeof code !== "string") {
    throw new InvalidFrameError("error: field 'code' must be a string");
  }
  const details = fields["details"] ?? {};
  if (!isMap(details)) {
    throw new InvalidFrameError("error: field 'details' must be a map");
  }
  return {
    type: "error",
    id,
    code,
    message: optionalString(fields, "error", "message"),
    details: details as ErrorDetails,
  };
}

/**
 * Decode and validate one frame from the server.
 *
 * @throws InvalidFrameError the frame is not msgpack, not a map, or not a valid message.
 */
export function decodeServerMessage(frame: Uint8Array): ServerMessage {
  let decoded: unknown;
  try {
    decoded = decodeFrame(frame);
  } catch (error) {
    throw new InvalidFrameError(error instanceof DecodeError ? error.message : String(error));
  }
  if (!isMap(decoded)) {
    throw new InvalidFrameError("frame must be a map");
  }
  const type = decoded["type"];
  switch (type) {
    case "welcome":
      return readWelcome(decoded);
    case "result": {
      const id = decoded["id"];
      if (!isCallId(id)) {
        throw new InvalidFrameError("result: field 'id' must be a call id");
      }
      return { type, id, value: (decoded["value"] ?? null) as WireValue };
    }
    case "error":
      return readError(decoded);
    case "ping":
    case "pong":
    case "bye":
      return { type };
    case "hello":
    case "call":
    case "cancel":
      return { type: "ignored", original: type };
    default:
      throw new InvalidFrameError(`unknown message type ${JSON.stringify(String(type))}`);
  }
}
