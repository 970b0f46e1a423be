"""The stable strings of protocol v1: error codes and cancel reasons.

They sit below both the frames (`wire._messages`, which carry them) and the exception classes
(`wire._errors`, one per code), so neither of those has to import the other's module.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["CancelReason", "ErrorCode"]


class ErrorCode(StrEnum):
    """The stable error codes of protocol v1 (``docs/protocol.md`` § Errors)."""

    #: The frame was not a valid protocol message (undecodable, wrong types, unknown kind,
    #: missing fields, a call before hello).
    BAD_REQUEST = "bad-request"
    #: hello offered no protocol version this server speaks.
    UNSUPPORTED_VERSION = "unsupported-version"
    #: No endpoint of that name is registered.
    UNKNOWN_ENDPOINT = "unknown-endpoint"
    #: The call's arguments do not match the endpoint's parameters.
    ARGUMENTS_INVALID = "arguments-invalid"
    #: The server's result does not match the endpoint's declared result type (client side).
    RESULT_INVALID = "result-invalid"
    #: The ``agentId`` names no known session.
    SESSION_NOT_FOUND = "session-not-found"
    #: The agent cannot take this call now (owned elsewhere, locked by another writer).
    AGENT_BUSY = "agent-busy"
    #: The call was cancelled; details say ``state`` (queued/running) and ``reason``.
    CANCELLED = "cancelled"
    #: The call's deadline passed before it finished.
    DEADLINE_EXCEEDED = "deadline-exceeded"
    #: A limit on concurrent calls or queued frames was reached; retry later.
    OVERLOADED = "overloaded"
    #: A frame or a reply exceeds the negotiated size limit.
    TOO_LARGE = "too-large"
    #: The caller may not use this endpoint.
    UNAUTHORIZED = "unauthorized"
    #: The peer stopped answering (heartbeat bound passed) or vanished.
    PEER_LOST = "peer-lost"
    #: The server is shutting down or not reachable.
    UNAVAILABLE = "unavailable"
    #: The handler failed; the message is kept, the traceback stays in the server log.
    INTERNAL = "internal"
    #: The agent's shard is owned by another worker; details name the owner to call instead.
    MOVED = "moved"
    # The session-reference codes of upstream DSH pass through unchanged.
    SESSION_REFERENCE_INVALID_REFERENCE = "SESSION_REFERENCE_INVALID_REFERENCE"
    SESSION_REFERENCE_SELF_REFERENCE = "SESSION_REFERENCE_SELF_REFERENCE"
    SESSION_REFERENCE_TOO_MANY = "SESSION_REFERENCE_TOO_MANY"
    SESSION_REFERENCE_READ_FAILED = "SESSION_REFERENCE_READ_FAILED"
    SESSION_REFERENCE_BUDGET_EXCEEDED = "SESSION_REFERENCE_BUDGET_EXCEEDED"
    SESSION_REFERENCE_CANCELLED = "SESSION_REFERENCE_CANCELLED"
    SESSION_REFERENCE_INVALID_CONFIG = "SESSION_REFERENCE_INVALID_CONFIG"


class CancelReason(StrEnum):
    """Why a call was cancelled; carried by cancel frames and ``cancelled`` errors."""

    #: The caller's cancel scope was cancelled.
    CALLER = "caller"
    #: The caller's deadline (or the server-enforced remaining budget) passed.
    DEADLINE = "deadline"
    #: A newer call with the same supersede key arrived from the same client.
    SUPERSEDED = "superseded"
    #: The peer that made the call was lost.
    PEER_LOST = "peer-lost"
    #: The server is shutting down.
    SHUTDOWN = "shutdown"
