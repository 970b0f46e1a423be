/**
 * Cancel-to-quiescence, measured the way bench.load's Python probe measures it
 * (`cancel_to_quiescence` in bench/_load_ours.py): start a 30 s `diagnostics/sleep`, wait until
 * `system/stats` shows it running, abort the call's `AbortSignal`, and take the server's
 * `time.monotonic()` at the end of the handler (`diagnostics/endings`) minus ours at the abort.
 *
 * Ours is `process.hrtime.bigint()`: libuv reads `CLOCK_MONOTONIC`, the clock of Python's
 * `time.monotonic()` on Linux, so both readings are on one host-wide clock.
 */

import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";

import type { Client } from "../src/index.js";

/** How long the sleep may take to show up running, and a cancelled one in the endings; a
 * probe whose ending never shows was cancelled while still queued and yields no sample. */
const ENDING_WITHIN_MS = 2000;

/** Nanoseconds on the host-wide monotonic clock (Python's `time.monotonic_ns()`). */
export function monotonicNs(): bigint {
  return process.hrtime.bigint();
}

export { sleep };

interface Ending {
  readonly call: string;
  readonly outcome: string;
  readonly endedAt: number;
}

interface Stats {
  readonly calls: { readonly running?: number };
}

/** Thrown in place of the sleep's result: the abort is how this call is meant to end. */
class ProbeAbort extends Error {
  override name = "ProbeAbort";
}

/**
 * Nanoseconds from aborting a running `diagnostics/sleep` to its handler having ended on the
 * server, or `null` when the handler never ran (the cancel found the call still queued).
 */
export async function cancelToQuiescence(
  client: Client,
  agentId: string,
  settleSeconds: number,
): Promise<number | null> {
  const label = `probe-${randomUUID().replaceAll("-", "")}`;
  const controller = new AbortController();
  const abort = new ProbeAbort("cancelled by the probe");
  const sleeper = client
    .call("diagnostics/sleep", { agentId, seconds: 30.0, label }, { signal: controller.signal })
    .then(
      () => {
        throw new Error("diagnostics/sleep returned although it was cancelled");
      },
      (error: unknown) => {
        if (error !== abort) {
          throw error;
        }
      },
    );
  let cancelledAt: bigint;
  try {
    await sleep(settleSeconds * 1000);
    // Cancel right after the server confirms a running handler, as the Python probe does, so
    // the sample is the cancel path itself and not two processes waking from idle as well.
    const confirmBy = performance.now() + ENDING_WITHIN_MS;
    while (performance.now() < confirmBy) {
      const stats = await client.call<Stats>("system/stats");
      if ((stats.calls.running ?? 0) >= 2) {
        break; // the stats call counts itself
      }
      await sleep(2);
    }
  } finally {
    cancelledAt = monotonicNs();
    controller.abort(abort);
  }
  await sleeper;
  // Wait before asking so our own polling does not compete with the handler being timed.
  await sleep(3);
  const giveUpAt = performance.now() + ENDING_WITHIN_MS;
  while (performance.now() < giveUpAt) {
    const endings = await client.call<Ending[]>("diagnostics/endings");
    const ending = [...endings].reverse().find((e) => e.call === label);
    if (ending !== undefined) {
      if (ending.outcome !== "cancelled") {
        throw new Error(`the cancelled sleep ended ${JSON.stringify(ending.outcome)}`);
      }
      // The same arithmetic as the Python probe: seconds on the shared clock, then ns.
      return Math.max(0, Math.round((Number(ending.endedAt) - Number(cancelledAt) / 1e9) * 1e9));
    }
    await sleep(5);
  }
  return null;
}
