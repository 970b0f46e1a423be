/**
 * The client façade: one connection to one server. It wires the sans-IO protocol to the
 * socket and to the clock, and turns each call into a promise whose `AbortSignal` crosses the
 * wire as a `cancel` frame.
 *
 * Each call settles exactly once: by its terminal frame, by its signal, by its deadline, or by
 * the connection failing. Whichever comes first removes the call from the protocol, so a
 * terminal frame arriving after an abort or a deadline finds nobody and is dropped (§7.4).
 */

import { performance } from "node:perf_hooks";

import { Catalog, type Description } from "./catalog.js";
import type { WireMap, WireValue } from "./codec.js";
import {
  DeadlineExceededError,
  PeerLostError,
  UnavailableError,
  UnsupportedVersionError,
  type WireError,
} from "./errors.js";
import type { Welcome } from "./messages.js";
import type { CallOptions, ClientOptions } from "./options.js";
import { ClientProtocol, type ClientState, type Limits, type ProtocolEvent } from "./protocol.js";
import { type AgentServices, createProxy, type ProxyTarget, type ServerServices } from "./proxy.js";
import { abortable, cancelReasonOf } from "./signals.js";
import { Transport } from "./transport.js";

/** How often timers are checked: pings, peer silence (the bound of §10 adds one tick). */
const TICK_MS = 100;
/** How long `close()` waits for queued frames (the `bye`) to reach the socket. */
const CLOSE_FLUSH_MS = 200;

/** One call waiting for its end: the protocol's handle for it. */
interface PendingCall {
  id: number;
  settled: boolean;
  readonly resolve: (value: WireValue) => void;
  readonly reject: (reason: unknown) => void;
  readonly signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
}

interface ReadyWaiter {
  readonly resolve: (welcome: Welcome) => void;
  readonly reject: (error: WireError) => void;
}

export interface ClientStatistics {
  /** Calls sent or queued whose end has not been reported. */
  readonly pendingCalls: number;
  readonly state: ClientState;
  /** Frames held back because the server was not reading (§11.3). */
  readonly backlogFrames: number;
}

const now = (): number => performance.now();

export class Client {
  private readonly protocol: ClientProtocol<PendingCall>;
  private readonly transport: Transport;
  private readonly catalog: Catalog;
  private readonly ticker: ReturnType<typeof setInterval>;
  private connectTimer: ReturnType<typeof setTimeout> | undefined;
  private waiters: ReadyWaiter[] = [];
  private closing: Promise<void> | undefined;
  private readonly log: (message: string) => void;

  /**
   * Connect to `endpoint` and say hello. Calls made before the `welcome` are queued and sent
   * when it arrives. Prefer {@link connect}, which waits for the welcome.
   */
  constructor(
    readonly endpoint: string,
    options: ClientOptions = {},
  ) {
    this.log = options.log ?? (() => {});
    this.protocol = new ClientProtocol(options.name ?? "agent-actors-ts", now());
    this.catalog = new Catalog(() => this.call("system/describe"));
    this.transport = new Transport(
      { endpoint, curve: options.curve },
      {
        frame: (frame) => this.apply(this.protocol.receive(frame, now())),
        failure: (error) =>
          this.apply(this.protocol.lose(new PeerLostError(`socket failed: ${error.message}`))),
      },
    );
    this.transport.send(this.protocol.hello(now()), true);
    const connectTimeoutMs = options.connectTimeoutMs ?? 5000;
    this.connectTimer = setTimeout(() => {
      this.connectTimer = undefined;
      if (this.protocol.state === "greeting") {
        const error = new UnavailableError(
          `no welcome from the server within ${connectTimeoutMs} ms`,
        );
        this.apply(this.protocol.lose(error));
        this.rejectWaiters(error);
      }
    }, connectTimeoutMs);
    this.ticker = setInterval(
      () => this.apply(this.protocol.tick(now(), () => this.transport.unread)),
      TICK_MS,
    );
    // Timers do not keep a process alive; an open socket does, until close().
    this.ticker.unref();
    this.connectTimer.unref();
  }

  /** `greeting`, `ready`, `lost` or `closed` (§4.1). */
  get state(): ClientState {
    return this.protocol.state;
  }

  /** The latest `welcome`, once one arrived. */
  get welcome(): Welcome | undefined {
    return this.protocol.welcome;
  }

  /** The limits in force: the welcome's, or the defaults before one. */
  get limits(): Limits {
    return this.protocol.limits;
  }

  statistics(): ClientStatistics {
    return {
      pendingCalls: this.protocol.inFlight,
      state: this.protocol.state,
      backlogFrames: this.transport.backlogSize,
    };
  }

  /**
   * Resolves with the welcome once the server has welcomed us (at once if it has). Rejects
   * when the client closes, the server speaks no common version, the first welcome does not
   * come within the connect timeout, or `timeoutMs`/`signal` end the wait.
   */
  whenReady(
    options: {
      readonly timeoutMs?: number | undefined;
      readonly signal?: AbortSignal | undefined;
    } = {},
  ): Promise<Welcome> {
    const welcome = this.protocol.welcome;
    if (this.protocol.state === "ready" && welcome !== undefined) {
      return Promise.resolve(welcome);
    }
    if (this.protocol.state === "closed") {
      return Promise.reject(new UnavailableError("client is closed"));
    }
    const waiting = new Promise<Welcome>((resolve, reject) => {
      this.waiters.push({ resolve, reject });
    });
    const { timeoutMs, signal } = options;
    if (timeoutMs === undefined) {
      return abortable(waiting, signal);
    }
    const timeout = AbortSignal.timeout(timeoutMs);
    return abortable(
      waiting,
      signal === undefined ? timeout : AbortSignal.any([signal, timeout]),
    ).catch((error: unknown) => {
      throw timeout.aborted && error === timeout.reason
        ? new UnavailableError(`no welcome from the server within ${timeoutMs} ms`)
        : error;
    });
  }

  /**
   * Call `endpoint` with wire-named `args` and return its result.
   *
   * @throws WireError subclasses: the server's typed error, or a client-local one
   *   (`DeadlineExceededError` when the deadline passed first, `PeerLostError`,
   *   `UnavailableError`, `TooLargeError`, `ArgumentsInvalidError`, `OverloadedError`).
   *   An aborted `signal` rejects with `signal.reason`.
   */
  async call<T = WireValue>(
    endpoint: string,
    args: WireMap = {},
    options: CallOptions = {},
  ): Promise<T> {
    const { signal } = options;
    const value = await this.start(endpoint, args, options);
    // §7.4: a caller whose signal aborted never gets a value, even one that had arrived.
    signal?.throwIfAborted();
    return value as T; // T is the caller's claim about the result; it is not checked
  }

  /**
   * A proxy for one agent: `client.agent(id).diagnostics.echo(payload, {signal})`, typed by the
   * generated declarations (`client.agent<DynamicServices>(id)` for an untyped one).
   */
  agent<S extends object = AgentServices>(agentId: string): S {
    return createProxy<S>(this.proxyTarget(), agentId);
  }

  /** A proxy without an agent: lookup parameters are positional like any other. */
  services<S extends object = ServerServices>(): S {
    return createProxy<S>(this.proxyTarget());
  }

  /** `system/describe`, fetched once and shared (§15.1). */
  describe(signal?: AbortSignal): Promise<Description> {
    return this.catalog.get(signal);
  }

  /**
   * Fail calls still pending with `UnavailableError`, tell the server `bye`, close the socket.
   */
  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  // -- internals ------------------------------------------------------------------------------

  private proxyTarget(): ProxyTarget {
    return {
      describe: (signal?: AbortSignal) => this.catalog.get(signal),
      call: (endpoint: string, args: WireMap, options: CallOptions) =>
        this.call(endpoint, args, options),
    };
  }

  private start(endpoint: string, args: WireMap, options: CallOptions): Promise<WireValue> {
    const { signal, timeoutMs, deadline, supersede } = options;
    if (signal?.aborted) {
      return Promise.reject(signal.reason); // never sent, as fetch does
    }
    const startedAt = now();
    let deadlineAt: number | undefined;
    if (timeoutMs !== undefined) {
      deadlineAt = startedAt + Math.max(0, timeoutMs);
    }
    if (deadline !== undefined) {
      // A Date.now() deadline, moved onto the monotonic clock once, here.
      const at = startedAt + (deadline - Date.now());
      deadlineAt = deadlineAt === undefined ? at : Math.min(deadlineAt, at);
    }
    return new Promise<WireValue>((resolve, reject) => {
      const call: PendingCall = {
        id: 0,
        settled: false,
        resolve,
        reject,
        signal,
        onAbort: undefined,
        timer: undefined,
      };
      let events: ProtocolEvent<PendingCall>[];
      try {
        const started = this.protocol.submit(
          call,
          { endpoint, args, deadlineAt, supersede },
          startedAt,
        );
        call.id = started.id;
        events = started.events;
      } catch (error) {
        reject(error);
        return;
      }
      try {
        this.apply(events);
      } catch (error) {
        // The frame could not be queued (backlog full): the server never heard of the call.
        this.protocol.forget(call.id);
        reject(error);
        return;
      }
      if (deadlineAt !== undefined) {
        call.timer = setTimeout(
          () => this.giveUp(call, "deadline", deadlineError()),
          deadlineAt - startedAt,
        );
      }
      if (signal !== undefined) {
        call.onAbort = () => this.giveUp(call, cancelReasonOf(signal.reason), signal.reason);
        signal.addEventListener("abort", call.onAbort, { once: true });
      }
    });
  }

  /** The caller's side ended the call first: cancel it on the server, reject the caller. */
  private giveUp(call: PendingCall, reason: "caller" | "deadline", error: unknown): void {
    if (call.settled) {
      return;
    }
    this.finish(call);
    this.apply(this.protocol.abandon(call.id, reason));
    call.reject(error);
  }

  private finish(call: PendingCall): void {
    call.settled = true;
    if (call.timer !== undefined) {
      clearTimeout(call.timer);
    }
    if (call.onAbort !== undefined) {
      call.signal?.removeEventListener("abort", call.onAbort);
    }
  }

  /** Carry out the protocol's events. Only a call frame's send can throw (backlog full). */
  private apply(events: readonly ProtocolEvent<PendingCall>[]): void {
    for (const event of events) {
      switch (event.kind) {
        case "send":
          this.transport.send(event.frame, event.force);
          break;
        case "result":
          if (!event.handle.settled) {
            this.finish(event.handle);
            event.handle.resolve(event.value);
          }
          break;
        case "failure":
          if (!event.handle.settled) {
            this.finish(event.handle);
            event.handle.reject(event.error);
          }
          break;
        case "ready":
          if (this.connectTimer !== undefined) {
            clearTimeout(this.connectTimer);
            this.connectTimer = undefined;
          }
          for (const waiter of this.takeWaiters()) {
            waiter.resolve(event.welcome);
          }
          break;
        case "lost":
          this.log(`connection lost: ${event.error.code}: ${event.error.message}`);
          if (event.error instanceof UnsupportedVersionError) {
            this.rejectWaiters(event.error); // this server will never welcome us
          }
          break;
        case "notice":
          this.log(event.message);
          break;
      }
    }
  }

  private takeWaiters(): ReadyWaiter[] {
    const waiters = this.waiters;
    this.waiters = [];
    return waiters;
  }

  private rejectWaiters(error: WireError): void {
    for (const waiter of this.takeWaiters()) {
      waiter.reject(error);
    }
  }

  private async shutDown(): Promise<void> {
    clearInterval(this.ticker);
    if (this.connectTimer !== undefined) {
      clearTimeout(this.connectTimer);
    }
    this.apply(this.protocol.close());
    this.rejectWaiters(new UnavailableError("client closed"));
    await this.transport.close(CLOSE_FLUSH_MS);
  }
}

function deadlineError(): DeadlineExceededError {
  return new DeadlineExceededError("deadline exceeded (the caller's deadline passed)", {
    reason: "deadline",
  });
}

/**
 * Connect to the server at `endpoint` and wait for its `welcome`.
 *
 * @throws UnavailableError no welcome within `connectTimeoutMs` (default 5000 ms).
 * @throws UnsupportedVersionError the server speaks no version this client does.
 */
export async function connect(endpoint: string, options: ClientOptions = {}): Promise<Client> {
  const client = new Client(endpoint, options);
  try {
    await client.whenReady();
  } catch (error) {
    await client.close();
    throw error;
  }
  return client;
}
