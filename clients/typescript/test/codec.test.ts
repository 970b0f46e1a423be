/** The msgpack rules of docs/protocol.md §2, byte by byte: frames, integer widths, refusals. */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  decodeFrame,
  DecodeError,
  encodeFrame,
  EncodeError,
  type WireValue,
} from "../src/codec.js";
import { encodeCancel, encodeHello, PING } from "../src/messages.js";

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes)
    .toString("hex")
    .replace(/(..)(?!$)/g, "$1 ");
}

/** The bytes of `value` as the value of key "v" in a one-entry map. */
function valueBytes(value: WireValue): string {
  const frame = encodeFrame({ v: value });
  assert.equal(hex(frame.subarray(0, 3)), "81 a1 76");
  return hex(frame.subarray(3));
}

describe("frames of §17", () => {
  test("ping, hello and cancel encode to the documented bytes", () => {
    assert.equal(hex(PING), "81 a4 74 79 70 65 a4 70 69 6e 67");
    assert.equal(
      hex(encodeHello("ts-host")),
      "83 a4 74 79 70 65 a5 68 65 6c 6c 6f a8 76 65 72 73 69 6f 6e 73 91 01 a4 6e 61 6d 65 " +
        "a7 74 73 2d 68 6f 73 74",
    );
    assert.equal(
      hex(encodeCancel(4, "caller")),
      "83 a4 74 79 70 65 a6 63 61 6e 63 65 6c a2 69 64 04 a6 72 65 61 73 6f 6e a6 63 61 6c " +
        "6c 65 72",
    );
  });
});

describe("integers", () => {
  test("safe integers take the smallest integer format that holds them", () => {
    assert.equal(valueBytes(5), "05");
    assert.equal(valueBytes(-5), "fb");
    assert.equal(valueBytes(200), "cc c8");
    assert.equal(valueBytes(2 ** 31 - 1), "ce 7f ff ff ff");
    assert.equal(valueBytes(2 ** 31), "ce 80 00 00 00");
    assert.equal(valueBytes(-(2 ** 31)), "d2 80 00 00 00");
    assert.equal(valueBytes(2 ** 32 - 1), "ce ff ff ff ff");
    assert.equal(valueBytes(2 ** 32), "cf 00 00 00 01 00 00 00 00");
    assert.equal(valueBytes(-(2 ** 31) - 1), "d3 ff ff ff ff 7f ff ff ff");
    assert.equal(valueBytes(Number.MAX_SAFE_INTEGER), "cf 00 1f ff ff ff ff ff ff");
    assert.equal(valueBytes(-Number.MAX_SAFE_INTEGER), "d3 ff e0 00 00 00 00 00 01");
  });

  test("bigints are int64 or uint64 at the edges of both ranges", () => {
    assert.equal(valueBytes(2n ** 64n - 1n), "cf ff ff ff ff ff ff ff ff");
    assert.equal(valueBytes(2n ** 63n), "cf 80 00 00 00 00 00 00 00");
    assert.equal(valueBytes(-(2n ** 63n)), "d3 80 00 00 00 00 00 00 00");
    assert.equal(valueBytes(-1n), "d3 ff ff ff ff ff ff ff ff");
  });

  test("non-integers and integers beyond 2^53 as numbers are float64", () => {
    assert.equal(valueBytes(1.5), "cb 3f f8 00 00 00 00 00 00");
    assert.equal(valueBytes(2 ** 53), "cb 43 40 00 00 00 00 00 00");
    assert.equal(valueBytes(2 ** 64), "cb 43 f0 00 00 00 00 00 00");
  });

  test("bigints outside -2^63..2^64-1 are refused, not wrapped", () => {
    assert.throws(() => encodeFrame({ v: 2n ** 64n }), EncodeError);
    assert.throws(() => encodeFrame({ v: -(2n ** 63n) - 1n }), EncodeError);
  });

  test("decoded 64-bit integers are numbers when safe and bigints otherwise", () => {
    const decode = (bytes: string): unknown =>
      (decodeFrame(Buffer.from(`81a176${bytes.replace(/ /g, "")}`, "hex")) as { v: unknown }).v;
    assert.equal(decode("cf 00 00 01 00 00 00 00 00"), 2 ** 40);
    assert.equal(decode("cf 00 1f ff ff ff ff ff ff"), Number.MAX_SAFE_INTEGER);
    assert.equal(decode("cf 00 20 00 00 00 00 00 00"), 2n ** 53n);
    assert.equal(decode("cf ff ff ff ff ff ff ff ff"), 2n ** 64n - 1n);
    assert.equal(decode("d3 ff ff ff ff ff ff ff fb"), -5);
    assert.equal(decode("d3 80 00 00 00 00 00 00 00"), -(2n ** 63n));
    assert.deepEqual(decode("92 cf 00 20 00 00 00 00 00 00 81 a1 78 d3 ff ff ff ff ff ff ff ff"), [
      2n ** 53n,
      { x: -1 },
    ]);
  });

  test("the caller's value is not modified when wide integers are converted", () => {
    const args = { list: [2 ** 40, 1], nested: { at: 2 ** 41 } };
    encodeFrame({ args });
    assert.deepEqual(args, { list: [2 ** 40, 1], nested: { at: 2 ** 41 } });
  });
});

describe("maps, nil and absent", () => {
  test("undefined map entries are omitted and undefined array elements are nil", () => {
    assert.equal(hex(encodeFrame({ a: 1, b: undefined })), "81 a1 61 01");
    assert.equal(valueBytes([undefined] as unknown as WireValue), "91 c0");
    assert.equal(valueBytes(null), "c0");
  });

  test("binary is bin and text is str", () => {
    assert.equal(valueBytes(new Uint8Array([1, 2])), "c4 02 01 02");
    assert.equal(valueBytes("hi"), "a2 68 69");
    const decoded = decodeFrame(encodeFrame({ v: new Uint8Array([1, 2]) })) as { v: unknown };
    assert.ok(decoded.v instanceof Uint8Array);
  });

  test("values that are not plain data are refused with their path", () => {
    const refused: [unknown, string][] = [
      [{ v: new Date() }, "v"],
      [{ v: { inner: [1, new Map()] } }, "v.inner[1]"],
      [{ v: () => 1 }, "v"],
      [{ v: Symbol("s") }, "v"],
    ];
    for (const [frame, path] of refused) {
      assert.throws(
        () => encodeFrame(frame as never),
        (error: unknown) => error instanceof EncodeError && error.path === path,
      );
    }
  });

  test("a map key that is not a string makes a frame undecodable", () => {
    // {1: 2}
    assert.throws(() => decodeFrame(Buffer.from("810102", "hex")), DecodeError);
  });

  test("truncated bytes are undecodable", () => {
    assert.throws(() => decodeFrame(Buffer.from("82a174", "hex")), DecodeError);
  });
});
