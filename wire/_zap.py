"""The ZAP handler (ZeroMQ RFC 27) that decides which CURVE clients may connect.

libzmq asks the handler bound at ``inproc://zeromq.zap.01`` *in the server socket's context*
about every handshake. The handler here is one trio task owning a REP socket, in the style of
the socket pump: it drains while ``EVENTS`` shows ``POLLIN`` and sleeps on the socket's FD
(edge-triggered, so ``EVENTS`` is read after every send and receive before it sleeps).

A refused client gets no reply at all: the handshake fails, its connection is closed, and its
DEALER keeps retrying; it never sees a frame from the server. Each refusal is logged (at most
once a minute per key and address, since the client retries ten times a second).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import attrs
import trio
import zmq
from zmq.utils import z85

__all__ = ["ZAP_ENDPOINT", "ZapDecision", "ZapHandler", "zap_reply"]

log = logging.getLogger("wire.zap")

#: Where libzmq sends ZAP requests (RFC 27).
ZAP_ENDPOINT = "inproc://zeromq.zap.01"
#: Seconds between two log lines about the same refused key and address.
_LOG_INTERVAL = 60.0


@attrs.frozen(kw_only=True)
class ZapDecision:
    """What the handler decided about one ZAP request, for the log."""

    allowed: bool
    #: The client's public key in Z85, ``""`` when the request carried none.
    client_key: str
    #: The client's address as libzmq reports it (an IP address for tcp).
    address: str
    mechanism: str
    #: Why a request was refused.
    reason: str = ""


def zap_reply(
    request: list[bytes], is_allowed: Callable[[str], bool]
) -> tuple[list[bytes], ZapDecision] | None:
    """The reply frames for one ZAP request, and the decision; ``None`` for a request too
    malformed to answer (libzmq never sends one).

    A request is accepted only if its mechanism is CURVE and ``is_allowed`` accepts the
    client's key; the reply's User-Id is that key (Z85), so it travels with every message of
    the connection.
    """
    if len(request) < 6 or request[0] != b"1.0":
        return None
    request_id = request[1]
    address = request[3].decode("utf-8", "replace")
    mechanism = request[5].decode("ascii", "replace")
    credentials = request[6:]
    key = ""
    if mechanism == "CURVE" and len(credentials) == 1 and len(credentials[0]) == 32:
        key = z85.encode(credentials[0]).decode("ascii")
    if not key:
        decision = ZapDecision(
            allowed=False,
            client_key="",
            address=address,
            mechanism=mechanism,
            reason=f"mechanism {mechanism} is not accepted (CURVE only)",
        )
    else:
        try:
            allowed = bool(is_allowed(key))
        except Exception:  # a broken allowlist must refuse, never crash the handler
            log.exception("ZAP: the allowlist check failed for key %s", key)
            allowed = False
        decision = ZapDecision(
            allowed=allowed,
            client_key=key,
            address=address,
            mechanism=mechanism,
            reason="" if allowed else "key not in the allowlist",
        )
    if decision.allowed:
        frames = [b"1.0", request_id, b"200", b"OK", key.encode("ascii"), b""]
    else:
        frames = [b"1.0", request_id, b"400", decision.reason.encode(), b"", b""]
    return frames, decision


def _readable(socket: zmq.Socket[bytes]) -> bool:
    events = socket.get(zmq.EVENTS)
    return isinstance(events, int) and bool(events & zmq.POLLIN)


class ZapHandler:
    """Answers ZAP requests of one ZeroMQ context until cancelled.

    Args:
        context: The context of the server socket (one handler per context).
        is_allowed: ``is_allowed(client_key_z85)``, consulted on every handshake.
    """

    def __init__(self, context: zmq.Context[Any], is_allowed: Callable[[str], bool]) -> None:
        self._is_allowed = is_allowed
        self._socket: zmq.Socket[bytes] = context.socket(zmq.REP)
        self._socket.setsockopt(zmq.LINGER, 0)
        try:
            self._socket.bind(ZAP_ENDPOINT)
        except zmq.ZMQError as exc:
            self._socket.close()
            raise zmq.ZMQError(
                exc.errno,
                f"cannot bind the ZAP handler at {ZAP_ENDPOINT}: {exc.strerror} (a context can "
                "have only one; give each CURVE server its own ZeroMQ context)",
            ) from None
        self._last_logged: dict[tuple[str, str], float] = {}
        #: Requests answered, by outcome (for tests and statistics).
        self.accepted = 0
        self.refused = 0

    async def run(self) -> None:
        """Answer requests until cancelled; closes the socket on the way out."""
        socket = self._socket
        try:
            while True:
                while _readable(socket):
                    self._answer(socket.recv_multipart(zmq.NOBLOCK))
                await trio.lowlevel.wait_readable(socket.FD)
        finally:
            self.close()

    def close(self) -> None:
        """Close the ZAP socket (idempotent); libzmq then refuses every new handshake."""
        if not self._socket.closed:
            trio.lowlevel.notify_closing(self._socket.FD)
            self._socket.close(linger=0)

    def _answer(self, request: list[bytes]) -> None:
        answered = zap_reply(request, self._is_allowed)
        if answered is None:
            # A REP socket must answer before it can receive again; an empty reply is one
            # libzmq treats as malformed, which fails the handshake.
            self._socket.send_multipart([b"1.0", b"", b"500", b"malformed request", b"", b""])
            log.warning("ZAP: malformed request refused")
            return
        frames, decision = answered
        self._socket.send_multipart(frames, zmq.NOBLOCK)
        if decision.allowed:
            self.accepted += 1
            log.debug("ZAP: accepted %s from %s", decision.client_key, decision.address)
            return
        self.refused += 1
        now = trio.current_time()
        seen = (decision.client_key, decision.address)
        if len(self._last_logged) > 4096:  # a flood of fresh keys must not grow it forever
            self._last_logged.clear()
        if now - self._last_logged.get(seen, -_LOG_INTERVAL) >= _LOG_INTERVAL:
            self._last_logged[seen] = now
            log.warning(
                "ZAP: refused %s client %s from %s: %s",
                decision.mechanism,
                decision.client_key or "(no key)",
                decision.address,
                decision.reason,
            )
