"""Error codes and exception types of protocol v1.

Only ``{code, message, details}`` crosses the wire (never Python type names or tracebacks, so
a TypeScript client can use it). Each code maps to exactly one exception class, registered in
:data:`ERROR_TYPES`; a client turns an error frame back into that class with
:func:`error_from_wire`.

Two further classes say *who* broke the protocol (h11's split): :class:`LocalProtocolError`
means our own code misused the sans-IO core (a bug), :class:`RemoteProtocolError` means the peer
sent something invalid and carries the reply to answer with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from wire._codes import CancelReason as CancelReason
from wire._codes import ErrorCode as ErrorCode
from wire._messages import Error

__all__ = [
    "ERROR_TYPES",
    "AgentBusyError",
    "ArgumentsInvalidError",
    "BadRequestError",
    "CallCancelledError",
    "CancelReason",
    "DeadlineExceededError",
    "ErrorCode",
    "InternalError",
    "LocalProtocolError",
    "MovedError",
    "OverloadedError",
    "PeerLostError",
    "RemoteProtocolError",
    "ResultInvalidError",
    "SessionNotFoundError",
    "SessionReferenceError",
    "TooLargeError",
    "UnauthorizedError",
    "UnavailableError",
    "UnknownEndpointError",
    "UnsupportedVersionError",
    "WireError",
    "error_from_wire",
]


class WireError(Exception):
    """Base of every error that can cross the wire.

    Args:
        message: Human-readable text; safe to show to a user.
        details: Extra structured data (msgpack-able map).
    """

    default_code: ClassVar[ErrorCode] = ErrorCode.INTERNAL

    def __init__(
        self,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
        code: ErrorCode | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        #: The wire code; one class may serve several codes (the ``SESSION_REFERENCE_*`` family).
        self.code: ErrorCode = code or self.default_code
        self.details: Mapping[str, Any] = dict(details) if details else {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, details={dict(self.details)!r})"


class BadRequestError(WireError):
    default_code = ErrorCode.BAD_REQUEST


class UnsupportedVersionError(WireError):
    default_code = ErrorCode.UNSUPPORTED_VERSION


class UnknownEndpointError(WireError):
    default_code = ErrorCode.UNKNOWN_ENDPOINT


class ArgumentsInvalidError(WireError):
    default_code = ErrorCode.ARGUMENTS_INVALID


class ResultInvalidError(WireError):
    default_code = ErrorCode.RESULT_INVALID


class SessionNotFoundError(WireError):
    default_code = ErrorCode.SESSION_NOT_FOUND


class AgentBusyError(WireError):
    default_code = ErrorCode.AGENT_BUSY


class CallCancelledError(WireError):
    """The server cancelled the call (``details``: ``state`` and ``reason``).

    A caller whose own scope was cancelled never sees this: it gets ``trio.Cancelled``. This is
    raised when the cancel came from elsewhere, e.g. a newer call superseded this one or the
    server shut down.
    """

    default_code = ErrorCode.CANCELLED

    @property
    def reason(self) -> CancelReason | None:
        raw = self.details.get("reason")
        return CancelReason(raw) if isinstance(raw, str) and raw in set(CancelReason) else None

    @property
    def state(self) -> str | None:
        raw = self.details.get("state")
        return raw if isinstance(raw, str) else None


class DeadlineExceededError(WireError):
    default_code = ErrorCode.DEADLINE_EXCEEDED


class OverloadedError(WireError):
    default_code = ErrorCode.OVERLOADED


class TooLargeError(WireError):
    default_code = ErrorCode.TOO_LARGE


class UnauthorizedError(WireError):
    default_code = ErrorCode.UNAUTHORIZED


class PeerLostError(WireError):
    default_code = ErrorCode.PEER_LOST


class UnavailableError(WireError):
    default_code = ErrorCode.UNAVAILABLE


class InternalError(WireError):
    default_code = ErrorCode.INTERNAL


class MovedError(WireError):
    """The agent lives in a shard another worker owns (scale-out, ``docs/scale-out.md``).

    ``details``: ``agentId``, ``shard``, ``owner`` (worker id or nil), ``endpoint`` (the
    owner's endpoint or nil) and ``revision`` (of the shard map the answer is based on). Nothing
    was executed: the caller may send the call again to ``endpoint``.
    """

    default_code = ErrorCode.MOVED


class SessionReferenceError(WireError):
    """One of upstream DSH's ``SESSION_REFERENCE_*`` errors, code kept as upstream spells it."""

    default_code = ErrorCode.SESSION_REFERENCE_INVALID_REFERENCE


ERROR_TYPES: dict[ErrorCode, type[WireError]] = {
    cls.default_code: cls
    for cls in (
        BadRequestError,
        UnsupportedVersionError,
        UnknownEndpointError,
        ArgumentsInvalidError,
        ResultInvalidError,
        SessionNotFoundError,
        AgentBusyError,
        CallCancelledError,
        DeadlineExceededError,
        OverloadedError,
        TooLargeError,
        UnauthorizedError,
        PeerLostError,
        UnavailableError,
        InternalError,
        MovedError,
    )
}
for _code in ErrorCode:
    if _code.startswith("SESSION_REFERENCE_"):
        ERROR_TYPES[_code] = SessionReferenceError


def error_from_wire(error: Error) -> WireError:
    """Build the typed exception for a received error frame.

    An unknown code (a newer server) becomes :class:`InternalError` with the original code kept in
    ``details["code"]``, so nothing the server said is lost.
    """
    try:
        code = ErrorCode(error.code)
    except ValueError:
        return InternalError(error.message, details={**error.details, "code": error.code})
    return ERROR_TYPES[code](error.message, details=error.details, code=code)


class LocalProtocolError(Exception):
    """Our own code misused the protocol core (a bug on this side)."""


class RemoteProtocolError(Exception):
    """The peer sent an invalid frame.

    Args:
        message: What was wrong, for the log and the error frame.
        reply: The error frame to answer with, or ``None`` when no reply is possible.
    """

    def __init__(self, message: str, *, reply: Error | None) -> None:
        super().__init__(message)
        self.reply = reply
