/**
 * msgpack for protocol v1 (docs/protocol.md §2), on top of `@msgpack/msgpack`.
 *
 * The library alone gets 64-bit integers wrong for this protocol in one direction or the
 * other: without `useBigInt64` it decodes uint64/int64 beyond 2^53 to inexact numbers, and
 * with it, it encodes every number ≥ 2^32 (or < -2^31) as float64, which the server refuses
 * wherever it expects an integer (a `createdAt` cursor, say). So the encoder runs with
 * `useBigInt64` and values are prepared first: a safe integer outside the 32-bit range becomes
 * a `bigint` (written as int64/uint64), and after decoding every `bigint` that fits a safe
 * integer becomes a `number` again. The rules, both ways:
 *
 * - `number` that is a safe integer → the smallest msgpack integer that holds it;
 * - any other `number` (fractions, ±2^53 and beyond, NaN, ±Infinity) → float64;
 * - `bigint` → int64 (negative) or uint64; outside -2^63..2^64-1 it cannot be sent;
 * - a received integer → `number` when `Number.isSafeInteger`, else `bigint`.
 *
 * The same pass enforces the rest of §2: map keys are strings, `undefined` map values are
 * omitted (nil is a value, absent means "use the default"), binary is a `Uint8Array`, and no
 * extension type is ever written (a `Date` or a class instance is refused, not converted).
 */

import { Decoder, Encoder } from "@msgpack/msgpack";

/** A value that can cross the wire. Maps are plain objects with string keys. */
export type WireValue =
  null | boolean | number | bigint | string | Uint8Array | readonly WireValue[] | WireMap;

/** A msgpack map. An `undefined` entry is omitted when encoding. */
export interface WireMap {
  readonly [key: string]: WireValue | undefined;
}

/** A value this codec refuses to encode; `path` says where in the frame (`args.items[2]`). */
export class EncodeError extends Error {
  constructor(
    readonly path: string,
    problem: string,
  ) {
    super(`${path}: ${problem}`);
    this.name = "EncodeError";
  }
}

/** A frame that is not well-formed msgpack for this protocol. */
export class DecodeError extends Error {
  override name = "DecodeError";
}

const INT32_MIN = -(2 ** 31);
const UINT32_LIMIT = 2 ** 32;
const INT64_MIN = -(2n ** 63n);
const UINT64_MAX = 2n ** 64n - 1n;
const SAFE_MAX = BigInt(Number.MAX_SAFE_INTEGER);
const SAFE_MIN = -SAFE_MAX;
/** Deeper than this is refused locally; the library's own limit is 100 and the server's 32. */
const MAX_DEPTH = 100;

const encoder = new Encoder({ useBigInt64: true, ignoreUndefined: true, maxDepth: MAX_DEPTH });
const decoder = new Decoder({
  useBigInt64: true,
  // §2.1: keys are strings everywhere; anything else makes the frame invalid.
  mapKeyConverter: (key: unknown): string => {
    if (typeof key !== "string") {
      throw new DecodeError(`map key must be a string, got ${typeof key}`);
    }
    return key;
  },
});

function isPlainObject(value: object): value is WireMap {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * `value` as the encoder must see it: wide safe integers as `bigint`, everything checked.
 * Containers are copied only where something inside them changed.
 */
function prepare(value: unknown, path: string, depth: number): unknown {
  switch (typeof value) {
    case "number":
      return Number.isSafeInteger(value) && (value < INT32_MIN || value >= UINT32_LIMIT)
        ? BigInt(value)
        : value;
    case "bigint":
      if (value < INT64_MIN || value > UINT64_MAX) {
        throw new EncodeError(path, "integer out of the 64-bit range (-2^63 .. 2^64-1)");
      }
      return value;
    case "string":
    case "boolean":
      return value;
    case "object":
      break;
    default:
      throw new EncodeError(path, `cannot encode a value of type ${typeof value}`);
  }
  if (value === null || value instanceof Uint8Array) {
    return value;
  }
  if (depth >= MAX_DEPTH) {
    throw new EncodeError(path, `nested deeper than ${MAX_DEPTH} levels`);
  }
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      // An array has no "absent" element: undefined is sent as nil, as JSON sends null.
      const prepared = item === undefined ? null : prepare(item, `${path}[${i}]`, depth + 1);
      if (prepared !== item) {
        copy ??= value.slice();
        copy[i] = prepared;
      }
    }
    return copy ?? value;
  }
  if (!isPlainObject(value)) {
    const kind = value.constructor?.name ?? "object";
    throw new EncodeError(
      path,
      `cannot encode a ${kind} (plain objects, arrays and Uint8Array only)`,
    );
  }
  let copy: Record<string, unknown> | undefined;
  for (const key of Object.keys(value)) {
    const item = value[key];
    if (item === undefined) {
      continue; // omitted by the encoder (ignoreUndefined)
    }
    const prepared = prepare(item, path === "" ? key : `${path}.${key}`, depth + 1);
    if (prepared !== item) {
      copy ??= { ...value };
      copy[key] = prepared;
    }
  }
  return copy ?? value;
}

/**
 * Encode one frame (a map).
 *
 * @throws EncodeError a value cannot be sent (see the module rules).
 */
export function encodeFrame(frame: WireMap): Uint8Array {
  return encoder.encode(prepare(frame, "", 0));
}

/** Integers that fit a safe integer become numbers again, in place (the tree is fresh). */
function normalize(value: unknown): unknown {
  if (typeof value === "bigint") {
    return value >= SAFE_MIN && value <= SAFE_MAX ? Number(value) : value;
  }
  if (typeof value !== "object" || value === null || value instanceof Uint8Array) {
    return value;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (typeof item === "object" || typeof item === "bigint") {
        value[i] = normalize(item);
      }
    }
    return value;
  }
  const map = value as Record<string, unknown>;
  for (const key in map) {
    const item = map[key];
    if (typeof item === "object" || typeof item === "bigint") {
      map[key] = normalize(item);
    }
  }
  return value;
}

/**
 * Decode one frame.
 *
 * @throws DecodeError the bytes are not one msgpack value with string map keys.
 */
export function decodeFrame(bytes: Uint8Array): unknown {
  let value: unknown;
  try {
    value = decoder.decode(bytes);
  } catch (error) {
    if (error instanceof DecodeError) {
      throw error;
    }
    throw new DecodeError(
      `undecodable frame: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  return normalize(value);
}
