/**
 * CURVE against `agent-actors serve --curve server.key --clients clients.toml` on loopback tcp:
 * listed keys connect with their role, anything else gets no frame at all.
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import {
  connect,
  curveKeysFromFiles,
  type CurveKeys,
  KeyError,
  readKeyPair,
  readPublicKey,
  UnauthorizedError,
  UnavailableError,
} from "../src/index.js";
import { PYTHON, type Server, startServer, temporaryDirectory } from "./server.js";

let server: Server;
let keys: string;

function generate(name: string): void {
  execFileSync(PYTHON, ["-m", "actors", "keys", name, "--dir", keys], { stdio: "ignore" });
}

function clientKeys(name: string): CurveKeys {
  return curveKeysFromFiles(join(keys, "server.pub"), join(keys, `${name}.key`));
}

before(async () => {
  const dir = temporaryDirectory();
  keys = join(dir, "keys");
  for (const name of ["server", "writer", "reader", "stranger"]) {
    generate(name);
  }
  const allowlist = join(dir, "clients.toml");
  writeFileSync(
    allowlist,
    `[clients.writer]\nkey = "${readPublicKey(join(keys, "writer.pub"))}"\nrole = "write"\n\n` +
      `[clients.reader]\nkey = "${readPublicKey(join(keys, "reader.pub"))}"\nrole = "read"\n`,
    { mode: 0o600 },
  );
  server = await startServer({
    dir,
    endpoints: ["tcp://127.0.0.1:*"],
    args: ["--curve", join(keys, "server.key"), "--clients", allowlist],
  });
  assert.match(server.endpoint, /^tcp:\/\/127\.0\.0\.1:\d+$/);
});

after(async () => {
  await server?.stop();
});

describe("CURVE", () => {
  test("a listed write key connects and may call state-changing endpoints", async () => {
    const client = await connect(server.endpoint, { curve: clientKeys("writer") });
    try {
      const created = (await client.call("agents/create", { title: "curve" })) as {
        agentId: string;
      };
      assert.equal(
        await client.call("diagnostics/echo", { agentId: created.agentId, payload: 2n ** 63n }),
        2n ** 63n,
      );
    } finally {
      await client.close();
    }
  });

  test("a read key may read but gets UnauthorizedError for a state-changing endpoint", async () => {
    const client = await connect(server.endpoint, { curve: clientKeys("reader") });
    try {
      const description = await client.describe();
      assert.ok(description.endpoints.has("agents/create"));
      await assert.rejects(client.call("agents/create", {}), (error: unknown) => {
        assert.ok(error instanceof UnauthorizedError);
        assert.equal(error.details["endpoint"], "agents/create");
        return true;
      });
      // The connection stays usable after a per-call refusal.
      assert.equal(typeof (await client.call("system/stats")), "object");
    } finally {
      await client.close();
    }
  });

  test("an unlisted key gets no welcome", async () => {
    await assert.rejects(
      connect(server.endpoint, { curve: clientKeys("stranger"), connectTimeoutMs: 1500 }),
      UnavailableError,
    );
  });

  test("a wrong pinned server key gets no welcome", async () => {
    const wrong = { ...clientKeys("writer"), serverKey: readPublicKey(join(keys, "stranger.pub")) };
    await assert.rejects(
      connect(server.endpoint, { curve: wrong, connectTimeoutMs: 1500 }),
      UnavailableError,
    );
  });

  test("no CURVE at all gets no welcome", async () => {
    await assert.rejects(connect(server.endpoint, { connectTimeoutMs: 1500 }), UnavailableError);
  });
});

describe("key files", () => {
  test("a key pair file readable by others is refused", () => {
    const loose = join(keys, "loose.key");
    copyFileSync(join(keys, "writer.key"), loose);
    chmodSync(loose, 0o644);
    assert.throws(() => readKeyPair(loose), KeyError);
  });

  test("a malformed key is refused before connecting", async () => {
    const malformed = { ...clientKeys("writer"), secretKey: "short" };
    await assert.rejects(connect(server.endpoint, { curve: malformed }), KeyError);
  });

  test("a file without a valid key is refused", () => {
    const bad = join(keys, "bad.pub");
    writeFileSync(bad, 'public = "not a key"\n', { mode: 0o600 });
    assert.throws(() => readPublicKey(bad), KeyError);
  });
});
