"""Transport security: CURVE keys, who may connect, who may call what, private ipc sockets.

ZeroMQ's CURVE mechanism (CurveZMQ, RFC 26) encrypts and authenticates a connection with
Curve25519 key pairs; the server learns the client's public key during the handshake and asks
a ZAP handler (RFC 27, :mod:`wire._zap`) whether to accept it. Here the ZAP handler accepts a
key when :attr:`ServerSecurity.is_allowed` says so, and sets the connection's ZAP *User-Id* to
the client's public key (Z85 text). Every message received on that connection carries it, so
the server authorizes each call by the key of the connection that carried it
(:attr:`ServerSecurity.authorize`), never by anything the client says in a frame.

``wire`` decides nothing about roles: ``authorize`` is supplied by the application (the actor
system maps keys to ``read``/``write`` roles over each endpoint's ``mutates`` flag).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import stat
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import zmq

from wire._endpoints import EndpointSpec

__all__ = [
    "AuthenticatedSocket",
    "Authorizer",
    "ClientSecurity",
    "CurveKeyError",
    "CurveKeyPair",
    "ServerSecurity",
    "bind_private",
    "check_z85_key",
    "close_private",
    "is_loopback",
]

#: ``authorize(user_id, spec)``: ``None`` to allow the call, else the reason to refuse it with
#: ``unauthorized``. ``user_id`` is the caller's public key (Z85), ``None`` on a connection
#: that carries none (``inproc://``, which has no security handshake).
Authorizer = Callable[[str | None, EndpointSpec], str | None]

#: Length of a Z85-encoded Curve25519 key.
Z85_KEY_LENGTH = 40


class CurveKeyError(ValueError):
    """A CURVE key is malformed or does not match its pair."""


def check_z85_key(key: str | bytes, what: str = "key") -> bytes:
    """``key`` as Z85 bytes, checked to decode to 32 bytes.

    Raises:
        CurveKeyError: the key is not 40 characters of Z85.
    """
    raw = key.encode("ascii", "replace") if isinstance(key, str) else key
    if len(raw) != Z85_KEY_LENGTH:
        raise CurveKeyError(f"{what} must be {Z85_KEY_LENGTH} Z85 characters, got {len(raw)}")
    try:
        from zmq.utils import z85

        z85.decode(raw)
    except (ValueError, KeyError, TypeError, IndexError, OverflowError):
        raise CurveKeyError(f"{what} is not valid Z85 text") from None
    return raw


def _public_key(key: str | bytes) -> bytes:
    return check_z85_key(key, "public key")


def _secret_key(key: str | bytes) -> bytes:
    return check_z85_key(key, "secret key")


def _server_key(key: str | bytes) -> bytes:
    return check_z85_key(key, "server public key")


@attrs.frozen(kw_only=True)
class CurveKeyPair:
    """A Curve25519 key pair in Z85 text (40 characters each)."""

    public: bytes = attrs.field(converter=_public_key)
    secret: bytes = attrs.field(converter=_secret_key, repr=False)

    def __attrs_post_init__(self) -> None:
        if zmq.curve_public(self.secret) != self.public:
            raise CurveKeyError("the public key does not belong to the secret key")

    @classmethod
    def generate(cls) -> CurveKeyPair:
        public, secret = zmq.curve_keypair()
        return cls(public=public, secret=secret)

    @classmethod
    def from_secret(cls, secret: str | bytes) -> CurveKeyPair:
        raw = check_z85_key(secret, "secret key")
        return cls(public=zmq.curve_public(raw), secret=raw)


@attrs.frozen(kw_only=True)
class ServerSecurity:
    """CURVE on the server socket, the client allowlist, and per-call authorization."""

    #: The server's key pair; clients pin its public half.
    keys: CurveKeyPair
    #: ``is_allowed(client_public_key_z85)``: may this client connect at all? Consulted by the
    #: ZAP handler on every handshake, so a changed allowlist takes effect on the next one.
    is_allowed: Callable[[str], bool]
    #: Per-call authorization (``None``: every connected client may call every endpoint).
    authorize: Authorizer | None = None
    #: ZAP domain of the server socket (RFC 27); appears in the ZAP requests.
    domain: str = "wire"

    def configure(self, socket: zmq.Socket[Any]) -> None:
        """Make ``socket`` a CURVE server that refuses connections the ZAP handler refuses."""
        socket.setsockopt(zmq.CURVE_SERVER, 1)
        socket.setsockopt(zmq.CURVE_SECRETKEY, self.keys.secret)
        socket.setsockopt(zmq.ZAP_DOMAIN, self.domain.encode())
        # Without a ZAP handler libzmq would accept every CURVE client; enforcing the domain
        # makes a missing handler refuse everyone instead.
        socket.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)


@attrs.frozen(kw_only=True)
class ClientSecurity:
    """CURVE on a client socket: the server's public key (pinned) and the client's pair."""

    server_key: bytes = attrs.field(converter=_server_key)
    keys: CurveKeyPair

    def configure(self, socket: zmq.Socket[Any]) -> None:
        socket.setsockopt(zmq.CURVE_SERVERKEY, self.server_key)
        socket.setsockopt(zmq.CURVE_PUBLICKEY, self.keys.public)
        socket.setsockopt(zmq.CURVE_SECRETKEY, self.keys.secret)


class AuthenticatedSocket(zmq.Socket[bytes]):
    """A socket that remembers the ZAP User-Id of the last message part it received.

    The pump receives message parts as frames (``copy=False``); the User-Id the ZAP handler set
    for the connection is a property of each of them. Reading it here keeps the pump unaware of
    security: the server reads :attr:`user_id` while it handles the message just received.
    """

    #: The User-Id of the connection that sent the last part received, ``None`` if it had none.
    user_id: str | None = None

    def recv(self, flags: int = 0, copy: bool = True, track: bool = False) -> Any:
        part = super().recv(flags, copy, track)
        if isinstance(part, zmq.Frame):
            try:
                user_id = part.get("User-Id")
            except zmq.ZMQError:  # no security handshake on this connection (inproc)
                user_id = None
            self.user_id = user_id if isinstance(user_id, str) and user_id else None
        return part


def is_loopback(endpoint: str) -> bool:
    """Whether a ``tcp://`` endpoint binds only to a loopback address.

    ``localhost``, ``127.0.0.0/8`` and ``::1`` are loopback. A wildcard (``*``), an interface
    name other than ``lo`` or any other host name is not: it may be reachable from elsewhere.
    Non-tcp endpoints (``ipc://``, ``inproc://``) are local by construction and count as
    loopback here.
    """
    if not endpoint.startswith("tcp://"):
        return True
    host = endpoint.removeprefix("tcp://").rpartition(":")[0]
    host = host.removeprefix("[").removesuffix("]")
    if host in ("localhost", "lo"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def _owner_only_umask() -> Iterator[None]:
    # The umask is process-wide; it is narrowed only for the instant of the bind, and a file
    # another thread creates meanwhile can only end up *more* private, never less.
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


#: The ipc socket files each socket bound with :func:`bind_private` (path, device, inode):
#: what :func:`close_private` removes.
_SOCKET_FILES: weakref.WeakKeyDictionary[zmq.Socket[Any], list[tuple[str, int, int]]] = (
    weakref.WeakKeyDictionary()
)


def bind_private(socket: zmq.Socket[Any], endpoint: str) -> None:
    """Bind ``socket``; an ``ipc://`` socket file is created owner-only (0600).

    A missing parent directory is created owner-only (0700). The socket file is created under
    a 077 umask, so it is never reachable by others, not even for the instant before the
    ``chmod`` that makes the mode explicit. :func:`close_private` closes the socket and removes
    the file.
    """
    path = endpoint.removeprefix("ipc://") if endpoint.startswith("ipc://") else None
    if path is None or path.startswith("@"):  # not ipc, or a Linux abstract socket
        socket.bind(endpoint)
        return
    directory = os.path.dirname(path)
    if directory and not os.path.isdir(directory):
        os.makedirs(directory, mode=0o700, exist_ok=True)
    with _owner_only_umask():
        socket.bind(endpoint)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o600)
    with contextlib.suppress(OSError):
        found = os.stat(path)
        bound = (os.path.abspath(path), found.st_dev, found.st_ino)
        _SOCKET_FILES.setdefault(socket, []).append(bound)


def close_private(socket: zmq.Socket[Any], *, linger: int) -> None:
    """Close ``socket`` and remove the ipc socket files it bound with :func:`bind_private`.

    ZeroMQ leaves them behind (it removes only those of ``ipc://*``). A file is removed only
    while it is still the one this socket bound: another socket may have bound the path since.
    """
    socket.close(linger=linger)
    for path, device, inode in _SOCKET_FILES.pop(socket, []):
        with contextlib.suppress(OSError):
            found = os.stat(path)
            if stat.S_ISSOCK(found.st_mode) and (found.st_dev, found.st_ino) == (device, inode):
                os.unlink(path)
