/** The options of a connection and of a call. */

import type { CurveKeys } from "./keys.js";

export interface ClientOptions {
  /** Free-form client name, sent in `hello` for the server's log. */
  readonly name?: string | undefined;
  /**
   * How long to wait for the first `welcome` (default 5000 ms). After it, calls queued
   * meanwhile fail with `UnavailableError`, and `connect()` rejects; the client keeps offering
   * `hello` every heartbeat interval.
   */
  readonly connectTimeoutMs?: number | undefined;
  /** CURVE keys; without them the connection is plaintext (docs/protocol.md §1.1). */
  readonly curve?: CurveKeys | undefined;
  /** Diagnostics the protocol does not turn into errors (unattributed connection errors). */
  readonly log?: ((message: string) => void) | undefined;
}

export interface CallOptions {
  /**
   * Aborting it cancels the call on the server (`cancel` frame, reason `caller`; `deadline`
   * when the abort reason is a `TimeoutError`, as from `AbortSignal.timeout()`), and the
   * promise rejects with `signal.reason`, as `fetch` does.
   */
  readonly signal?: AbortSignal | undefined;
  /** Time budget in ms from now; sent as `deadlineMs` and enforced on both sides. */
  readonly timeoutMs?: number | undefined;
  /** Absolute deadline in `Date.now()` milliseconds; the earlier of this and `timeoutMs` wins. */
  readonly deadline?: number | undefined;
  /** Latest-wins key (§8): a newer call with the same key cancels this one on the server. */
  readonly supersede?: string | undefined;
}
