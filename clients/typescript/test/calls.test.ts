/**
 * Calls against a real server: handshake, values of every kind, 64-bit integers, deadlines,
 * cancellation across the wire, supersede, typed errors, the frame limit, and proxies.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  ArgumentsInvalidError,
  CallCancelledError,
  type Client,
  connect,
  type DynamicServices,
  DeadlineExceededError,
  SessionNotFoundError,
  SessionReferenceError,
  TooLargeError,
  type TypedServices,
  UnknownEndpointError,
  type WireMap,
  type WireValue,
} from "../src/index.js";
import { type Server, startServer } from "./server.js";
import { callsTotal, createAgent, endingOf, sleep, uniqueLabel } from "./support.js";

let server: Server;
let client: Client;
let agent: string;

before(async () => {
  server = await startServer();
  client = await connect(server.endpoint, { name: "ts-test" });
  agent = await createAgent(client);
});

after(async () => {
  await client?.close();
  await server?.stop();
});

async function echo(payload: WireValue): Promise<WireValue> {
  return client.call("diagnostics/echo", { agentId: agent, payload });
}

describe("handshake", () => {
  test("the welcome states version 1 and the server's limits, and the client adopts them", () => {
    const welcome = client.welcome;
    assert.ok(welcome !== undefined);
    assert.equal(welcome.version, 1);
    assert.equal(client.state, "ready");
    assert.equal(client.limits.heartbeatMs, welcome.heartbeatMs);
    assert.equal(client.limits.peerTimeoutMs, welcome.peerTimeoutMs);
    assert.equal(client.limits.maxFrameBytes, welcome.maxFrameBytes);
    assert.ok(welcome.peerTimeoutMs > welcome.heartbeatMs);
  });

  test("closing fails calls still pending with UnavailableError and later calls too", async () => {
    const other = await connect(server.endpoint);
    const pending = other.call("diagnostics/sleep", { agentId: agent, seconds: 30 });
    await other.close();
    await assert.rejects(pending, { name: "UnavailableError", code: "unavailable" });
    await assert.rejects(other.call("system/stats"), { name: "UnavailableError" });
    assert.equal(other.state, "closed");
  });
});

describe("values", () => {
  test("every value kind comes back from diagnostics/echo as it was sent", async () => {
    const values: WireValue[] = [
      null,
      true,
      false,
      0,
      -1,
      127,
      -32,
      255,
      65_535,
      -129,
      1.5,
      -0.25,
      1e300,
      "",
      "text with ünïcödé and emoji 🎉",
      new Uint8Array([0, 1, 2, 254, 255]),
      new Uint8Array(70_000).fill(7),
      [],
      [1, "two", null, [3, [4]], { five: 5 }],
      {},
      { nested: { deeper: { deepest: [true, false] } }, "key with spaces": "v" },
    ];
    for (const value of values) {
      assert.deepEqual(await echo(value), value);
    }
  });

  test("binary stays binary and strings stay strings", async () => {
    const result = (await echo({ bin: new Uint8Array([104, 105]), str: "hi" })) as WireMap;
    assert.ok(result["bin"] instanceof Uint8Array);
    assert.equal(typeof result["str"], "string");
  });

  test("undefined map values are omitted, so the server applies the parameter's default", async () => {
    assert.deepEqual(await echo({ kept: 1, dropped: undefined }), { kept: 1 });
    // `payload` omitted: its default (nil) applies.
    assert.equal(
      await client.call("diagnostics/echo", { agentId: agent, payload: undefined }),
      null,
    );
  });

  test("integers around 2^31, 2^32, 2^53, 2^63 and 2^64 round-trip exactly", async () => {
    const numbers = [
      2 ** 31 - 1,
      2 ** 31,
      -(2 ** 31),
      -(2 ** 31) - 1,
      2 ** 32 - 1,
      2 ** 32,
      2 ** 32 + 1,
      -(2 ** 32),
      Number.MAX_SAFE_INTEGER,
      -Number.MAX_SAFE_INTEGER,
      1_796_393_077_444,
    ];
    for (const value of numbers) {
      assert.equal(await echo(value), value, `number ${value}`);
    }
    const bigints = [
      2n ** 53n,
      -(2n ** 53n),
      2n ** 63n - 1n,
      2n ** 63n,
      -(2n ** 63n),
      2n ** 64n - 1n,
    ];
    for (const value of bigints) {
      assert.equal(await echo(value), value, `bigint ${value}`);
    }
    // A bigint that fits a safe integer comes back as a number.
    assert.equal(await echo(42n), 42);
    assert.equal(await echo(-(2n ** 40n)), -(2 ** 40));
  });

  test("non-integer numbers travel as floats", async () => {
    assert.equal(await echo(0.1), 0.1);
    assert.equal(await echo(2 ** 53), 2 ** 53); // not a safe integer: sent as float64
    assert.ok(Number.isNaN(await echo(Number.NaN)));
    assert.equal(await echo(Number.POSITIVE_INFINITY), Number.POSITIVE_INFINITY);
  });

  test("createdAt comes back as a safe integer that the server accepts again as an integer", async () => {
    const created = (await client.call("sessions/create", {})) as WireMap;
    const createdAt = created["createdAt"];
    const sessionId = created["sessionId"];
    assert.equal(typeof createdAt, "number");
    assert.equal(typeof sessionId, "string");
    assert.ok(Number.isSafeInteger(createdAt) && (createdAt as number) > 2 ** 32);
    // The server refuses a float where it expects an integer: a page cursor built from the
    // createdAt it sent must go back as an integer (msgpack uint64), as number or bigint.
    for (const at of [createdAt, BigInt(createdAt as number)]) {
      const page = (await client.call("sessions/list", {
        after: { createdAt: at, sessionId: sessionId as string },
        limit: 1,
      })) as WireMap;
      assert.ok(Array.isArray(page["sessions"]));
    }
    await assert.rejects(
      client.call("sessions/list", { after: { createdAt: 1.5, sessionId: sessionId as string } }),
      (error: unknown) =>
        error instanceof ArgumentsInvalidError && error.details["path"] === "after.createdAt",
    );
  });

  test("values that cannot be encoded fail locally with ArgumentsInvalidError naming the path", async () => {
    const before = await callsTotal(client);
    await assert.rejects(echo({ when: new Date() } as unknown as WireValue), (error: unknown) => {
      assert.ok(error instanceof ArgumentsInvalidError);
      assert.equal(error.details["path"], "payload.when");
      return true;
    });
    await assert.rejects(echo([2n ** 64n]), { name: "ArgumentsInvalidError" });
    await assert.rejects(echo(-(2n ** 63n) - 1n), { name: "ArgumentsInvalidError" });
    assert.equal(
      await callsTotal(client),
      before + 1,
      "nothing but the stats call reached the server",
    );
  });
});

describe("deadlines", () => {
  test("a call over its timeout fails with DeadlineExceededError and the handler is cancelled", async () => {
    const label = uniqueLabel("deadline");
    const started = Date.now();
    await assert.rejects(
      client.call("diagnostics/sleep", { agentId: agent, seconds: 5, label }, { timeoutMs: 300 }),
      DeadlineExceededError,
    );
    assert.ok(Date.now() - started < 3000, "rejected near the deadline, not when the sleep ended");
    const ending = await endingOf(client, label);
    assert.equal(ending.outcome, "cancelled");
    assert.ok(ending.elapsed < 4);
  });

  test("an absolute deadline works like a timeout", async () => {
    await assert.rejects(
      client.call(
        "diagnostics/sleep",
        { agentId: agent, seconds: 5 },
        { deadline: Date.now() + 200 },
      ),
      DeadlineExceededError,
    );
  });

  test("a deadline that has passed already fails with DeadlineExceededError", async () => {
    await assert.rejects(
      client.call("diagnostics/sleep", { agentId: agent, seconds: 1 }, { timeoutMs: 0 }),
      DeadlineExceededError,
    );
  });

  test("a call that finishes within its timeout returns its result", async () => {
    assert.equal(
      await client.call(
        "diagnostics/sleep",
        { agentId: agent, seconds: 0.05 },
        { timeoutMs: 10_000 },
      ),
      0.05,
    );
  });
});

describe("cancellation with AbortSignal", () => {
  test("aborting a running call rejects with the abort reason and cancels the server handler", async () => {
    const label = uniqueLabel("abort");
    const controller = new AbortController();
    const call = client.call(
      "diagnostics/sleep",
      { agentId: agent, seconds: 10, label },
      { signal: controller.signal },
    );
    await sleep(300);
    const aborted = Date.now();
    controller.abort();
    await assert.rejects(call, (error: unknown) => {
      assert.ok(error instanceof DOMException);
      assert.equal(error.name, "AbortError");
      return true;
    });
    assert.ok(Date.now() - aborted < 100, "rejected at once, without waiting for the server");
    const ending = await endingOf(client, label);
    assert.equal(ending.outcome, "cancelled");
    assert.ok(ending.elapsed < 9, `the handler ran ${ending.elapsed} s`);
  });

  test("the promise rejects with the exact reason given to abort()", async () => {
    const controller = new AbortController();
    const reason = new Error("user pressed escape");
    const call = client.call(
      "diagnostics/sleep",
      { agentId: agent, seconds: 10 },
      { signal: controller.signal },
    );
    setTimeout(() => controller.abort(reason), 50);
    await assert.rejects(call, (error: unknown) => error === reason);
  });

  test("an already aborted signal rejects at once and sends nothing", async () => {
    const before = await callsTotal(client);
    const reason = new Error("too late");
    await assert.rejects(
      client.call(
        "diagnostics/echo",
        { agentId: agent, payload: 1 },
        { signal: AbortSignal.abort(reason) },
      ),
      (error: unknown) => error === reason,
    );
    assert.equal(await callsTotal(client), before + 1, "only the second stats call was admitted");
  });

  test("AbortSignal.timeout() rejects with its TimeoutError and cancels the handler", async () => {
    const label = uniqueLabel("timeout-signal");
    await assert.rejects(
      client.call(
        "diagnostics/sleep",
        { agentId: agent, seconds: 10, label },
        { signal: AbortSignal.timeout(200) },
      ),
      { name: "TimeoutError" },
    );
    assert.equal((await endingOf(client, label)).outcome, "cancelled");
  });

  test("aborting after the result arrived changes nothing, and a signal is reusable", async () => {
    const controller = new AbortController();
    for (let i = 0; i < 3; i++) {
      assert.equal(await echo(i), i);
      assert.equal(
        await client.call(
          "diagnostics/echo",
          { agentId: agent, payload: i },
          { signal: controller.signal },
        ),
        i,
      );
    }
    controller.abort();
  });

  test("a late terminal frame for an aborted call is dropped and the connection stays usable", async () => {
    // Abort many short calls mid-flight: their terminal frames arrive after the abort.
    const controller = new AbortController();
    const calls = Array.from({ length: 50 }, (_, i) =>
      client.call(
        "diagnostics/sleep",
        { agentId: agent, seconds: 0.02 * (i % 5) },
        { signal: controller.signal },
      ),
    );
    controller.abort();
    const outcomes = await Promise.allSettled(calls);
    assert.ok(outcomes.every((outcome) => outcome.status === "rejected"));
    await sleep(200);
    assert.equal(await echo("still fine"), "still fine");
    assert.equal(client.statistics().pendingCalls, 0);
  });
});

describe("supersede", () => {
  test("a newer call with the same key cancels the older one on the server", async () => {
    const key = uniqueLabel("completion");
    const older = client.call(
      "diagnostics/sleep",
      { agentId: agent, seconds: 10 },
      { supersede: key },
    );
    await sleep(100);
    const newer = client.call(
      "diagnostics/sleep",
      { agentId: agent, seconds: 0.1 },
      { supersede: key },
    );
    await assert.rejects(older, (error: unknown) => {
      assert.ok(error instanceof CallCancelledError);
      assert.equal(error.code, "cancelled");
      assert.equal(error.reason, "superseded");
      assert.ok(error.state === "running" || error.state === "queued");
      return true;
    });
    assert.equal(await newer, 0.1);
  });

  test("calls with different keys do not supersede each other", async () => {
    const a = client.call(
      "diagnostics/sleep",
      { agentId: agent, seconds: 0.1 },
      { supersede: uniqueLabel("a") },
    );
    const b = client.call(
      "diagnostics/sleep",
      { agentId: agent, seconds: 0.1 },
      { supersede: uniqueLabel("b") },
    );
    assert.deepEqual(await Promise.all([a, b]), [0.1, 0.1]);
  });
});

describe("typed errors", () => {
  test("an unknown endpoint fails with UnknownEndpointError", async () => {
    await assert.rejects(client.call("nope/nothing"), (error: unknown) => {
      assert.ok(error instanceof UnknownEndpointError);
      assert.equal(error.code, "unknown-endpoint");
      return true;
    });
  });

  test("a mistyped argument fails with ArgumentsInvalidError and its path", async () => {
    await assert.rejects(
      client.call("diagnostics/sleep", { agentId: agent, seconds: "soon" }),
      (error: unknown) => {
        assert.ok(error instanceof ArgumentsInvalidError);
        assert.equal(error.details["path"], "seconds");
        return true;
      },
    );
  });

  test("an unknown agent fails with SessionNotFoundError naming it", async () => {
    await assert.rejects(
      client.call("diagnostics/echo", { agentId: "nope", payload: 1 }),
      (error: unknown) => {
        assert.ok(error instanceof SessionNotFoundError);
        assert.equal(error.details["agentId"], "nope");
        return true;
      },
    );
  });

  test("a SESSION_REFERENCE_* code arrives as SessionReferenceError with the exact code", async () => {
    await assert.rejects(
      client.call("sessionReferenceResolver/prepare", {
        agentId: agent,
        content: "see @self",
        references: [{ sessionId: agent }],
      }),
      (error: unknown) => {
        assert.ok(error instanceof SessionReferenceError);
        assert.match(error.code, /^SESSION_REFERENCE_/);
        return true;
      },
    );
  });

  test("a call larger than maxFrameBytes fails locally with TooLargeError", async () => {
    const before = await callsTotal(client);
    const limit = client.limits.maxFrameBytes;
    await assert.rejects(echo(new Uint8Array(limit + 1)), (error: unknown) => {
      assert.ok(error instanceof TooLargeError);
      assert.equal(error.details["limit"], limit);
      return true;
    });
    assert.equal(await callsTotal(client), before + 1, "the oversized call was not sent");
  });
});

describe("proxies", () => {
  test("positional arguments follow system/describe and the agent fills agentId", async () => {
    const proxy = client.agent(agent);
    assert.deepEqual(await proxy.diagnostics.echo({ x: [1, 2n ** 63n] }), { x: [1, 2n ** 63n] });
    const label = uniqueLabel("proxy");
    assert.equal(await proxy.diagnostics.sleep(0.01, label), 0.01);
    assert.equal((await endingOf(client, label)).outcome, "completed");
  });

  test("candidates(query, {signal}) and candidates({signal}) both take options", async () => {
    const resolver = client.agent(agent).sessionReferenceResolver;
    const controller = new AbortController();
    assert.ok(Array.isArray(await resolver.candidates("", { signal: controller.signal })));
    assert.ok(Array.isArray(await resolver.candidates({ signal: controller.signal })));
  });

  test("a trailing options object carries timeoutMs and signal through a proxy", async () => {
    const diagnostics = client.agent(agent).diagnostics;
    await assert.rejects(diagnostics.sleep(5, { timeoutMs: 200 }), DeadlineExceededError);
    const label = uniqueLabel("proxy-abort");
    const controller = new AbortController();
    const call = diagnostics.sleep(10, label, { signal: controller.signal });
    setTimeout(() => controller.abort(), 200);
    await assert.rejects(call, { name: "AbortError" });
    assert.equal((await endingOf(client, label)).outcome, "cancelled");
  });

  test("an options-shaped payload of an `any` parameter stays the payload", async () => {
    const diagnostics = client.agent(agent).diagnostics;
    assert.deepEqual(await diagnostics.echo({ supersede: "x" }), { supersede: "x" });
    assert.deepEqual(await diagnostics.echo({ supersede: "x" }, { timeoutMs: 5000 }), {
      supersede: "x",
    });
  });

  test("services() proxies endpoints without an agent; lookups are then positional", async () => {
    const services = client.services();
    const created = await services.agents.create(undefined, undefined, "via proxy");
    assert.equal(created.title, "via proxy");
    assert.equal(await services.diagnostics.echoRaw("raw"), "raw");
    assert.equal(await services.diagnostics.echo(created.agentId, "by id"), "by id");
  });

  test("surplus arguments and unknown endpoints fail locally", async () => {
    // Untyped (DynamicServices): the typed default would not compile these calls at all.
    const untyped = client.agent<DynamicServices>(agent);
    await assert.rejects(
      untyped.diagnostics.sleep(1, "label", "surplus", {}),
      ArgumentsInvalidError,
    );
    await assert.rejects(untyped.diagnostics.sleep(1, "label", 3), ArgumentsInvalidError);
    await assert.rejects(untyped.nope.nothing(), UnknownEndpointError);
  });

  test("concurrent first proxy calls share one system/describe", async () => {
    const fresh = await connect(server.endpoint);
    try {
      const before = await callsTotal(fresh);
      const diagnostics = fresh.agent(agent).diagnostics;
      const results = await Promise.all(Array.from({ length: 5 }, (_, i) => diagnostics.echo(i)));
      assert.deepEqual(results, [0, 1, 2, 3, 4]);
      // 5 echoes + 1 describe + this stats call.
      assert.equal(await callsTotal(fresh), before + 7);
      const description = await fresh.describe();
      assert.deepEqual(
        description.endpoints.get("diagnostics/sleep")?.params.map((p) => p.name),
        ["agentId", "seconds", "label"],
      );
    } finally {
      await fresh.close();
    }
  });

  test("declarations typed by an endpoint map layer onto the same proxy", async () => {
    interface Endpoints {
      "diagnostics/echo": { params: [payload?: WireValue]; result: WireValue };
      "diagnostics/sleep": { params: [seconds: number, label?: string]; result: number };
      "sessionReferenceResolver/candidates": { params: [query?: string]; result: WireMap[] };
    }
    const typed = client.agent<TypedServices<Endpoints>>(agent);
    const seconds: number = await typed.diagnostics.sleep(0.01, uniqueLabel("typed"), {
      timeoutMs: 10_000,
    });
    assert.equal(seconds, 0.01);
    assert.equal(await typed.diagnostics.echo("typed"), "typed");
    assert.ok(
      Array.isArray(
        await typed.sessionReferenceResolver.candidates("", {
          signal: new AbortController().signal,
        }),
      ),
    );
    // Checked by tsc, never run: a mistyped argument does not compile.
    // @ts-expect-error seconds is a number
    void (() => typed.diagnostics.sleep("soon"));
  });

  test("a proxy is not thenable", async () => {
    const proxy = client.agent(agent);
    assert.equal((proxy as { then?: unknown }).then, undefined);
    assert.equal(await Promise.resolve(proxy), proxy);
  });
});
