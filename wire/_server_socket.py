"""The server's ROUTER socket: its options, and CURVE with its ZAP handler when secured.

Kept apart from :class:`~wire._server.Server`, which only runs what this opens: the options are
where the server's flow control starts (``docs/protocol.md`` § 11), and each one's reason is
here beside it.
"""

from __future__ import annotations

from typing import Any

import zmq

from wire._limits import ServerLimits
from wire._security import AuthenticatedSocket, ServerSecurity
from wire._zap import ZapHandler

__all__ = ["SEND_HWM", "open_router"]

#: Messages ZeroMQ holds per peer before the pump holds (and counts the bytes of) the rest.
#: libzmq keeps them until the peer reads or disconnects, dropped or not, so only a low mark
#: bounds them (10,000 held 65 MB of describe replies); much lower and a client that reads in
#: bursts finds its pipe full and its calls refused (§ 11.3).
SEND_HWM = 1000
#: Messages ZeroMQ reads ahead per peer before it stops reading that peer's connection.
_RECEIVE_HWM = 10_000


def open_router(
    context: zmq.Context[Any], limits: ServerLimits, security: ServerSecurity | None
) -> tuple[zmq.Socket[bytes], ZapHandler | None]:
    """A ROUTER socket set up for ``limits``, not bound yet, and the ZAP handler that checks
    its clients' keys when ``security`` is given (to run while the socket serves).

    Raises:
        zmq.ZMQError: the context has a ZAP handler already (one per context); the socket is
            closed.
    """
    socket: zmq.Socket[bytes] = context.socket(
        zmq.ROUTER, socket_class=AuthenticatedSocket if security else zmq.Socket
    )
    zap = None
    if security is not None:
        security.configure(socket)
        try:
            zap = ZapHandler(context, security.is_allowed)
        except zmq.ZMQError:
            socket.close(linger=0)
            raise
    socket.setsockopt(zmq.ROUTER_MANDATORY, 1)
    socket.setsockopt(zmq.LINGER, 1000)
    socket.setsockopt(zmq.SNDHWM, SEND_HWM)
    socket.setsockopt(zmq.RCVHWM, _RECEIVE_HWM)
    # Frames over the limit get a too-large error from the codec; ZeroMQ itself only cuts off a
    # peer whose frame is far beyond it, so a huge frame is never buffered whole.
    socket.setsockopt(zmq.MAXMSGSIZE, 4 * limits.max_frame_bytes + 65_536)
    return socket, zap
