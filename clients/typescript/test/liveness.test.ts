/**
 * Heartbeats and peer loss against a real server with short timers (heartbeat 0.5 s, peer
 * timeout 1.5 s): an idle connection stays up, a stopped server is lost within the bound, a
 * resumed one welcomes the client again, and a server shutting down says bye.
 */

import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { CallCancelledError, type Client, connect, PeerLostError } from "../src/index.js";
import { type Server, startServer, temporaryDirectory } from "./server.js";
import { createAgent, endingOf, sleep, uniqueLabel } from "./support.js";

/** Slack for every time bound: CI machines are shared two-core boxes. */
const MARGIN_MS = 3000;

let server: Server;
let client: Client;
let agent: string;

before(async () => {
  const dir = temporaryDirectory();
  const config = join(dir, "server.toml");
  writeFileSync(config, "[wire]\nheartbeat = 0.5\npeerTimeout = 1.5\n");
  server = await startServer({ dir, args: ["--config", config] });
  client = await connect(server.endpoint);
  agent = await createAgent(client);
});

after(async () => {
  await client?.close();
  await server?.stop();
});

describe("heartbeats and peer loss", () => {
  test("the client adopts the welcome's timers", () => {
    assert.equal(client.limits.heartbeatMs, 500);
    assert.equal(client.limits.peerTimeoutMs, 1500);
  });

  test("an idle connection outlives twice the peer timeout: both sides keep pinging", async () => {
    await sleep(2 * client.limits.peerTimeoutMs);
    assert.equal(client.state, "ready");
    // Had the server forgotten us, this would fail with peer-lost ("unknown peer").
    assert.equal(
      await client.call("diagnostics/echo", { agentId: agent, payload: "alive" }),
      "alive",
    );
  });

  test("a stopped server is lost within the bound; a resumed one welcomes the client again", async (t) => {
    const label = uniqueLabel("stopped");
    const pending = client.call("diagnostics/sleep", { agentId: agent, seconds: 60, label });
    await sleep(200);
    const stoppedAt = Date.now();
    server.process.kill("SIGSTOP");
    try {
      await assert.rejects(pending, PeerLostError);
      const elapsed = Date.now() - stoppedAt;
      t.diagnostic(`server lost ${elapsed} ms after SIGSTOP`);
      const { peerTimeoutMs, heartbeatMs } = client.limits;
      assert.ok(elapsed <= peerTimeoutMs + 100 + MARGIN_MS, `lost after ${elapsed} ms`);
      assert.ok(
        elapsed >= peerTimeoutMs - heartbeatMs - 100,
        `lost too early, after ${elapsed} ms`,
      );
      assert.equal(client.state, "lost");
      // While lost, calls fail at once instead of waiting.
      await assert.rejects(client.call("system/stats"), PeerLostError);
    } finally {
      server.process.kill("SIGCONT");
    }
    await client.whenReady({ timeoutMs: 15_000 });
    assert.equal(
      await client.call("diagnostics/echo", { agentId: agent, payload: "back" }),
      "back",
    );
    // The server dropped the old connection's call: its handler did not run on.
    assert.equal((await endingOf(client, label)).outcome, "cancelled");
  });

  test("a server shutting down ends calls in flight with `shutdown`, then says bye", async () => {
    const pending = client.call("diagnostics/sleep", { agentId: agent, seconds: 60 });
    await sleep(200);
    server.process.kill("SIGTERM");
    await assert.rejects(pending, (error: unknown) => {
      assert.ok(error instanceof CallCancelledError, String(error));
      assert.equal(error.reason, "shutdown");
      return true;
    });
    const until = Date.now() + 5000 + MARGIN_MS;
    while (client.state === "ready" && Date.now() < until) {
      await sleep(50);
    }
    assert.equal(client.state, "lost");
    await assert.rejects(client.call("system/stats"), PeerLostError);
  });
});
