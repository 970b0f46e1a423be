"""The seven ``SESSION_REFERENCE_*`` errors, with upstream's exact messages.

Upstream DSH raises one ``SessionReferenceError`` class carrying a ``code`` from a closed
set; the code, not the class, is the contract (session-reference §1.9, §5). We keep the
single class and put the message wording in named constructors, so every raise site
spells the message the same way.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator

import trio

from actors.session_references._jstext import json_string

__all__ = [
    "SessionReferenceError",
    "SessionReferenceErrorCode",
    "cancellation_as_error",
]


class SessionReferenceErrorCode(enum.StrEnum):
    """The closed set of session-reference error codes (stable wire strings)."""

    #: A configuration value is out of range (raised at construction / server start).
    INVALID_CONFIG = "SESSION_REFERENCE_INVALID_CONFIG"
    #: A candidate limit, a reference element or a mention URI is malformed.
    INVALID_REFERENCE = "SESSION_REFERENCE_INVALID_REFERENCE"
    #: A message references the session that receives it.
    SELF_REFERENCE = "SESSION_REFERENCE_SELF_REFERENCE"
    #: More distinct sessions than ``maxReferences``.
    TOO_MANY = "SESSION_REFERENCE_TOO_MANY"
    #: A source session could not be read.
    READ_FAILED = "SESSION_REFERENCE_READ_FAILED"
    #: A source cannot be retained within the per-source byte budget.
    BUDGET_EXCEEDED = "SESSION_REFERENCE_BUDGET_EXCEEDED"
    #: The caller cancelled discovery or preparation.
    CANCELLED = "SESSION_REFERENCE_CANCELLED"


class SessionReferenceError(Exception):
    """A session-reference failure with a stable code and upstream's message.

    Attributes:
        code: One of :class:`SessionReferenceErrorCode`.
        message: The exact upstream message text (also ``str(error)``).
    """

    code: SessionReferenceErrorCode
    message: str

    def __init__(
        self,
        code: SessionReferenceErrorCode,
        message: str,
        *,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        if cause is not None:
            # Upstream passes the inner failure as the standard error `cause`.
            self.__cause__ = cause

    def __repr__(self) -> str:
        return f"SessionReferenceError({self.code.value!s}, {self.message!r})"

    # -- named constructors: one per upstream message ------------------------------------

    @classmethod
    def not_positive_integer(cls, name: str) -> SessionReferenceError:
        """``session-reference: <name> must be a positive safe integer`` (INVALID_CONFIG)."""
        return cls(
            SessionReferenceErrorCode.INVALID_CONFIG,
            f"session-reference: {name} must be a positive safe integer",
        )

    @classmethod
    def too_many_max_references(cls, ceiling: int) -> SessionReferenceError:
        """``session-reference: maxReferences must not exceed 3`` (INVALID_CONFIG)."""
        return cls(
            SessionReferenceErrorCode.INVALID_CONFIG,
            f"session-reference: maxReferences must not exceed {ceiling}",
        )

    @classmethod
    def fraction_out_of_range(cls) -> SessionReferenceError:
        """``referenceContextFraction`` outside [0, 1], NaN or infinite (INVALID_CONFIG)."""
        return cls(
            SessionReferenceErrorCode.INVALID_CONFIG,
            "session-reference: referenceContextFraction must be between zero and one",
        )

    @classmethod
    def invalid_limit(cls) -> SessionReferenceError:
        """A candidate limit that is not a positive safe integer (INVALID_REFERENCE)."""
        return cls(
            SessionReferenceErrorCode.INVALID_REFERENCE,
            "candidate limit must be a positive safe integer",
        )

    @classmethod
    def not_an_object(cls) -> SessionReferenceError:
        """A reference element that is not an object (INVALID_REFERENCE)."""
        return cls(
            SessionReferenceErrorCode.INVALID_REFERENCE,
            "session reference must be an object",
        )

    @classmethod
    def bad_reference_fields(cls) -> SessionReferenceError:
        """A non-string ``sessionId`` or a defined non-string ``label`` (INVALID_REFERENCE)."""
        return cls(
            SessionReferenceErrorCode.INVALID_REFERENCE,
            "session reference must contain a string sessionId and optional string label",
        )

    @classmethod
    def invalid_uri(cls, uri: str, cause: BaseException | None = None) -> SessionReferenceError:
        """``invalid session reference URI "<uri>"``, the URI JSON-quoted (INVALID_REFERENCE)."""
        return cls(
            SessionReferenceErrorCode.INVALID_REFERENCE,
            f"invalid session reference URI {json_string(uri)}",
            cause=cause,
        )

    @classmethod
    def self_reference(cls, target_id: str) -> SessionReferenceError:
        """``session "<target>" cannot reference itself`` (SELF_REFERENCE)."""
        return cls(
            SessionReferenceErrorCode.SELF_REFERENCE,
            f"session {json_string(target_id)} cannot reference itself",
        )

    @classmethod
    def too_many(cls, max_references: int) -> SessionReferenceError:
        """``a message may reference at most <n> sessions`` (TOO_MANY)."""
        return cls(
            SessionReferenceErrorCode.TOO_MANY,
            f"a message may reference at most {max_references} sessions",
        )

    @classmethod
    def read_failed(cls, cause: BaseException) -> SessionReferenceError:
        """``failed to read referenced session: <inner message>`` (READ_FAILED)."""
        return cls(
            SessionReferenceErrorCode.READ_FAILED,
            f"failed to read referenced session: {_message_of(cause)}",
            cause=cause,
        )

    @classmethod
    def budget_exceeded(cls) -> SessionReferenceError:
        """A source that cannot fit the per-source byte budget (BUDGET_EXCEEDED)."""
        return cls(
            SessionReferenceErrorCode.BUDGET_EXCEEDED,
            "referenced session snapshot cannot fit the configured byte budget",
        )

    @classmethod
    def cancelled(cls, cause: BaseException | None = None) -> SessionReferenceError:
        """``session reference preparation was cancelled`` (CANCELLED)."""
        return cls(
            SessionReferenceErrorCode.CANCELLED,
            "session reference preparation was cancelled",
            cause=cause,
        )


def _message_of(error: BaseException) -> str:
    """Return an error's message the way upstream reads ``error.message``.

    Python's ``str(KeyError('x'))`` is ``"'x'"``; an exception with a ``message``
    attribute (ours, and most typed store errors) is read through it instead.
    """
    message = getattr(error, "message", None)
    if isinstance(message, str):
        return message
    if isinstance(error, KeyError) and len(error.args) == 1:
        return str(error.args[0])
    return str(error)


def _is_cancellation(error: BaseException) -> bool:
    if isinstance(error, trio.Cancelled):
        return True
    if isinstance(error, BaseExceptionGroup):
        return all(_is_cancellation(inner) for inner in error.exceptions)
    return False


@contextlib.contextmanager
def cancellation_as_error() -> Iterator[None]:
    """Turn a trio cancellation (possibly grouped by a nursery) into CANCELLED.

    Upstream rejects with ``SESSION_REFERENCE_CANCELLED`` where it checks or races its
    abort signal; the trio twin of that signal is the caller's cancel scope. Only a
    cancellation (or a group of nothing but cancellations) is converted; anything else
    propagates unchanged.
    """
    try:
        yield
    except (trio.Cancelled, BaseExceptionGroup) as exc:
        if _is_cancellation(exc):
            raise SessionReferenceError.cancelled(exc) from exc
        raise
