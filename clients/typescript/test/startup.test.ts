/**
 * Connecting before the server is up. The client re-sends `hello` every heartbeat while it
 * waits, and a server that then reads several hellos in a row forgets any call that came
 * between them (docs/protocol.md §4.3). Calls made meanwhile must therefore wait for the
 * welcome rather than follow the first hello.
 */

import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";

import { Client, connect, UnavailableError } from "../src/index.js";
import { type Server, startServer, temporaryDirectory } from "./server.js";
import { sleep } from "./support.js";

let server: Server | undefined;
let client: Client | undefined;

after(async () => {
  await client?.close();
  await server?.stop();
});

test("calls made before the server is up are sent after its welcome and all answered", async () => {
  const dir = temporaryDirectory();
  const endpoint = `ipc://${join(dir, "s.sock")}`;
  client = new Client(endpoint, { connectTimeoutMs: 60_000 });
  const calls = [1, 2, 3].map((payload) =>
    client!.call("diagnostics/echoRaw", { payload }, { timeoutMs: 60_000 }),
  );
  assert.equal(client.state, "greeting");
  // Long enough for hello to be re-sent at least once (every heartbeat, 1 s before a welcome).
  await sleep(1500);
  server = await startServer({ dir, endpoints: [endpoint] });
  assert.deepEqual(await Promise.all(calls), [1, 2, 3]);
  assert.equal(client.state, "ready");
});

test("without a server, connect() fails with UnavailableError after the connect timeout", async () => {
  const dir = temporaryDirectory();
  try {
    const started = Date.now();
    await assert.rejects(
      connect(`ipc://${join(dir, "nobody.sock")}`, { connectTimeoutMs: 300 }),
      UnavailableError,
    );
    assert.ok(Date.now() - started < 5000);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("calls queued on a client that gets no welcome fail with UnavailableError", async () => {
  const dir = temporaryDirectory();
  const lonely = new Client(`ipc://${join(dir, "nobody.sock")}`, { connectTimeoutMs: 300 });
  try {
    const waiting = lonely.whenReady();
    await assert.rejects(lonely.call("system/stats"), UnavailableError);
    await assert.rejects(waiting, UnavailableError);
    // Afterwards the client keeps offering hello; a bounded wait for a welcome times out.
    await assert.rejects(lonely.whenReady({ timeoutMs: 200 }), UnavailableError);
  } finally {
    await lonely.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
