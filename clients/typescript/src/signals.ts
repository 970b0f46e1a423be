/** AbortSignal helpers: waiting abortably, and which cancel reason an abort stands for. */

import type { CancelReason } from "./errors.js";

/**
 * `promise`, or a rejection with `signal.reason` when the signal aborts first (as `fetch`
 * rejects). The promise keeps its handlers either way, so its own rejection is never unhandled.
 */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) {
    return promise;
  }
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
    }
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

/** `deadline` for a timeout (`AbortSignal.timeout()` aborts with a `TimeoutError`), else
 * `caller` (§7.2). */
export function cancelReasonOf(reason: unknown): Extract<CancelReason, "caller" | "deadline"> {
  const name: unknown =
    typeof reason === "object" && reason !== null ? Reflect.get(reason, "name") : undefined;
  return name === "TimeoutError" ? "deadline" : "caller";
}
