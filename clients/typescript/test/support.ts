/** Test support shared by the files that talk to a server. */

import type { Client, WireValue } from "../src/index.js";

export interface Ending {
  readonly call: string;
  readonly outcome: string;
  readonly elapsed: number;
}

/** How the `diagnostics/sleep` handler labelled `label` ended, as the server recorded it. */
export async function endingOf(client: Client, label: string, timeoutMs = 10_000): Promise<Ending> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const endings = await client.call<Ending[]>("diagnostics/endings");
    const found = endings.find((ending) => ending.call === label);
    if (found !== undefined) {
      return found;
    }
    if (Date.now() > until) {
      throw new Error(`no ending recorded for ${label} within ${timeoutMs} ms`);
    }
    await sleep(50);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A fresh agent (a new session) on the server. */
export async function createAgent(client: Client, title = "test"): Promise<string> {
  const created = await client.call<{ agentId?: WireValue }>("agents/create", { title });
  if (typeof created.agentId !== "string") {
    throw new Error("agents/create returned no agentId");
  }
  return created.agentId;
}

/** `system/stats` `callsTotal`: calls the server admitted since it started. */
export async function callsTotal(client: Client): Promise<number> {
  const stats = await client.call<{ callsTotal?: WireValue }>("system/stats");
  if (typeof stats.callsTotal !== "number") {
    throw new Error("system/stats returned no callsTotal");
  }
  return stats.callsTotal;
}

let labels = 0;
/** A label no other call in this process uses. */
export function uniqueLabel(prefix: string): string {
  labels += 1;
  return `${prefix}-${process.pid}-${labels}`;
}
