"""What a handler sees of its call on the server, and how its value or failure is answered."""

from __future__ import annotations

import logging
from typing import Any

from wire._codec_relay import Encoded
from wire._endpoints import EndpointSpec
from wire._errors import ErrorCode, InternalError, WireError
from wire._messages import Result
from wire._server_events import CallRecord, EncodedResult
from wire._server_protocol import ServerProtocol

__all__ = ["ServerCallContext", "classify_failure", "result_reply"]

log = logging.getLogger("wire.server")


class ServerCallContext:
    """The :class:`~wire._endpoints.CallContext` of one call."""

    __slots__ = ("_protocol", "_record", "reservation")

    def __init__(self, protocol: ServerProtocol, record: CallRecord, reservation: Any) -> None:
        self._protocol = protocol
        self._record = record
        self.reservation = reservation

    @property
    def peer(self) -> bytes:
        return self._record.peer

    @property
    def call_id(self) -> int:
        return self._record.call.id

    def running(self) -> None:
        self._protocol.call_started(self._record)


def classify_failure(exc: Exception, spec: EndpointSpec) -> WireError:
    """Map a handler's exception to a wire error.

    An exception that carries a ``code`` attribute naming a protocol code (the DSH
    ``SESSION_REFERENCE_*`` errors do) keeps it; anything else is ``internal`` with its message
    kept and its traceback logged here, never sent.
    """
    code = getattr(exc, "code", None)
    if isinstance(code, str) and code in ErrorCode.__members__.values():
        details = getattr(exc, "details", None)
        message = getattr(exc, "message", None) or str(exc)
        return WireError(
            str(message),
            code=ErrorCode(code),
            details=details if isinstance(details, dict) else None,
        )
    fields = {"endpoint": spec.name, "outcome": "internal"}
    log.error("handler of %s failed", spec.name, exc_info=exc, extra=fields)
    return InternalError(str(exc) or type(exc).__name__)


def result_reply(call_id: int, value: Any) -> Result | EncodedResult:
    """The terminal frame for a handler's value (an :class:`Encoded` one is sent as it is)."""
    if type(value) is Encoded:
        return EncodedResult(id=call_id, value=value.value)
    return Result(id=call_id, value=value)
