/**
 * The sans-IO client protocol, fed frames as a server would send them: queueing before the
 * welcome, one end per call, connection-level errors, heartbeats and silence.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { decodeFrame, encodeFrame, type WireMap } from "../src/codec.js";
import {
  CallCancelledError,
  DeadlineExceededError,
  InternalError,
  PeerLostError,
  TooLargeError,
  UnavailableError,
  UnsupportedVersionError,
} from "../src/errors.js";
import { ClientProtocol, type ProtocolEvent } from "../src/protocol.js";

const WELCOME = {
  type: "welcome",
  version: 1,
  name: "agent-actors",
  heartbeatMs: 1000,
  peerTimeoutMs: 2500,
  maxFrameBytes: 8_388_608,
  maxInFlight: 4096,
};

function frame(message: WireMap): Uint8Array {
  return encodeFrame(message);
}

/** The messages of the send events, decoded. */
function sent(events: readonly ProtocolEvent<string>[]): WireMap[] {
  return events.flatMap((event) =>
    event.kind === "send" ? [decodeFrame(event.frame) as WireMap] : [],
  );
}

function ready(now = 0): ClientProtocol<string> {
  const protocol = new ClientProtocol<string>("test", now);
  protocol.hello(now);
  protocol.receive(frame(WELCOME), now);
  assert.equal(protocol.state, "ready");
  return protocol;
}

function failures(events: readonly ProtocolEvent<string>[]): Map<string, Error> {
  return new Map(
    events.flatMap((event) => (event.kind === "failure" ? [[event.handle, event.error]] : [])),
  );
}

describe("before the welcome", () => {
  test("calls are queued, not sent, and hello is re-sent every heartbeat", () => {
    const protocol = new ClientProtocol<string>("test", 0);
    assert.deepEqual(decodeFrame(protocol.hello(0)), {
      type: "hello",
      versions: [1],
      name: "test",
    });
    assert.deepEqual(protocol.submit("a", { endpoint: "x/y", args: {} }, 10).events, []);
    assert.deepEqual(protocol.submit("b", { endpoint: "x/z", args: { n: 1 } }, 20).events, []);
    assert.deepEqual(sent(protocol.tick(999, false)), []);
    assert.deepEqual(sent(protocol.tick(1000, false)), [
      { type: "hello", versions: [1], name: "test" },
    ]);
    assert.deepEqual(sent(protocol.tick(2000, false)), [
      { type: "hello", versions: [1], name: "test" },
    ]);
    assert.equal(protocol.state, "greeting");
  });

  test("the welcome sends the queued calls in order, with the budget left at that moment", () => {
    const protocol = new ClientProtocol<string>("test", 0);
    protocol.submit("a", { endpoint: "x/y", args: {}, deadlineAt: 5000 }, 0);
    protocol.submit("b", { endpoint: "x/z", args: { n: 1 }, supersede: "k" }, 0);
    const events = protocol.receive(frame(WELCOME), 1500);
    assert.deepEqual(sent(events), [
      { type: "call", id: 1, endpoint: "x/y", args: {}, deadlineMs: 3500 },
      { type: "call", id: 2, endpoint: "x/z", args: { n: 1 }, supersede: "k" },
    ]);
    assert.equal(events.at(-1)?.kind, "ready");
  });

  test("a second welcome (the answer to a re-sent hello) fails no call and resends nothing", () => {
    const protocol = new ClientProtocol<string>("test", 0);
    protocol.submit("a", { endpoint: "x/y", args: {} }, 0);
    protocol.receive(frame(WELCOME), 10);
    assert.deepEqual(protocol.receive(frame(WELCOME), 20), []);
    assert.equal(protocol.inFlight, 1);
    const events = protocol.receive(frame({ type: "result", id: 1, value: "ok" }), 30);
    assert.deepEqual(events, [{ kind: "result", handle: "a", value: "ok" }]);
  });

  test("a queued call given up is never sent and needs no cancel", () => {
    const protocol = new ClientProtocol<string>("test", 0);
    const { id } = protocol.submit("a", { endpoint: "x/y", args: {} }, 0);
    assert.deepEqual(protocol.abandon(id, "caller"), []);
    assert.deepEqual(sent(protocol.receive(frame(WELCOME), 10)), []);
  });

  test("a queued call that exceeds the welcome's smaller frame limit fails at the welcome", () => {
    const protocol = new ClientProtocol<string>("test", 0);
    protocol.submit("a", { endpoint: "x/y", args: { blob: new Uint8Array(2000) } }, 0);
    const events = protocol.receive(frame({ ...WELCOME, maxFrameBytes: 1000 }), 10);
    assert.ok(failures(events).get("a") instanceof TooLargeError);
    assert.deepEqual(sent(events), []);
  });

  test("unsupported-version fails queued calls with UnsupportedVersionError", () => {
    const protocol = new ClientProtocol<string>("test", 0);
    protocol.submit("a", { endpoint: "x/y", args: {} }, 0);
    const events = protocol.receive(
      frame({
        type: "error",
        id: null,
        code: "unsupported-version",
        message: "no",
        details: { supported: [1] },
      }),
      5,
    );
    assert.ok(failures(events).get("a") instanceof UnsupportedVersionError);
    assert.equal(protocol.state, "lost");
  });
});

describe("calls", () => {
  test("ids count up from 1 and each call ends once", () => {
    const protocol = ready();
    const first = protocol.submit("a", { endpoint: "x/y", args: {} }, 0);
    const second = protocol.submit("b", { endpoint: "x/y", args: {} }, 0);
    assert.deepEqual([first.id, second.id], [1, 2]);
    assert.deepEqual(protocol.receive(frame({ type: "result", id: 2, value: [1] }), 1), [
      { kind: "result", handle: "b", value: [1] },
    ]);
    assert.deepEqual(protocol.receive(frame({ type: "result", id: 2, value: [1] }), 1), []);
    assert.deepEqual(protocol.receive(frame({ type: "result", id: 99, value: null }), 1), []);
  });

  test("an abandoned call sends a cancel with its reason and drops its late terminal frame", () => {
    const protocol = ready();
    const { id } = protocol.submit("a", { endpoint: "x/y", args: {} }, 0);
    assert.deepEqual(sent(protocol.abandon(id, "deadline")), [
      { type: "cancel", id, reason: "deadline" },
    ]);
    assert.deepEqual(protocol.abandon(id, "caller"), []);
    assert.deepEqual(protocol.receive(frame({ type: "result", id, value: 1 }), 1), []);
  });

  test("deadlineMs is the remaining budget, clamped at 0", () => {
    const protocol = ready();
    assert.equal(
      sent(protocol.submit("a", { endpoint: "x/y", args: {}, deadlineAt: 250 }, 0).events)[0]?.[
        "deadlineMs"
      ],
      250,
    );
    assert.equal(
      sent(protocol.submit("b", { endpoint: "x/y", args: {}, deadlineAt: 10 }, 50).events)[0]?.[
        "deadlineMs"
      ],
      0,
    );
  });

  test("error frames become typed errors with their details", () => {
    const protocol = ready();
    protocol.submit("a", { endpoint: "x/y", args: {} }, 0);
    protocol.submit("b", { endpoint: "x/y", args: {} }, 0);
    protocol.submit("c", { endpoint: "x/y", args: {} }, 0);
    const events = [
      ...protocol.receive(
        frame({
          type: "error",
          id: 1,
          code: "cancelled",
          message: "m",
          details: { state: "queued", reason: "shutdown" },
        }),
        1,
      ),
      ...protocol.receive(
        frame({
          type: "error",
          id: 2,
          code: "deadline-exceeded",
          message: "m",
          details: { state: "running", reason: "deadline" },
        }),
        1,
      ),
      ...protocol.receive(
        frame({ type: "error", id: 3, code: "brand-new-code", message: "m", details: { x: 1 } }),
        1,
      ),
    ];
    const errors = failures(events);
    const cancelled = errors.get("a");
    assert.ok(cancelled instanceof CallCancelledError);
    assert.equal(cancelled.state, "queued");
    assert.equal(cancelled.reason, "shutdown");
    const deadline = errors.get("b");
    assert.ok(deadline instanceof DeadlineExceededError);
    assert.equal(deadline.details["state"], "running");
    const unknown = errors.get("c");
    assert.ok(unknown instanceof InternalError);
    assert.equal(unknown.code, "internal");
    assert.deepEqual(unknown.details, { x: 1, code: "brand-new-code" });
  });

  test("a connection-level error naming a pending call fails that call only", () => {
    const protocol = ready();
    protocol.submit("a", { endpoint: "x/y", args: {} }, 0);
    protocol.submit("b", { endpoint: "x/y", args: {} }, 0);
    const events = protocol.receive(
      frame({
        type: "error",
        id: null,
        code: "bad-request",
        message: "call id 1 is already in flight",
        details: { id: 1 },
      }),
      1,
    );
    assert.deepEqual([...failures(events).keys()], ["a"]);
    assert.equal(protocol.inFlight, 1);
    const other = protocol.receive(
      frame({ type: "error", code: "bad-request", message: "undecodable", details: {} }),
      1,
    );
    assert.deepEqual(
      other.map((event) => event.kind),
      ["notice"],
    );
    assert.equal(protocol.state, "ready");
  });

  test("a call over the frame limit is refused before it is sent", () => {
    const protocol = ready();
    assert.throws(
      () => protocol.submit("a", { endpoint: "x/y", args: { blob: new Uint8Array(8_388_608) } }, 0),
      (error: unknown) => error instanceof TooLargeError && error.details["limit"] === 8_388_608,
    );
    assert.equal(protocol.inFlight, 0);
  });
});

describe("connection loss", () => {
  test("peer-lost from the server fails every call, fails new ones fast, and re-hellos", () => {
    const protocol = ready();
    protocol.submit("a", { endpoint: "x/y", args: {} }, 0);
    const events = protocol.receive(
      frame({
        type: "error",
        id: null,
        code: "peer-lost",
        message: "unknown peer: send hello first",
        details: { id: 1 },
      }),
      10,
    );
    assert.ok(failures(events).get("a") instanceof PeerLostError);
    assert.equal(protocol.state, "lost");
    assert.throws(() => protocol.submit("b", { endpoint: "x/y", args: {} }, 20), PeerLostError);
    assert.deepEqual(sent(protocol.tick(1000, false)), [
      { type: "hello", versions: [1], name: "test" },
    ]);
    protocol.receive(frame(WELCOME), 1100);
    assert.equal(protocol.state, "ready");
  });

  test("silence past peerTimeoutMs loses the server, unless frames wait unread", () => {
    const protocol = ready();
    protocol.submit("a", { endpoint: "x/y", args: {} }, 0);
    assert.equal(failures(protocol.tick(2500, false)).size, 0);
    assert.equal(failures(protocol.tick(2600, true)).size, 0);
    assert.equal(protocol.state, "ready");
    const events = protocol.tick(2600, false);
    assert.ok(failures(events).get("a") instanceof PeerLostError);
    assert.equal(protocol.state, "lost");
  });

  test("every frame from the server counts as a sign of life", () => {
    const protocol = ready();
    protocol.receive(frame({ type: "pong" }), 2000);
    protocol.tick(4000, false);
    assert.equal(protocol.state, "ready");
  });

  test("pings are answered and sent every heartbeat while ready", () => {
    const protocol = ready();
    assert.deepEqual(sent(protocol.receive(frame({ type: "ping" }), 10)), [{ type: "pong" }]);
    assert.deepEqual(sent(protocol.tick(999, false)), []);
    assert.deepEqual(sent(protocol.tick(1000, false)), [{ type: "ping" }]);
    assert.deepEqual(sent(protocol.tick(1500, false)), []);
    assert.deepEqual(sent(protocol.tick(2000, false)), [{ type: "ping" }]);
  });

  test("bye from the server fails calls with UnavailableError", () => {
    const protocol = ready();
    protocol.submit("a", { endpoint: "x/y", args: {} }, 0);
    assert.ok(
      failures(protocol.receive(frame({ type: "bye" }), 1)).get("a") instanceof UnavailableError,
    );
    assert.equal(protocol.state, "lost");
  });

  test("an invalid frame from the server loses it", () => {
    for (const bad of [
      Buffer.from("c1", "hex"),
      frame({ type: "result" }),
      frame({ type: "mystery" }),
      frame({ type: "error", id: -1, code: "x" }),
      encodeFrame({
        type: "welcome",
        version: 2,
        heartbeatMs: 1,
        peerTimeoutMs: 1,
        maxFrameBytes: 1,
        maxInFlight: 1,
      }),
    ]) {
      const protocol = ready();
      protocol.submit("a", { endpoint: "x/y", args: {} }, 0);
      assert.ok(failures(protocol.receive(bad, 1)).get("a") instanceof PeerLostError);
    }
  });

  test("hello, call and cancel from a server are ignored", () => {
    const protocol = ready();
    for (const type of ["hello", "call", "cancel"]) {
      assert.deepEqual(protocol.receive(frame({ type }), 1), []);
    }
    assert.equal(protocol.state, "ready");
  });

  test("close fails calls with UnavailableError, sends bye, and refuses new calls", () => {
    const protocol = ready();
    protocol.submit("a", { endpoint: "x/y", args: {} }, 0);
    const events = protocol.close();
    assert.ok(failures(events).get("a") instanceof UnavailableError);
    assert.deepEqual(sent(events), [{ type: "bye" }]);
    assert.throws(() => protocol.submit("b", { endpoint: "x/y", args: {} }, 1), UnavailableError);
    assert.deepEqual(protocol.tick(5000, false), []);
  });
});
