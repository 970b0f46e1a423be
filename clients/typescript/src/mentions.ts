/**
 * The mention codec of DSH session references: canonical `dsh-session:` URIs and
 * `@[label](uri)` mentions (session-reference.md §2), the same as the server's
 * `actors/session_references/_uri.py`.
 *
 * A URI is `dsh-session:` + unpadded base64url of the UTF-8 of `JSON.stringify(id)`. Decoding
 * is strict: only the exact canonical text of some string id is accepted. Parsing text finds
 * what upstream's global regex finds (§2.4), in time linear in the text's length (`_uri.py`'s
 * scanner finds the same matches, but re-reads URI runs: see {@link matches}).
 */

import { TextDecoder } from "node:util";

import { SessionReferenceError } from "./errors.js";

/** URI scheme reserved for DSH session snapshots. */
export const SESSION_REFERENCE_SCHEME = "dsh-session:";

/** One reference found in text: the decoded id and its (unescaped) label. */
export interface MentionReference {
  /** Decoded session id. */
  readonly sessionId: string;
  /** Markdown label with escapes removed, or the session id for a bare URI. */
  readonly label: string;
}

/** Text with mentions replaced by `@label`, and the references in appearance order. */
export interface ParsedSessionReferenceText {
  /** The readable text. */
  readonly text: string;
  /** References in order of appearance, duplicates kept (`prepare` de-duplicates). */
  readonly references: MentionReference[];
}

const PAYLOAD = /^[A-Za-z0-9_-]+$/;
// Fatal: invalid UTF-8 fails here rather than becoming U+FFFD; a BOM is kept (and then fails
// JSON.parse), as Python's strict UTF-8 codec and json.loads do.
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** `invalid session reference URI "<uri>"` (SESSION_REFERENCE_INVALID_REFERENCE). */
function invalidUri(uri: string, cause?: unknown): SessionReferenceError {
  const error = new SessionReferenceError(
    `invalid session reference URI ${JSON.stringify(uri)}`,
    {},
    "SESSION_REFERENCE_INVALID_REFERENCE",
  );
  if (cause !== undefined) {
    // As `new Error(message, {cause})` would define it: own, non-enumerable.
    Object.defineProperty(error, "cause", {
      value: cause,
      writable: true,
      enumerable: false,
      configurable: true,
    });
  }
  return error;
}

/**
 * Encode any session id as its canonical URI: `dsh-session:` + base64url (no padding) of the
 * UTF-8 JSON string literal. Every string round-trips, the empty one included; lone surrogates
 * are escaped by `JSON.stringify`, so the literal is always well-formed.
 */
export function encodeSessionReferenceUri(sessionId: string): string {
  const literal = JSON.stringify(sessionId);
  return SESSION_REFERENCE_SCHEME + Buffer.from(literal, "utf8").toString("base64url");
}

/**
 * Decode a canonical URI back to its session id.
 *
 * @throws {SessionReferenceError} `SESSION_REFERENCE_INVALID_REFERENCE`
 *   `invalid session reference URI "<uri>"` for a wrong scheme, an empty or non-base64url
 *   payload, a payload that is not a JSON string, or any text other than the canonical
 *   encoding of that string (the inner failure, if any, as `cause`).
 */
export function decodeSessionReferenceUri(uri: string): string {
  if (!uri.startsWith(SESSION_REFERENCE_SCHEME)) {
    throw invalidUri(uri);
  }
  const payload = uri.slice(SESSION_REFERENCE_SCHEME.length);
  // JS `$` without the `m` flag matches only at the very end: no trailing newline passes.
  if (!PAYLOAD.test(payload)) {
    throw invalidUri(uri);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(UTF8.decode(Buffer.from(payload, "base64url")));
  } catch (error) {
    throw invalidUri(uri, error);
  }
  if (typeof parsed !== "string") {
    throw invalidUri(uri, new TypeError("decoded session id is not a string"));
  }
  if (encodeSessionReferenceUri(parsed) !== uri) {
    throw invalidUri(uri, new TypeError("URI is not canonical"));
  }
  return parsed;
}

/**
 * Render `@[label](uri)`; the label defaults to the id.
 *
 * Only `\` and `]` are escaped (with a backslash); `[`, parentheses, newlines, controls and `@`
 * pass through unchanged.
 */
export function formatSessionReferenceMention(sessionId: string, label?: string): string {
  const shown = label ?? sessionId;
  const escaped = shown.replace(/[\\\]]/g, (character) => "\\" + character);
  return `@[${escaped}](${encodeSessionReferenceUri(sessionId)})`;
}

/**
 * Replace mentions and bare URIs in `text` by `@label` and collect references (upstream's
 * `parseSessionReferenceText`, session-reference.md §2.4).
 *
 * Scans left to right for Markdown mentions `@[label](dsh-session:...)` and bare URIs
 * `dsh-session:<base64url>+`; each is decoded strictly. Text outside them is kept as it is;
 * the label replaces its match literally. Linear in the length of `text`.
 *
 * @throws {SessionReferenceError} `SESSION_REFERENCE_INVALID_REFERENCE` for the first match
 *   whose URI is not canonical; the whole parse fails.
 */
export function parseSessionReferenceText(text: string): ParsedSessionReferenceText {
  const references: MentionReference[] = [];
  const pieces: string[] = [];
  let done = 0;
  for (const [start, end, rawLabel, uri] of matches(text)) {
    const sessionId = decodeSessionReferenceUri(uri);
    const label = rawLabel === undefined ? sessionId : unescapeLabel(rawLabel);
    references.push({ sessionId, label });
    pieces.push(text.slice(done, start), "@", label);
    done = end;
  }
  pieces.push(text.slice(done));
  return { text: pieces.join(""), references };
}

// -- the scanner ----------------------------------------------------------------------------

/**
 * Upstream parses with the global regex
 *   /@\[((?:\\.|[^\\\]])*)\]\((dsh-session:[^\s)]*)\)|(dsh-session:[A-Za-z0-9_-]+)/gu
 * `matches` finds the same matches from its pieces, each read once where it must start (both
 * quantified parts are deterministic: backtracking into them never succeeds).
 *
 * The pieces are read by UTF-16 code unit where the regex (with `u`) reads code points: no
 * surrogate is a backslash, `]`, `)`, a line terminator, whitespace or base64url, so every run
 * ends at the same index either way.
 */
const MARKDOWN_OPEN = "@[";
const URI_OPEN = "](" + SESSION_REFERENCE_SCHEME;

const BACKSLASH = 0x5c;
const CLOSE_BRACKET = 0x5d;
const CLOSE_PAREN = 0x29;

/** The JavaScript line terminators: `.` (without the `s` flag) matches none of them. */
function isLineTerminator(unit: number): boolean {
  return unit === 0x0a || unit === 0x0d || unit === 0x2028 || unit === 0x2029;
}

/** JavaScript `\s` (spelled out in §2.4). */
function isWhitespace(unit: number): boolean {
  return (
    (unit >= 0x09 && unit <= 0x0d) ||
    unit === 0x20 ||
    unit === 0xa0 ||
    unit === 0x1680 ||
    (unit >= 0x2000 && unit <= 0x200a) ||
    unit === 0x2028 ||
    unit === 0x2029 ||
    unit === 0x202f ||
    unit === 0x205f ||
    unit === 0x3000 ||
    unit === 0xfeff
  );
}

/** `[A-Za-z0-9_-]`. */
function isBase64Url(unit: number): boolean {
  return (
    (unit >= 0x41 && unit <= 0x5a) ||
    (unit >= 0x61 && unit <= 0x7a) ||
    (unit >= 0x30 && unit <= 0x39) ||
    unit === 0x5f ||
    unit === 0x2d
  );
}

/** Where the label run `(?:\\[^<line terminators>]|[^\\\]])*` from `start` ends. */
function labelEnd(text: string, start: number): number {
  let index = start;
  while (index < text.length) {
    const unit = text.charCodeAt(index);
    if (unit === BACKSLASH) {
      if (index + 1 >= text.length || isLineTerminator(text.charCodeAt(index + 1))) {
        break;
      }
      index += 2;
    } else if (unit === CLOSE_BRACKET) {
      break;
    } else {
      index += 1;
    }
  }
  return index;
}

/** Where the URI run `[^)\s]*` from `start` ends. */
function uriRunEnd(text: string, start: number): number {
  let index = start;
  while (index < text.length) {
    const unit = text.charCodeAt(index);
    if (unit === CLOSE_PAREN || isWhitespace(unit)) {
      break;
    }
    index += 1;
  }
  return index;
}

/** Where the base64url run from `start` ends. */
function payloadEnd(text: string, start: number): number {
  let index = start;
  while (index < text.length && isBase64Url(text.charCodeAt(index))) {
    index += 1;
  }
  return index;
}

/** One match: `[start, end, label, uri]`, the label raw (`undefined` for a bare URI). */
type Match = readonly [start: number, end: number, label: string | undefined, uri: string];

/**
 * Every match of upstream's global regex in `text`, in time linear in `text.length`.
 *
 * The regex itself is quadratic on text such as `"@[".repeat(n)`: each `@[` starts a label
 * that runs to the end before the attempt fails. Here a label is read once: a later `@[`
 * inside it (before the character where it stopped) starts a label that stops at the same
 * character, since both reads pass the `@` and `[` (neither an escape nor a `]`) and coincide
 * from then on; so does whatever follows that character, and the attempt's outcome is reused.
 *
 * A URI run is read once too: a run that starts inside the last one read (or where it ended)
 * ends where it ended, since the class is one character at a time. Without that, text such as
 * `"@[x](dsh-session:".repeat(n)` (each label ends at once, each URI run goes to the end of
 * the text without a `)`) would read O(n) URI runs of O(n) characters each.
 */
function* matches(text: string): Generator<Match> {
  const scheme = SESSION_REFERENCE_SCHEME;
  let nextOpen = text.indexOf(MARKDOWN_OPEN);
  let nextBare = text.indexOf(scheme);
  let stop = -1; // where the last label read stopped ...
  let outcome: readonly [end: number, uri: string] | undefined; // ... and what followed it
  let uriFrom = -1; // the last URI run read: from here ...
  let uriTo = -1; // ... to here
  while (nextOpen >= 0 || nextBare >= 0) {
    let end: number;
    if (nextBare < 0 || (nextOpen >= 0 && nextOpen < nextBare)) {
      const start = nextOpen;
      if (start >= stop) {
        stop = labelEnd(text, start + 2);
        outcome = undefined;
        if (text.startsWith(URI_OPEN, stop)) {
          const from = stop + URI_OPEN.length;
          if (from < uriFrom || from > uriTo) {
            uriFrom = from;
            uriTo = uriRunEnd(text, from);
          }
          const close = uriTo;
          if (text.startsWith(")", close)) {
            outcome = [close + 1, text.slice(stop + 2, close)];
          }
        }
      }
      if (outcome === undefined) {
        // Nor can a bare URI start at "@".
        nextOpen = text.indexOf(MARKDOWN_OPEN, start + 1);
        continue;
      }
      end = outcome[0];
      yield [start, end, text.slice(start + 2, stop), outcome[1]];
    } else {
      const start = nextBare;
      end = payloadEnd(text, start + scheme.length);
      if (end === start + scheme.length) {
        nextBare = text.indexOf(scheme, start + 1);
        continue;
      }
      yield [start, end, undefined, text.slice(start, end)];
    }
    // Only a candidate the match passed is looked for again (-1 stays: none is left).
    if (nextOpen >= 0 && nextOpen < end) {
      nextOpen = text.indexOf(MARKDOWN_OPEN, end);
    }
    if (nextBare >= 0 && nextBare < end) {
      nextBare = text.indexOf(scheme, end);
    }
  }
}

/** A raw Markdown label with every backslash + character (not a line terminator) pair
 * replaced by the character. */
function unescapeLabel(raw: string): string {
  return raw.replace(/\\([^\n\r\u2028\u2029])/g, (_pair, character: string) => character);
}
