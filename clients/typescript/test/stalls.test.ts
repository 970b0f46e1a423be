/**
 * Replies are handed over as they arrive, whatever the client's timers do: a run of sequential
 * calls spanning many ticks of the client's 100 ms timer has no call that waits for the next
 * server heartbeat (1 s). A timer that read the socket's readable state used to spend the event
 * a pending receive waits for, and every call in flight then stalled until the next frame.
 */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { type Client, connect } from "../src/index.js";
import { type Server, startServer, temporaryDirectory } from "./server.js";
import { createAgent } from "./support.js";

/** Far above a loaded machine's slowest echo, well below the stall (up to a heartbeat). */
const SLOWEST_ALLOWED_MS = 750;
const RUN_MS = 3000;

let server: Server;
let client: Client;
let agent: string;

before(async () => {
  server = await startServer({ dir: temporaryDirectory() });
  client = await connect(server.endpoint);
  agent = await createAgent(client);
});

after(async () => {
  await client?.close();
  await server?.stop();
});

test("sequential calls over many timer ticks never wait for a heartbeat", async () => {
  const end = performance.now() + RUN_MS;
  let slowest = 0;
  let calls = 0;
  while (performance.now() < end) {
    const started = performance.now();
    assert.equal(await client.call("diagnostics/echo", { agentId: agent, payload: calls }), calls);
    slowest = Math.max(slowest, performance.now() - started);
    calls += 1;
  }
  assert.ok(calls > 30, `only ${calls} calls in ${RUN_MS} ms`);
  assert.ok(slowest < SLOWEST_ALLOWED_MS, `a call took ${slowest.toFixed(0)} ms`);
});
