/**
 * The socket owner: one ZeroMQ DEALER, a receive loop, and an ordered send backlog.
 *
 * zeromq.js allows one pending `send()` per socket, and a DEALER blocks when the server does
 * not read (its high-water mark is reached). Frames therefore go through a FIFO backlog that
 * one loop drains, so they leave in the order they were queued and nothing is dropped
 * (§11.3). Calls are refused once the backlog holds {@link MAX_BACKLOG} frames; the frames
 * that keep a connection coherent (`cancel`, `ping`, `pong`, `hello`, `bye`) are always
 * queued.
 */

import { Dealer } from "zeromq";

import { OverloadedError } from "./errors.js";
import { checkZ85Key, type CurveKeys } from "./keys.js";

/** Frames waiting for the socket before new calls are refused with `overloaded` (§11.3). */
export const MAX_BACKLOG = 100_000;

export interface TransportOptions {
  readonly endpoint: string;
  readonly curve?: CurveKeys | undefined;
}

export interface TransportHandlers {
  /** One single-frame message from the server. */
  readonly frame: (frame: Uint8Array) => void;
  /** The socket failed; the transport is unusable. */
  readonly failure: (error: Error) => void;
}

export class Transport {
  private readonly socket: Dealer;
  /** Frames not yet handed to the socket; `head` is the next one to send. */
  private backlog: (Uint8Array | undefined)[] = [];
  private head = 0;
  private sending = false;
  private closing = false;
  private closed: Promise<void> | undefined;
  private drained: (() => void) | undefined;

  constructor(
    options: TransportOptions,
    private readonly handlers: TransportHandlers,
  ) {
    const curve = options.curve;
    if (curve !== undefined) {
      // ZeroMQ would only say "Invalid argument"; name the key that is wrong.
      checkZ85Key(curve.serverKey, "curve.serverKey");
      checkZ85Key(curve.publicKey, "curve.publicKey");
      checkZ85Key(curve.secretKey, "curve.secretKey");
    }
    this.socket = new Dealer({
      linger: 200,
      sendHighWaterMark: 10_000,
      receiveHighWaterMark: 10_000,
      // CURVE: the server's key is pinned; a server that cannot prove it holds the matching
      // secret never completes the handshake, and neither does a client it does not list.
      ...(curve === undefined
        ? {}
        : {
            curveServerKey: curve.serverKey,
            curvePublicKey: curve.publicKey,
            curveSecretKey: curve.secretKey,
          }),
    });
    this.socket.connect(options.endpoint);
    void this.receiveLoop();
  }

  /** Frames waiting to be handed to the socket. */
  get backlogSize(): number {
    return this.backlog.length - this.head;
  }

  /**
   * Whether the socket holds frames not yet read. A timer that fires while this is true has
   * run before the receive loop could catch up, so silence measured now is not the peer's.
   */
  get unread(): boolean {
    return !this.socket.closed && this.socket.readable;
  }

  /**
   * Queue `frame` for sending.
   *
   * @throws OverloadedError the backlog is full and `force` is false.
   */
  send(frame: Uint8Array, force: boolean): void {
    if (this.closing) {
      return;
    }
    if (!force && this.backlogSize >= MAX_BACKLOG) {
      throw new OverloadedError("peer is not reading: send backlog is full", {
        limit: MAX_BACKLOG,
      });
    }
    this.backlog.push(frame);
    if (!this.sending) {
      void this.sendLoop();
    }
  }

  /** Hand what is queued to the socket for up to `flushMs`, then close the socket. */
  close(flushMs: number): Promise<void> {
    this.closed ??= this.flushAndClose(flushMs);
    return this.closed;
  }

  private async flushAndClose(flushMs: number): Promise<void> {
    if (this.backlogSize > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, flushMs);
        this.drained = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    this.closing = true;
    // linger (200 ms) lets ZeroMQ deliver what it already holds, such as our bye.
    this.socket.close();
  }

  private async sendLoop(): Promise<void> {
    this.sending = true;
    try {
      while (this.head < this.backlog.length && !this.socket.closed) {
        const frame = this.backlog[this.head] as Uint8Array;
        await this.socket.send(frame);
        this.backlog[this.head++] = undefined;
        if (this.head > 1024 && this.head * 2 > this.backlog.length) {
          this.backlog = this.backlog.slice(this.head);
          this.head = 0;
        }
      }
      this.backlog = [];
      this.head = 0;
    } catch (error) {
      if (!this.closing && !this.socket.closed) {
        this.handlers.failure(error instanceof Error ? error : new Error(String(error)));
      }
    } finally {
      this.sending = false;
      this.drained?.();
      this.drained = undefined;
    }
  }

  private async receiveLoop(): Promise<void> {
    for (;;) {
      let parts: Buffer[];
      try {
        parts = await this.socket.receive();
      } catch (error) {
        if (!this.closing && !this.socket.closed) {
          this.handlers.failure(error instanceof Error ? error : new Error(String(error)));
        }
        return;
      }
      // §1: one message is one frame; a ROUTER never sends more, so ignore rather than trust.
      const frame = parts.length === 1 ? parts[0] : undefined;
      if (frame === undefined) {
        continue;
      }
      try {
        // A plain Uint8Array view (no copy), so binary values decode as Uint8Array, not Buffer.
        this.handlers.frame(new Uint8Array(frame.buffer, frame.byteOffset, frame.byteLength));
      } catch (error) {
        // A bug in handling one frame must not stop the loop silently.
        this.handlers.failure(error instanceof Error ? error : new Error(String(error)));
      }
    }
  }
}
