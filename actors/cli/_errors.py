"""How the command fails: a line or a few naming what is wrong and what to do, and an exit status.

Every subcommand raises :class:`CliError` for a failure it understands; ``_main`` reports it
(plain lines on stderr, or one JSON log record with ``--log-format json``) and exits with its
status: ``1`` when a call failed (the server answered with an error, or no server answered),
``2`` for a usage or start-up error (bad arguments, configuration, keys, an endpoint that cannot
be bound). Anything else is a bug: it is reported in one line, with its traceback logged at
debug level (``--log-level debug``), never printed by default.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

__all__ = [
    "EXIT_CALL_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "PREFIX",
    "CliError",
    "leaves",
    "only_leaf",
    "report",
    "report_unexpected",
]

#: A call failed: the server answered with an error, or no server answered.
EXIT_CALL_FAILED = 1
#: A usage or start-up error: nothing was called or served.
EXIT_USAGE = 2
#: Interrupted by the user (SIGINT outside ``serve``'s graceful shutdown), as shells report it.
EXIT_INTERRUPTED = 130

#: What the command's own messages start with (a server's error starts with its code instead).
PREFIX = "agent-actors: "

log = logging.getLogger("agent-actors")


class CliError(Exception):
    """A failure the command reports in a line or a few, then exits with ``status``.

    Args:
        message: What is wrong, naming the value, file or endpoint concerned.
        status: The exit status (``EXIT_USAGE`` or ``EXIT_CALL_FAILED``).
        hints: What to do about it, one line each (printed as ``hint: …``).
        detail: A line printed as is after the message (a server error's details as JSON).
        prefixed: Whether the message starts with ``agent-actors:`` (a server's error is
            printed as ``code: message``, as scripts parse it).
        fields: Structured fields of the JSON log record (``--log-format json``).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = EXIT_USAGE,
        hints: Sequence[str] = (),
        detail: str | None = None,
        prefixed: bool = True,
        fields: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.hints = tuple(hints)
        self.detail = detail
        self.prefixed = prefixed
        self.fields = dict(fields or {})

    def lines(self) -> list[str]:
        """The lines printed on stderr in text mode."""
        first = f"{PREFIX}{self.message}" if self.prefixed else self.message
        extra = [self.detail] if self.detail is not None else []
        return [first, *extra, *(f"hint: {hint}" for hint in self.hints)]


def report(error: CliError, *, as_json: bool, stream: TextIO | None = None) -> int:
    """Report ``error`` on stderr (plain lines, or a JSON log record); return its status."""
    if as_json:
        fields: dict[str, Any] = {"exit_status": error.status, **error.fields}
        if error.hints:
            fields["hints"] = list(error.hints)
        if error.detail is not None and "details" not in fields:
            fields["details"] = _parsed(error.detail)
        log.error("%s", error.message, extra=fields)
    else:
        print("\n".join(error.lines()), file=stream or sys.stderr, flush=True)
    return error.status


def report_unexpected(exc: BaseException, *, as_json: bool) -> int:
    """Report an error the command does not know (a bug) in one line; the traceback goes to
    the log at debug level. Returns ``EXIT_CALL_FAILED``."""
    log.debug("unexpected error", exc_info=exc)
    first = only_leaf(exc) or exc
    what = f"{type(first).__name__}: {first}" if str(first) else type(first).__name__
    return report(
        CliError(
            f"unexpected error: {what}",
            status=EXIT_CALL_FAILED,
            hints=[
                "this is a bug in agent-actors; rerun with --log-level debug for the "
                "traceback and report it"
            ],
        ),
        as_json=as_json,
    )


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc`` (itself, when it is not a group), in order."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def only_leaf(exc: BaseException) -> BaseException | None:
    """The one exception inside ``exc`` when all of its leaves are that same error (trio
    wraps a failure in a group per nursery it crosses), else ``None``."""
    found = leaves(exc)
    return found[0] if len(found) == 1 else None


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
