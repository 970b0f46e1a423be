/**
 * The mention codec (session-reference.md §2): every shared vector, the same results as
 * upstream's regex on random text, linear time, and round trips with a real server's
 * `candidates` mentions and `parseMentions`.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  type Client,
  connect,
  decodeSessionReferenceUri,
  encodeSessionReferenceUri,
  formatSessionReferenceMention,
  type ParsedSessionReferenceText,
  parseSessionReferenceText,
  SESSION_REFERENCE_SCHEME,
  SessionReferenceError,
  type WireValue,
} from "../src/index.js";
import { type Server, startServer } from "./server.js";
import { createAgent } from "./support.js";

interface Vectors {
  readonly scheme: string;
  readonly errorCode: string;
  readonly encode: readonly { sessionId: string; uri: string }[];
  readonly reject: readonly { uri: string; rule: string; note?: string; message: string }[];
  readonly format: readonly { sessionId: string; label?: string; mention: string }[];
  readonly parse: readonly (
    | { text: string; result: ParsedSessionReferenceText; note?: string }
    | { text: string; error: { code: string; message: string }; note?: string }
  )[];
}

/** This package's directory (the tests run from dist/test). */
const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const VECTORS = JSON.parse(
  readFileSync(join(PACKAGE, "../../tests/actors/session_references/mention_vectors.json"), "utf8"),
) as Vectors;

/** What a call or a parse gave: its result, or its error's code and message. */
type Outcome =
  | { readonly result: ParsedSessionReferenceText }
  | { readonly error: { readonly code: string; readonly message: string } };

function outcome(parse: () => ParsedSessionReferenceText): Outcome {
  try {
    return { result: parse() };
  } catch (error) {
    assert.ok(error instanceof SessionReferenceError, String(error));
    return { error: { code: error.code, message: error.message } };
  }
}

async function remoteOutcome(parse: () => Promise<WireValue>): Promise<Outcome> {
  try {
    return { result: (await parse()) as unknown as ParsedSessionReferenceText };
  } catch (error) {
    assert.ok(error instanceof SessionReferenceError, String(error));
    return { error: { code: error.code, message: error.message } };
  }
}

describe("the shared vectors", () => {
  test("the scheme and error code", () => {
    assert.equal(SESSION_REFERENCE_SCHEME, VECTORS.scheme);
    assert.equal(VECTORS.errorCode, "SESSION_REFERENCE_INVALID_REFERENCE");
  });

  test("encode: each id gives its URI, which decodes back to the id", () => {
    assert.ok(VECTORS.encode.length > 0);
    for (const { sessionId, uri } of VECTORS.encode) {
      assert.equal(encodeSessionReferenceUri(sessionId), uri, JSON.stringify(sessionId));
      assert.equal(decodeSessionReferenceUri(uri), sessionId, uri);
    }
  });

  test("reject: each URI fails with INVALID_REFERENCE and the exact message", () => {
    assert.ok(VECTORS.reject.length > 0);
    for (const { uri, rule, message } of VECTORS.reject) {
      assert.throws(
        () => decodeSessionReferenceUri(uri),
        (error: unknown) => {
          assert.ok(error instanceof SessionReferenceError, `${rule}: ${JSON.stringify(uri)}`);
          assert.equal(error.code, VECTORS.errorCode);
          assert.equal(error.message, message);
          return true;
        },
      );
    }
  });

  test("format: each id and label give the exact mention, which parses back", () => {
    assert.ok(VECTORS.format.length > 0);
    for (const { sessionId, label, mention } of VECTORS.format) {
      assert.equal(formatSessionReferenceMention(sessionId, label), mention);
      assert.deepEqual(parseSessionReferenceText(mention), {
        text: "@" + (label ?? sessionId),
        references: [{ sessionId, label: label ?? sessionId }],
      });
    }
  });

  test("parse: each text gives the exact result or the error of its first bad match", () => {
    assert.ok(VECTORS.parse.length > 0);
    for (const vector of VECTORS.parse) {
      const expected: Outcome =
        "error" in vector ? { error: vector.error } : { result: vector.result };
      assert.deepEqual(
        outcome(() => parseSessionReferenceText(vector.text)),
        expected,
        JSON.stringify(vector.text),
      );
    }
  });
});

describe("decoding", () => {
  test("a failure to decode keeps the inner failure as cause", () => {
    for (const uri of [
      "dsh-session:not-canonical",
      "dsh-session:eyJpZCI6IngifQ",
      "dsh-session:IiJ",
    ]) {
      assert.throws(
        () => decodeSessionReferenceUri(uri),
        (error: unknown) => {
          assert.ok(error instanceof SessionReferenceError);
          assert.ok(error.cause instanceof Error, uri);
          return true;
        },
      );
    }
  });

  test("invalid UTF-8 and a byte-order mark are refused", () => {
    const bytes = (...parts: (string | number[])[]): string =>
      SESSION_REFERENCE_SCHEME +
      Buffer.concat(
        parts.map((part) => (typeof part === "string" ? Buffer.from(part) : Buffer.from(part))),
      ).toString("base64url");
    for (const uri of [bytes('"', [0xff], '"'), bytes([0xef, 0xbb, 0xbf], '"x"'), bytes('"x" ')]) {
      assert.throws(() => decodeSessionReferenceUri(uri), SessionReferenceError, uri);
    }
    assert.equal(decodeSessionReferenceUri(bytes('"x"')), "x");
  });

  test("random ids round-trip", () => {
    const random = seeded(7);
    for (let i = 0; i < 500; i += 1) {
      const id = randomText(random, ID_PIECES, 8);
      assert.equal(decodeSessionReferenceUri(encodeSessionReferenceUri(id)), id);
      assert.deepEqual(parseSessionReferenceText(formatSessionReferenceMention(id, id)), {
        text: "@" + id,
        references: [{ sessionId: id, label: id }],
      });
    }
  });
});

// -- upstream's regex, as a reference on short texts -------------------------------------------

const UPSTREAM = /@\[((?:\\.|[^\\\]])*)\]\((dsh-session:[^\s)]*)\)|(dsh-session:[A-Za-z0-9_-]+)/gu;

/** Upstream's parse: a global regex replace (quadratic on some texts; fine on short ones). */
function upstreamParse(text: string): ParsedSessionReferenceText {
  const references: { sessionId: string; label: string }[] = [];
  const replaced = text.replace(
    UPSTREAM,
    (_match, label: string | undefined, markdownUri: string | undefined, bareUri?: string) => {
      const sessionId = decodeSessionReferenceUri((markdownUri ?? bareUri)!);
      const shown =
        label === undefined
          ? sessionId
          : label.replace(/\\(.)/gu, (_pair, character: string) => character);
      references.push({ sessionId, label: shown });
      return "@" + shown;
    },
  );
  return { text: replaced, references };
}

/** Pieces random texts are made of: every character and token the grammar cares about. */
const TEXT_PIECES = [
  "@[",
  "@",
  "[",
  "]",
  "](",
  "(",
  ")",
  "\\",
  "\\\\",
  "\\]",
  "\n",
  "\r",
  "\u2028",
  "\u0085",
  " ",
  "\u00a0",
  "\ufeff",
  "\t",
  "x",
  "-",
  ".",
  "=",
  "%",
  "源",
  "😀",
  "dsh-session:",
  "dsh-session:",
  "InNvdXJjZSI",
  "InNvdXJjZSI",
  "Im9uZSI",
  "IiJ",
  "IiI",
  "dsh-session:InNvdXJjZSI",
  "](dsh-session:InNvdXJjZSI)",
  "](dsh-session:InNvdXJjZV0i)",
  "@[a](dsh-session:Im9uZSI)",
];
const ID_PIECES = ["a", "]", "\\", '"', "/", "\n", "\u0001", "\u2028", "源", "😀", "\ud800", " "];

/** A small deterministic generator (mulberry32), so a failure can be reproduced. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomText(random: () => number, pieces: readonly string[], maxPieces: number): string {
  const count = Math.floor(random() * (maxPieces + 1));
  let text = "";
  for (let i = 0; i < count; i += 1) {
    text += pieces[Math.floor(random() * pieces.length)];
  }
  return text;
}

function randomTexts(seed: number, count: number, maxPieces: number): string[] {
  const random = seeded(seed);
  return Array.from({ length: count }, () => randomText(random, TEXT_PIECES, maxPieces));
}

describe("parsing", () => {
  test("random texts parse as upstream's global regex does", () => {
    for (const text of randomTexts(1, 20_000, 14)) {
      assert.deepEqual(
        outcome(() => parseSessionReferenceText(text)),
        outcome(() => upstreamParse(text)),
        JSON.stringify(text),
      );
    }
  });

  test("the parse is linear: 50,000 repeats of @[ and of other worst cases", () => {
    const n = 50_000;
    for (const text of [
      "@[".repeat(n),
      "@[" + "\\".repeat(2 * n),
      "@[x](dsh-session:".repeat(n),
      "@[x](dsh-session:x".repeat(n) + ")",
      "@[x]".repeat(n),
      "@[a\\\n".repeat(n),
      "@[" + "@[x](dsh-session:".repeat(n),
      "@[".repeat(n) + "](dsh-session:InNvdXJjZSI)",
      "dsh-session:".repeat(n),
      "@[](dsh-session:" + "A".repeat(n),
    ]) {
      const started = performance.now();
      const parsed = outcome(() => parseSessionReferenceText(text));
      const elapsed = performance.now() - started;
      assert.ok(elapsed < 5000, `${elapsed} ms for ${JSON.stringify(text.slice(0, 20))}…`);
      assert.ok("result" in parsed || "error" in parsed);
    }
    const nested = parseSessionReferenceText("@[".repeat(n) + "](dsh-session:InNvdXJjZSI)");
    assert.deepEqual(nested.references, [{ sessionId: "source", label: "@[".repeat(n - 1) }]);
  });
});

// -- against a real server ----------------------------------------------------------------------

describe("with a server", () => {
  let server: Server;
  let client: Client;
  let viewer: string;
  const titles = ["bracket ] and \\ backslash", "源]会话 \\\\ 😀", "emoji 🎉] [x](y) @[z"];
  const created = new Map<string, string>();

  before(async () => {
    server = await startServer();
    client = await connect(server.endpoint, { name: "ts-mentions" });
    for (const title of titles) {
      created.set(await createAgent(client, title), title);
    }
    viewer = await createAgent(client, "viewer");
  });

  after(async () => {
    await client?.close();
    await server?.stop();
  });

  async function serverParse(text: string): Promise<Outcome> {
    return remoteOutcome(() =>
      client.call("sessionReferenceResolver/parseMentions", { agentId: viewer, text }),
    );
  }

  test("each candidate's mention parses to its sessionId and label", async () => {
    const candidates = await client.call<
      { sessionId: string; label: string; displayTitle: string; mention: string }[]
    >("sessionReferenceResolver/candidates", { agentId: viewer, query: "" });
    const mine = candidates.filter((candidate) => created.has(candidate.sessionId));
    assert.equal(mine.length, titles.length);
    for (const candidate of mine) {
      const title = created.get(candidate.sessionId);
      assert.equal(candidate.displayTitle, title);
      assert.equal(candidate.label, title);
      assert.equal(
        candidate.mention,
        formatSessionReferenceMention(candidate.sessionId, candidate.displayTitle),
      );
      assert.deepEqual(parseSessionReferenceText(candidate.mention), {
        text: "@" + candidate.label,
        references: [{ sessionId: candidate.sessionId, label: candidate.label }],
      });
    }
    const text = `ask ${mine.map((c) => c.mention).join(" and ")}, then dsh-session:InNvdXJjZSI.`;
    const local = outcome(() => parseSessionReferenceText(text));
    assert.deepEqual(local, await serverParse(text));
    assert.ok("result" in local);
    assert.deepEqual(
      local.result.references.slice(0, mine.length),
      mine.map((c) => ({ sessionId: c.sessionId, label: c.label })),
    );
  });

  test("parseMentions and the local parse agree, errors included", async () => {
    const texts = [
      ...VECTORS.parse.map((vector) => vector.text),
      ...randomTexts(2, 300, 14),
      "@[".repeat(5000) + "](dsh-session:InNvdXJjZSI)",
      "@[x](dsh-session:".repeat(2000) + ")",
      "@[x](dsh-session:".repeat(2000) + "InNvdXJjZSI)",
    ];
    for (const text of texts) {
      assert.deepEqual(
        outcome(() => parseSessionReferenceText(text)),
        await serverParse(text),
        JSON.stringify(text),
      );
    }
  });
});
