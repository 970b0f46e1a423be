/**
 * The client half of protocol v1, sans-IO: connection state, call ids, the calls in flight,
 * heartbeats and peer loss (docs/protocol.md §4–§11). It reads no clock and owns no socket:
 * the caller passes `now` (monotonic milliseconds) and carries out the returned events.
 *
 * Calls made before the first `welcome` are queued here and sent when it arrives, never
 * pipelined behind the `hello`. That is what makes re-sending `hello` while waiting safe: a
 * server that reads a second `hello` from a peer it already knows forgets that peer's calls
 * without a terminal frame (§4.3), so a call sent between two hellos can vanish. Every hello
 * this client sends precedes, on the one socket, every call it sends after a welcome.
 */

import { EncodeError, type WireMap, type WireValue } from "./codec.js";
import {
  ArgumentsInvalidError,
  type CancelReason,
  errorFromWire,
  OverloadedError,
  PeerLostError,
  TooLargeError,
  UnavailableError,
  WireError,
} from "./errors.js";
import {
  BYE,
  decodeServerMessage,
  encodeCall,
  encodeCancel,
  encodeHello,
  type ErrorMessage,
  InvalidFrameError,
  MAX_CALL_ID,
  PING,
  PONG,
  type ServerMessage,
  type Welcome,
} from "./messages.js";

/** §4.1: greeting (hello sent, no welcome yet), ready, lost, closed. */
export type ClientState = "greeting" | "ready" | "lost" | "closed";

/** The timers and limits of §3.2 that the client adopts from the welcome. */
export interface Limits {
  readonly heartbeatMs: number;
  readonly peerTimeoutMs: number;
  readonly maxFrameBytes: number;
  readonly maxInFlight: number;
}

/** What a client assumes before the first welcome (the server's defaults, §16). */
export const DEFAULT_LIMITS: Limits = {
  heartbeatMs: 1000,
  peerTimeoutMs: 2500,
  maxFrameBytes: 8 * 1024 * 1024,
  maxInFlight: 4096,
};

export interface CallRequest {
  readonly endpoint: string;
  readonly args: WireMap;
  /** The caller's absolute deadline on the `now` clock; none if undefined. */
  readonly deadlineAt?: number | undefined;
  readonly supersede?: string | undefined;
}

/** What the driver must do. `force` frames bypass the send backlog bound (§11.3). */
export type ProtocolEvent<H> =
  | { readonly kind: "send"; readonly frame: Uint8Array; readonly force: boolean }
  | { readonly kind: "result"; readonly handle: H; readonly value: WireValue }
  | { readonly kind: "failure"; readonly handle: H; readonly error: WireError }
  | { readonly kind: "ready"; readonly welcome: Welcome }
  | { readonly kind: "lost"; readonly error: WireError }
  | { readonly kind: "notice"; readonly message: string };

/** Calls that may wait for the welcome; more fail with `overloaded` (as a full send backlog
 * does, §11.3). */
export const MAX_QUEUED = 100_000;

interface Queued<H> {
  readonly handle: H;
  readonly request: CallRequest;
}

export class ClientProtocol<H> {
  private stateValue: ClientState = "greeting";
  private limitsValue: Limits = DEFAULT_LIMITS;
  private welcomeValue: Welcome | undefined;
  /** Sent calls awaiting their terminal frame. */
  private readonly pending = new Map<number, H>();
  /** Calls made before a welcome, in the order they were made (Map keeps insertion order). */
  private readonly queued = new Map<number, Queued<H>>();
  private nextId = 1;
  private lastHeard: number;
  private nextPing: number;
  private readonly helloFrame: Uint8Array;

  constructor(name: string, now: number) {
    this.helloFrame = encodeHello(name);
    this.lastHeard = now;
    this.nextPing = now + this.limitsValue.heartbeatMs;
  }

  get state(): ClientState {
    return this.stateValue;
  }

  get limits(): Limits {
    return this.limitsValue;
  }

  get welcome(): Welcome | undefined {
    return this.welcomeValue;
  }

  /** Calls sent or queued whose end has not been reported. */
  get inFlight(): number {
    return this.pending.size + this.queued.size;
  }

  /** The first frame of a connection; send it once at start (tick re-sends it). */
  hello(now: number): Uint8Array {
    this.nextPing = now + this.limitsValue.heartbeatMs;
    return this.helloFrame;
  }

  /**
   * Start a call: returns its id and the events to carry out (its `call` frame, unless it is
   * queued until the welcome).
   *
   * @throws PeerLostError the server is lost; calls fail fast until it welcomes us again.
   * @throws UnavailableError the client is closed.
   * @throws ArgumentsInvalidError an argument cannot be encoded.
   * @throws TooLargeError the encoded call exceeds `maxFrameBytes`.
   * @throws OverloadedError {@link MAX_QUEUED} calls already wait for the welcome.
   */
  submit(handle: H, request: CallRequest, now: number): { id: number; events: ProtocolEvent<H>[] } {
    if (this.stateValue === "lost") {
      throw new PeerLostError("server is not answering; waiting for a new welcome");
    }
    if (this.stateValue === "closed") {
      throw new UnavailableError("client is closed");
    }
    if (this.stateValue === "greeting" && this.queued.size >= MAX_QUEUED) {
      throw new OverloadedError("waiting for the server's welcome: too many calls queued", {
        limit: MAX_QUEUED,
      });
    }
    if (this.nextId > MAX_CALL_ID) {
      throw new UnavailableError("call ids exhausted on this connection");
    }
    const id = this.nextId++;
    // Encode (and measure) now even when queueing, so that bad arguments fail at the call.
    const frame = this.encode(id, request, now);
    if (this.stateValue === "greeting") {
      this.queued.set(id, { handle, request });
      return { id, events: [] };
    }
    this.pending.set(id, handle);
    return { id, events: [{ kind: "send", frame, force: false }] };
  }

  /**
   * The caller gave up on call `id`: forget it, and return the `cancel` to send if the call
   * was sent. A terminal frame that arrives for it later is dropped (§7.4).
   */
  abandon(id: number, reason: CancelReason): ProtocolEvent<H>[] {
    if (this.queued.delete(id)) {
      return []; // never sent: nothing to cancel
    }
    if (!this.pending.delete(id)) {
      return []; // already ended
    }
    return [{ kind: "send", frame: encodeCancel(id, reason), force: true }];
  }

  /** Drop call `id` without telling the server: its frame could not be sent. */
  forget(id: number): void {
    this.pending.delete(id);
    this.queued.delete(id);
  }

  /** Process one frame from the server, received at `now`. */
  receive(frame: Uint8Array, now: number): ProtocolEvent<H>[] {
    // §10: any frame is a sign of life, even an invalid one.
    this.lastHeard = now;
    if (this.stateValue === "closed") {
      return [];
    }
    let message: ServerMessage;
    try {
      if (frame.byteLength > this.limitsValue.maxFrameBytes) {
        throw new InvalidFrameError(`frame of ${frame.byteLength} bytes exceeds the limit`);
      }
      message = decodeServerMessage(frame);
    } catch (error) {
      if (!(error instanceof InvalidFrameError)) {
        throw error;
      }
      // §4.6: a server that sends garbage cannot be trusted with calls.
      return this.lose(new PeerLostError(`server sent an invalid frame: ${error.message}`));
    }
    switch (message.type) {
      case "result":
        return this.settle(message.id, (handle) => ({
          kind: "result",
          handle,
          value: message.value,
        }));
      case "error":
        return message.id === null
          ? this.connectionError(message)
          : this.callError(message.id, message);
      case "ping":
        return [{ kind: "send", frame: PONG, force: true }];
      case "welcome":
        return this.welcomed(message, now);
      case "bye":
        return this.lose(new UnavailableError("server is shutting down"));
      case "pong":
      case "ignored":
        return [];
    }
  }

  /**
   * Advance the timers: ping (or re-hello while not ready) every heartbeat, and declare the
   * server lost after `peerTimeoutMs` of silence. `unread` says the socket holds frames not yet
   * read: the silence is then ours, not the server's (§10), so it is not counted. It is asked
   * only once the silence is long enough to matter: zeromq.js answers it from the socket's
   * edge-triggered readable event, and asking spends the event a pending `receive()` waits
   * for, which then waits for the next frame (every call in flight stalled until the next
   * heartbeat when this was read on every tick).
   */
  tick(now: number, unread: boolean | (() => boolean)): ProtocolEvent<H>[] {
    if (this.stateValue === "closed") {
      return [];
    }
    const events: ProtocolEvent<H>[] = [];
    const { heartbeatMs, peerTimeoutMs } = this.limitsValue;
    if (
      this.stateValue === "ready" &&
      now - this.lastHeard > peerTimeoutMs &&
      !(typeof unread === "function" ? unread() : unread)
    ) {
      events.push(
        ...this.lose(
          new PeerLostError(`server silent for more than ${peerTimeoutMs} ms (heartbeat bound)`),
        ),
      );
    }
    if (now >= this.nextPing) {
      this.nextPing = now + heartbeatMs;
      const frame = this.stateValue === "ready" ? PING : this.helloFrame;
      events.push({ kind: "send", frame, force: true });
    }
    return events;
  }

  /** The server is lost: fail every call with `error`; calls fail fast until a welcome. */
  lose(error: WireError): ProtocolEvent<H>[] {
    if (this.stateValue !== "closed") {
      this.stateValue = "lost";
    }
    return [...this.failAll(error), { kind: "lost", error }];
  }

  /** Close: fail every call with `unavailable` and return the `bye` to send (§4.4). */
  close(): ProtocolEvent<H>[] {
    if (this.stateValue === "closed") {
      return [];
    }
    this.stateValue = "closed";
    return [
      ...this.failAll(new UnavailableError("client closed")),
      { kind: "send", frame: BYE, force: true },
    ];
  }

  // -- internals ------------------------------------------------------------------------------

  private encode(id: number, request: CallRequest, now: number): Uint8Array {
    // §6: the remaining budget at the moment of sending, clamped at 0 (never negative).
    const deadlineMs =
      request.deadlineAt === undefined
        ? undefined
        : Math.max(0, Math.ceil(request.deadlineAt - now));
    let frame: Uint8Array;
    try {
      frame = encodeCall({
        id,
        endpoint: request.endpoint,
        args: request.args,
        deadlineMs,
        supersede: request.supersede,
      });
    } catch (error) {
      if (!(error instanceof EncodeError)) {
        throw error;
      }
      const path = error.path.startsWith("args.") ? error.path.slice("args.".length) : error.path;
      throw new ArgumentsInvalidError(
        `${request.endpoint}: ${error.message.replace(error.path, path)}`,
        {
          path,
        },
      );
    }
    const limit = this.limitsValue.maxFrameBytes;
    if (frame.byteLength > limit) {
      throw new TooLargeError(
        `call of ${frame.byteLength} bytes exceeds the limit of ${limit} bytes`,
        {
          limit,
        },
      );
    }
    return frame;
  }

  private welcomed(welcome: Welcome, now: number): ProtocolEvent<H>[] {
    this.welcomeValue = welcome;
    this.limitsValue = {
      heartbeatMs: welcome.heartbeatMs,
      peerTimeoutMs: welcome.peerTimeoutMs,
      maxFrameBytes: welcome.maxFrameBytes,
      maxInFlight: welcome.maxInFlight,
    };
    if (this.stateValue === "ready") {
      // The answer to a hello re-sent while waiting: the server read that hello before any
      // of our calls, so it has forgotten none of them. Nothing to do.
      return [];
    }
    this.stateValue = "ready";
    this.nextPing = now + welcome.heartbeatMs;
    const events: ProtocolEvent<H>[] = [];
    for (const [id, { handle, request }] of this.queued) {
      try {
        // Encoded again: the deadline budget shrank while queued, and the limit may differ.
        const frame = this.encode(id, request, now);
        this.pending.set(id, handle);
        // Forced: these calls were admitted (bounded by MAX_QUEUED) and must not fail here.
        events.push({ kind: "send", frame, force: true });
      } catch (error) {
        if (!(error instanceof WireError)) {
          throw error;
        }
        events.push({ kind: "failure", handle, error });
      }
    }
    this.queued.clear();
    events.push({ kind: "ready", welcome });
    return events;
  }

  private settle(id: number, event: (handle: H) => ProtocolEvent<H>): ProtocolEvent<H>[] {
    const handle = this.pending.get(id);
    if (handle === undefined) {
      return []; // §5.4: a terminal frame for an id we no longer track is dropped
    }
    this.pending.delete(id);
    return [event(handle)];
  }

  private callError(id: number, message: ErrorMessage): ProtocolEvent<H>[] {
    return this.settle(id, (handle) => ({
      kind: "failure",
      handle,
      error: errorFromWire(message.code, message.message, message.details),
    }));
  }

  private connectionError(message: ErrorMessage): ProtocolEvent<H>[] {
    const error = errorFromWire(message.code, message.message, message.details);
    if (message.code === "peer-lost" || message.code === "unsupported-version") {
      // §4.3: the server does not know us (any more); it has none of our calls.
      return this.lose(error);
    }
    const named = message.details["id"];
    if (typeof named === "number" && this.pending.has(named)) {
      // A call the server did not accept (a duplicate id, §5.1).
      return this.settle(named, (handle) => ({ kind: "failure", handle, error }));
    }
    return [{ kind: "notice", message: `connection-level ${message.code}: ${message.message}` }];
  }

  private failAll(error: WireError): ProtocolEvent<H>[] {
    const events: ProtocolEvent<H>[] = [];
    for (const handle of this.pending.values()) {
      events.push({ kind: "failure", handle, error });
    }
    for (const { handle } of this.queued.values()) {
      events.push({ kind: "failure", handle, error });
    }
    this.pending.clear();
    this.queued.clear();
    return events;
  }
}
