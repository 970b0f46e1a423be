/**
 * The server's endpoint declarations, from `system/describe` (docs/protocol.md §15.1): fetched
 * once, lazily, and shared by every caller that needs them meanwhile.
 */

import type { WireValue } from "./codec.js";
import { abortable } from "./signals.js";

/** One parameter, in declaration order (the order of positional arguments in proxies). */
export interface ParamSpec {
  /** The wire name of the argument. */
  readonly name: string;
  /** The type spelling of §13 (`string`, `array<T>`, `string | nil`, a record name, ...). */
  readonly type: string;
  readonly required: boolean;
  /** `"agent"` for the `agentId` lookup (§14); absent otherwise. */
  readonly lookup?: string | undefined;
}

export interface EndpointSpec {
  /** `namespace/method`. */
  readonly name: string;
  readonly params: readonly ParamSpec[];
  readonly result: string;
  readonly mutates: boolean;
  readonly doc: string;
  /** Every error code the endpoint may answer with (`[]` from a server that does not say). */
  readonly errors: readonly string[];
}

/** What `system/describe` returned, as far as this client reads it. */
export interface Description {
  readonly protocol: number;
  readonly endpoints: ReadonlyMap<string, EndpointSpec>;
  /** Record name → field wire name → type spelling. */
  readonly types: Readonly<Record<string, Readonly<Record<string, string>>>>;
  /**
   * The whole answer, including what this reader does not model: each endpoint's JSON Schema
   * (`schema`) and the named types (`$defs`), which `agent-actors schema` turns into
   * `src/endpoints.ts`.
   */
  readonly raw: WireValue;
}

type Fields = Readonly<Record<string, WireValue | undefined>>;

function isFields(value: unknown): value is Fields {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    !(value instanceof Uint8Array)
  );
}

function readParam(value: unknown): ParamSpec | undefined {
  if (!isFields(value) || typeof value["name"] !== "string") {
    return undefined;
  }
  const lookup = value["lookup"];
  return {
    name: value["name"],
    type: typeof value["type"] === "string" ? value["type"] : "any",
    required: value["required"] === true,
    lookup: typeof lookup === "string" ? lookup : undefined,
  };
}

/** Read a `system/describe` answer; entries this client cannot read are skipped. */
export function parseDescription(raw: WireValue): Description {
  const endpoints = new Map<string, EndpointSpec>();
  const top = isFields(raw) ? raw : {};
  const list = top["endpoints"];
  for (const entry of Array.isArray(list) ? (list as readonly unknown[]) : []) {
    if (!isFields(entry) || typeof entry["name"] !== "string") {
      continue;
    }
    const params = entry["params"];
    endpoints.set(entry["name"], {
      name: entry["name"],
      params: (Array.isArray(params) ? (params as readonly unknown[]) : [])
        .map(readParam)
        .filter((p): p is ParamSpec => p !== undefined),
      result: typeof entry["result"] === "string" ? entry["result"] : "any",
      mutates: entry["mutates"] === true,
      doc: typeof entry["doc"] === "string" ? entry["doc"] : "",
      errors: (Array.isArray(entry["errors"])
        ? (entry["errors"] as readonly unknown[])
        : []
      ).filter((code): code is string => typeof code === "string"),
    });
  }
  const types: Record<string, Record<string, string>> = {};
  const rawTypes = top["types"];
  if (isFields(rawTypes)) {
    for (const [name, fields] of Object.entries(rawTypes)) {
      if (isFields(fields)) {
        types[name] = Object.fromEntries(
          Object.entries(fields).filter((f): f is [string, string] => typeof f[1] === "string"),
        );
      }
    }
  }
  return {
    protocol: typeof top["protocol"] === "number" ? top["protocol"] : 0,
    endpoints,
    types,
    raw,
  };
}

export class Catalog {
  private described: Description | undefined;
  private inFlight: Promise<Description> | undefined;

  constructor(private readonly fetch: () => Promise<WireValue>) {}

  /**
   * The description, fetched on first use. Concurrent first callers share one
   * `system/describe` call; if it fails, the next caller asks again. `signal` stops this
   * caller's wait, not the shared call.
   */
  async get(signal?: AbortSignal): Promise<Description> {
    if (this.described !== undefined) {
      return this.described;
    }
    this.inFlight ??= this.fetch().then(
      (raw) => {
        this.described = parseDescription(raw);
        this.inFlight = undefined;
        return this.described;
      },
      (error: unknown) => {
        this.inFlight = undefined;
        throw error;
      },
    );
    return abortable(this.inFlight, signal);
  }

  /** The declaration of `endpoint`, or undefined if the server does not serve it. */
  async spec(endpoint: string, signal?: AbortSignal): Promise<EndpointSpec | undefined> {
    return (await this.get(signal)).endpoints.get(endpoint);
  }
}
