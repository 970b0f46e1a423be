"""Endpoint checks of the command line, before ZeroMQ sees the endpoint.

ZeroMQ turns a missing scheme into ``Invalid argument``, ``http://`` into ``Protocol not
supported``, an unknown host into a silent wait, and binds ``ipc://`` over whatever file is at
the path (a live server's socket, or a regular file it deletes). These checks name the problem
and what to write instead, as a :class:`~actors.cli._errors.CliError`: exit status 2 for what
``serve`` cannot bind and for a malformed endpoint, 1 for a server ``call`` cannot reach.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import stat
from collections.abc import Sequence

from actors.cli._errors import EXIT_CALL_FAILED, EXIT_USAGE, CliError

__all__ = [
    "IPC_PATH_MAX",
    "SCHEMES",
    "bind_failure",
    "check_bind_path",
    "check_endpoint",
    "check_host",
]

SCHEMES = ("tcp", "ipc")
#: Longest ipc path the kernel takes (``sizeof(sockaddr_un.sun_path) - 1``).
IPC_PATH_MAX = 107

_FORMS = "tcp://HOST:PORT or ipc:///PATH/TO.sock"
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.*-]+)?:(\d+|\*)$")


def check_endpoint(endpoint: str, *, bind: bool) -> None:
    """Check the form of ``endpoint``, without the network.

    ``bind``: for ``serve`` (its ipc path is checked later, by :func:`check_bind_path`);
    otherwise for ``call``, whose ipc path must be a socket file (none: no server there).

    Raises:
        CliError: what is wrong, and what to write instead.
    """
    scheme, sep, rest = endpoint.partition("://")
    if not sep:
        raise CliError(
            f"endpoint {endpoint!r} has no scheme",
            hints=[f"write {_with_scheme(endpoint)}"],
        )
    if scheme not in SCHEMES:
        raise CliError(
            f"unsupported scheme {scheme + '://'!r} in endpoint {endpoint!r}: agent-actors "
            "speaks ZeroMQ over tcp:// or ipc://",
            hints=[_scheme_hint(scheme, rest)],
        )
    if scheme == "tcp":
        _check_tcp(endpoint, rest, bind=bind)
    else:
        _check_ipc(endpoint, rest, bind=bind)


def _with_scheme(endpoint: str) -> str:
    if endpoint.startswith(("/", "./", "../")) or endpoint.endswith(".sock"):
        return f"ipc://{endpoint}"
    if endpoint.isdigit():
        return f"tcp://127.0.0.1:{endpoint}"
    if _HOST_PORT.match(endpoint):
        return f"tcp://{endpoint}"
    return _FORMS


def _scheme_hint(scheme: str, rest: str) -> str:
    if scheme == "inproc":
        return f"inproc:// reaches only sockets in the same process; use {_FORMS}"
    authority = rest.split("/", 1)[0]
    if _HOST_PORT.match(authority):
        return f"write tcp://{authority}"
    return f"write {_FORMS}"


def _check_tcp(endpoint: str, rest: str, *, bind: bool) -> None:
    # ``tcp://SOURCE;HOST:PORT`` (a connect's source address): the target is what matters.
    target = rest.rpartition(";")[2]
    host, sep, port = target.rpartition(":")
    if not sep or not host:
        example = "tcp://127.0.0.1:7555" if bind else "tcp://HOST:7555"
        raise CliError(
            f"endpoint {endpoint!r} needs a host and a port",
            hints=[f"write it as tcp://HOST:PORT, e.g. {example}"],
        )
    wildcard_port = bind and port == "*"
    if not wildcard_port and not (port.isdigit() and (0 if bind else 1) <= int(port) <= 65535):
        lowest = 0 if bind else 1
        raise CliError(
            f"port {port!r} of endpoint {endpoint!r} is not a number from {lowest} to 65535",
            hints=["tcp://127.0.0.1:0 binds a free port"] if bind else [],
        )
    if not bind and host == "*":
        raise CliError(
            f"endpoint {endpoint!r}: '*' binds every interface; a call needs the server's host",
            hints=[f"write tcp://127.0.0.1:{port} for a server on this machine"],
        )


def _check_ipc(endpoint: str, path: str, *, bind: bool) -> None:
    if not path:
        raise CliError(f"endpoint {endpoint!r} has no path", hints=["write ipc:///PATH/TO.sock"])
    if path.startswith("@") or (bind and path == "*"):  # an abstract socket; a temporary one
        return
    if len(os.fsencode(path)) > IPC_PATH_MAX:
        raise CliError(
            f"ipc path of {endpoint!r} is {len(os.fsencode(path))} bytes long; the system's "
            f"limit is {IPC_PATH_MAX}",
            hints=["choose a shorter path"],
        )
    if bind:
        return
    directory = os.path.dirname(path) or "."
    if not os.path.exists(path):
        where = "" if os.path.isdir(directory) else f" (no directory {directory})"
        raise CliError(
            f"no server at {endpoint}: {path} does not exist{where}",
            status=EXIT_CALL_FAILED,
            hints=[f"is `agent-actors serve --endpoint {endpoint}` running?"],
            fields={"endpoint": endpoint},
        )
    if not stat.S_ISSOCK(os.stat(path).st_mode):
        raise CliError(
            f"no server at {endpoint}: {path} is not a socket",
            status=EXIT_CALL_FAILED,
            fields={"endpoint": endpoint},
        )


def check_bind_path(endpoint: str) -> None:
    """Check the path of an ``ipc://`` endpoint ``serve`` is about to bind (nothing for others):
    its directory must exist (it is not created), and whatever is at the path must be a socket
    file no live server listens on (ZeroMQ would delete a file there, or take the path from
    that server).

    Raises:
        CliError: the directory is missing, or the path is taken.
    """
    scheme, _, path = endpoint.partition("://")
    if scheme != "ipc" or not path or path.startswith("@") or path == "*":
        return
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        what = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise CliError(
            f"cannot serve on {endpoint}: directory {directory} {what}",
            hints=[f"create it first (mkdir -p {directory}), or choose another path"],
        )
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise CliError(f"cannot serve on {endpoint}: {path}: {exc.strerror}") from None
    if not stat.S_ISSOCK(mode):
        raise CliError(
            f"cannot serve on {endpoint}: {path} exists and is not a socket (binding would "
            "delete it)",
            hints=["choose another path"],
        )
    if _listening(path):
        raise CliError(
            f"cannot serve on {endpoint}: another server is listening there",
            hints=["stop that server, or choose another path"],
        )


def _listening(path: str) -> bool:
    """Whether a process accepts connections on the unix socket at ``path`` (a socket file
    left by a server that is gone refuses them, and may be bound over)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def check_host(endpoint: str, *, bind: bool) -> None:
    """Resolve the host of a ``tcp://`` endpoint (a blocking DNS lookup; nothing for others).

    For ``serve``, ``*`` and this machine's interface names need no lookup.

    Raises:
        CliError: the host does not resolve (status 2 for ``serve``, 1 for ``call``).
    """
    scheme, _, rest = endpoint.partition("://")
    if scheme != "tcp":
        return
    host = rest.rpartition(";")[2].rpartition(":")[0]
    host = host.removeprefix("[").removesuffix("]")
    if host == "*" or (bind and host in {name for _, name in socket.if_nameindex()}):
        return
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        action = "cannot serve on" if bind else "cannot call"
        raise CliError(
            f"{action} {endpoint}: cannot resolve host {host!r} ({reason})",
            status=EXIT_USAGE if bind else EXIT_CALL_FAILED,
            hints=["check the host name, or use an IP address"],
            fields={"endpoint": endpoint},
        ) from None


def bind_failure(exc: Exception, endpoints: Sequence[str]) -> CliError:
    """What ``serve`` says when binding failed with ``exc`` (a ``zmq.ZMQError``: its ``errno``,
    and the endpoint in its text)."""
    found = re.search(r"\(addr='([^']*)'\)", str(exc))
    endpoint = found.group(1) if found else ", ".join(endpoints)
    code: int = getattr(exc, "errno", None) or 0
    reason = os.strerror(code).lower() if code else str(exc)
    hints: list[str] = []
    if code == errno.EADDRINUSE:
        reason = "the address is already in use (by another server, or another program)"
        hints = ["stop that server, or choose another port (tcp://127.0.0.1:0 picks a free one)"]
    elif code == errno.EADDRNOTAVAIL:
        reason = "that address is not one of this machine's"
        hints = ["bind an address of this machine, 127.0.0.1, or * for every interface"]
    elif code == errno.ENODEV:
        reason = "no such host or network interface"
    elif code == errno.EACCES:
        reason = "permission denied"
        hints = ["ports below 1024 need privileges; an ipc path needs a writable directory"]
    elif code in (errno.EINVAL, errno.EPROTONOSUPPORT):
        reason = "not a valid endpoint"
        hints = [f"write {_FORMS}"]
    return CliError(
        f"cannot serve on {endpoint}: {reason}", hints=hints, fields={"endpoint": endpoint}
    )
