/**
 * CURVE keys (docs/protocol.md §1.1, SECURITY.md): the three Z85 strings a client needs, and
 * readers for the key files `agent-actors keys NAME` writes (`NAME.key` with `public` and
 * `secret`, `NAME.pub` with `public` only; TOML, mode 0600).
 */

import { readFileSync, statSync } from "node:fs";

/** Keys of a CURVE client: Z85 strings of 40 characters each. */
export interface CurveKeys {
  /** The server's public key, pinned: obtained out of band (its `.pub` file). */
  readonly serverKey: string;
  /** This client's public key, listed in the server's allowlist. */
  readonly publicKey: string;
  readonly secretKey: string;
}

export interface KeyPair {
  readonly publicKey: string;
  readonly secretKey: string;
}

/** A key or key file that cannot be used. */
export class KeyError extends Error {
  override name = "KeyError";
}

const Z85_KEY = /^[0-9a-zA-Z.\-:+=^!/*?&<>()[\]{}@%$#]{40}$/;

/** @throws KeyError `key` is not a 40-character Z85 string. */
export function checkZ85Key(key: string, what: string): string {
  if (!Z85_KEY.test(key)) {
    throw new KeyError(`${what} must be a Z85-encoded CURVE key (40 characters)`);
  }
  return key;
}

/** The `key = "value"` entries of the flat TOML the key files use. */
function readEntries(path: string): Map<string, string> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new KeyError(
      `${path}: cannot read: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  const entries = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const match = /^\s*([A-Za-z_][\w-]*)\s*=\s*"([^"\\]*)"\s*(#.*)?$/.exec(line);
    if (match?.[1] !== undefined && match[2] !== undefined) {
      entries.set(match[1], match[2]);
    }
  }
  return entries;
}

function entry(entries: Map<string, string>, key: string, path: string): string {
  const value = entries.get(key);
  if (value === undefined) {
    throw new KeyError(`${path}: no ${key} key`);
  }
  return checkZ85Key(value, `${path}: ${key}`);
}

/** The public key of a `.pub` file (or of a `.key` file). */
export function readPublicKey(path: string): string {
  return entry(readEntries(path), "public", path);
}

/**
 * The key pair of a `.key` file.
 *
 * @throws KeyError unreadable, malformed, or readable or writable by group or others (as ssh
 *   refuses such a private key, and as the server does).
 */
export function readKeyPair(path: string): KeyPair {
  let mode: number;
  try {
    mode = statSync(path).mode;
  } catch (error) {
    throw new KeyError(
      `${path}: cannot read: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  if (process.platform !== "win32" && (mode & 0o077) !== 0) {
    throw new KeyError(
      `${path}: permissions ${(mode & 0o777).toString(8).padStart(4, "0")} are too open; ` +
        "a key pair file must be accessible by its owner only (chmod 600)",
    );
  }
  const entries = readEntries(path);
  return { publicKey: entry(entries, "public", path), secretKey: entry(entries, "secret", path) };
}

/** Keys for a client from the server's `.pub` file and this client's `.key` file. */
export function curveKeysFromFiles(serverPubFile: string, clientKeyFile: string): CurveKeys {
  return { serverKey: readPublicKey(serverPubFile), ...readKeyPair(clientKeyFile) };
}
