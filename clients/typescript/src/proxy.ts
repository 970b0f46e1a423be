/**
 * Dynamic proxies: `client.agent(id).sessionReferenceResolver.candidates(query, {signal})`.
 *
 * `proxy.<namespace>.<method>(...args)` calls the endpoint `namespace/method`. Positional
 * arguments map onto the endpoint's parameters in the order `system/describe` declares them;
 * an agent proxy fills the `agent` lookup parameter (`agentId`, §14) itself. An optional
 * trailing object of call options (`{signal, timeoutMs, deadline, supersede}`) follows them.
 *
 * The proxy is untyped at runtime; its static type is a parameter. By default it is typed by
 * the declarations generated from this package's schema (`src/endpoints.ts`, written by
 * `agent-actors schema --format typescript`): {@link AgentServices} for `client.agent(id)`,
 * {@link ServerServices} for `client.services()`. Another server's declarations plug in the same
 * way (`client.agent<TypedServices<TheirEndpoints>>(id)`), and `client.agent<DynamicServices>(id)`
 * is the untyped escape hatch.
 */

import type { WireMap, WireValue } from "./codec.js";
import type { Description, EndpointSpec, ParamSpec } from "./catalog.js";
import type { Endpoints, ServiceEndpoints } from "./endpoints.js";
import { ArgumentsInvalidError, UnknownEndpointError } from "./errors.js";
import type { CallOptions } from "./options.js";

/** A remote method: positional arguments, then optionally {@link CallOptions}. */
export type RemoteMethod = (...args: readonly unknown[]) => Promise<WireValue>;

/** The methods of one namespace (`diagnostics`, `sessions`, ...). */
export interface DynamicService {
  readonly [method: string]: RemoteMethod;
}

/** Every namespace of a server, as seen without generated declarations. */
export interface DynamicServices {
  readonly [namespace: string]: DynamicService;
}

/**
 * The declaration of one endpoint for a typed proxy: its positional parameters (without the
 * agent lookup, which an agent proxy fills), its result, and (for reference; a promise's
 * rejection has no static type) the error codes it may answer with.
 */
export interface EndpointDeclaration {
  readonly params: readonly unknown[];
  readonly result: unknown;
  readonly errors?: string;
}

/**
 * Endpoint name (`namespace/method`) → declaration, as a schema generator would emit it (an
 * interface or a type literal).
 */
export type EndpointDeclarations<E> = { readonly [K in keyof E]: EndpointDeclaration };

type NamespaceOf<K> = K extends `${infer N}/${string}` ? N : never;

/** `T` and every shorter prefix of it, down to `[]`. */
type Prefixes<T extends readonly unknown[]> = T extends readonly [...infer Init, unknown]
  ? T | Prefixes<Init>
  : T;

/** Whether a value of type `T` could be an object (so would keep an options object as itself). */
type TakesObject<T> = unknown extends T
  ? true
  : [Extract<T, object>] extends [never]
    ? false
    : true;

/**
 * `[...Q, options]` if options may stand in place of the parameter after prefix `Q` of `P`:
 * every parameter from there on is optional and that one cannot hold an object (as
 * `bindArguments` decides at run time).
 */
type OptionsAfter<Q, P extends readonly unknown[]> = Q extends readonly unknown[]
  ? Q extends P
    ? Q["length"] extends Required<P>["length"]
      ? never
      : TakesObject<Required<P>[Q["length"]]> extends true
        ? never
        : [...Q, options: CallOptions]
    : never
  : never;

/** `P` with `undefined` allowed for each optional parameter ("not given", as at run time). */
type Omissible<P extends readonly unknown[]> = {
  [I in keyof P]: Record<never, never> extends Pick<P, I> ? P[I] | undefined : P[I];
};

/**
 * The arguments of a typed remote method with positional parameters `P`: all of them, then
 * optionally {@link CallOptions}; or, where trailing parameters are optional and cannot hold an
 * object, the options in their place (`candidates({signal})`). An optional parameter may be
 * given as `undefined`, which omits it.
 */
export type CallArguments<P extends readonly unknown[]> =
  | [...Omissible<P>, options?: CallOptions]
  | OptionsAfter<Prefixes<Required<Omissible<P>>>, Omissible<P>>;

/**
 * The proxy type for a map of endpoint declarations:
 * `client.agent<TypedServices<MyEndpoints>>(id).diagnostics.sleep(1.5, "label", {signal})`.
 */
export type TypedServices<E extends EndpointDeclarations<E>> = {
  readonly [N in NamespaceOf<keyof E & string>]: {
    readonly [K in keyof E & string as K extends `${N}/${infer M}` ? M : never]: (
      ...args: CallArguments<E[K]["params"]>
    ) => Promise<E[K]["result"]>;
  };
};

/**
 * `client.agent(id)`'s default type: every endpoint of this package, typed by the generated
 * declarations, with the agent lookup filled by the proxy.
 */
export type AgentServices = TypedServices<Endpoints>;

/** `client.services()`'s default type: every endpoint, the agent lookup positional. */
export type ServerServices = TypedServices<ServiceEndpoints>;

/** What a proxy needs from the client. */
export interface ProxyTarget {
  describe(signal?: AbortSignal): Promise<Description>;
  call(endpoint: string, args: WireMap, options: CallOptions): Promise<WireValue>;
}

const OPTION_KEYS: ReadonlySet<string> = new Set(["signal", "timeoutMs", "deadline", "supersede"]);

function isPlainObject(value: unknown): value is Readonly<Record<string, unknown>> {
  if (typeof value !== "object" || value === null) {
    return false;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** A non-empty plain object whose keys are all call options. */
function looksLikeOptions(value: unknown): value is CallOptions {
  if (!isPlainObject(value)) {
    return false;
  }
  const keys = Object.keys(value);
  return keys.length > 0 && keys.every((key) => OPTION_KEYS.has(key));
}

/** Whether a parameter of this declared type could take a map (so could take `{signal}`). */
function acceptsMap(param: ParamSpec, description: Description): boolean {
  return param.type
    .split("|")
    .map((part) => part.trim())
    .some((part) => part === "any" || part.startsWith("map<") || part in description.types);
}

/** Resolve `spec`'s positional arguments (and options) into wire-named `args`. */
export function bindArguments(
  spec: EndpointSpec,
  description: Description,
  agentId: string | undefined,
  given: readonly unknown[],
): { args: Record<string, WireValue>; options: CallOptions } {
  const lookup = agentId === undefined ? undefined : spec.params.find((p) => p.lookup === "agent");
  const positional = spec.params.filter((p) => p !== lookup);
  let values = given;
  let options: CallOptions = {};
  const last = given.at(-1);
  if (given.length > positional.length) {
    if (!isPlainObject(last)) {
      throw new ArgumentsInvalidError(
        `${spec.name}: takes ${positional.length} positional argument(s) ` +
          `(${positional.map((p) => p.name).join(", ")}), got ${given.length}`,
      );
    }
    values = given.slice(0, -1);
    options = last as CallOptions;
  } else if (given.length > 0 && looksLikeOptions(last)) {
    // Only where the parameter could not take this object as its value (a string query,
    // say); an `any` or map parameter keeps it, and options then go after it.
    const param = positional[given.length - 1];
    if (param !== undefined && !acceptsMap(param, description)) {
      values = given.slice(0, -1);
      options = last;
    }
  }
  if (values.length > positional.length) {
    throw new ArgumentsInvalidError(`${spec.name}: too many arguments`);
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key)) {
      throw new ArgumentsInvalidError(`${spec.name}: unknown call option '${key}'`, { path: key });
    }
  }
  const args: Record<string, WireValue> = {};
  values.forEach((value, index) => {
    const param = positional[index];
    // undefined means "not given": the key is omitted and the server applies the default.
    if (param !== undefined && value !== undefined) {
      args[param.name] = value as WireValue;
    }
  });
  if (lookup !== undefined && agentId !== undefined) {
    args[lookup.name] = agentId;
  }
  return { args, options };
}

function signalOf(value: unknown): AbortSignal | undefined {
  if (isPlainObject(value)) {
    const signal = value["signal"];
    if (signal instanceof AbortSignal) {
      return signal;
    }
  }
  return undefined;
}

async function invoke(
  target: ProxyTarget,
  endpoint: string,
  agentId: string | undefined,
  given: readonly unknown[],
): Promise<WireValue> {
  // The declarations are needed to read the arguments; the caller's signal (if the last
  // argument carries one) already bounds the wait for them.
  const description = await target.describe(signalOf(given.at(-1)));
  const spec = description.endpoints.get(endpoint);
  if (spec === undefined) {
    throw new UnknownEndpointError(`unknown endpoint '${endpoint}' (not in system/describe)`);
  }
  const { args, options } = bindArguments(spec, description, agentId, given);
  return target.call(endpoint, args, options);
}

/** A `{[namespace]: {[method]: RemoteMethod}}` proxy; `agentId` fills the agent lookup. */
export function createProxy<S extends object = DynamicServices>(
  target: ProxyTarget,
  agentId?: string,
): S {
  const namespaces = new Map<string, DynamicService>();
  const service = (namespace: string): DynamicService => {
    const methods = new Map<string, RemoteMethod>();
    return new Proxy({} as DynamicService, {
      get(_, method) {
        // Not thenable (`await proxy.x` must not call x/then), and no symbol methods.
        if (typeof method !== "string" || method === "then") {
          return undefined;
        }
        let bound = methods.get(method);
        if (bound === undefined) {
          const endpoint = `${namespace}/${method}`;
          bound = (...args: readonly unknown[]) => invoke(target, endpoint, agentId, args);
          methods.set(method, bound);
        }
        return bound;
      },
    });
  };
  return new Proxy({} as S, {
    get(_, namespace) {
      if (typeof namespace !== "string" || namespace === "then") {
        return undefined;
      }
      let found = namespaces.get(namespace);
      if (found === undefined) {
        found = service(namespace);
        namespaces.set(namespace, found);
      }
      return found;
    },
  });
}
