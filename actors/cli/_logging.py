"""Logging for the command: ``-v``/``-q``, ``--log-level`` and ``--log-format text|json``.

The standard library's ``logging`` carries everything; this module only installs one handler on
stderr with one of two formatters:

- ``text``: ``agent-actors: LEVEL: message [LOGGER]`` and the record's structured fields as
  ``key=value``;
- ``json``: one JSON object per line, ``time`` (UTC, ISO 8601), ``level``, ``logger``,
  ``message``, then every structured field passed with ``extra=`` (``endpoint``, ``agent_id``,
  ``peer``, ``call_id``, ``outcome``, ``duration_ms``, …), ``exception`` when there is one.

The default level is ``warning``; each ``-v`` lowers it a step (``info``, ``debug``), each
``-q`` raises it (``error``, ``critical``), and ``--log-level`` sets it outright.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

__all__ = [
    "COMMAND_LOGGER",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "JsonFormatter",
    "TextFormatter",
    "add_logging_options",
    "level_name",
    "logging_to_stderr",
    "wants_json",
]

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
#: The logger of the command's own messages (its records print without a ``[logger]`` tag).
COMMAND_LOGGER = "agent-actors"
LOG_FORMATS = ("text", "json")

#: The attributes every ``LogRecord`` has; any other attribute came in through ``extra=``.
_STANDARD = frozenset(logging.LogRecord("", logging.INFO, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}


def add_logging_options(parser: argparse.ArgumentParser, *, top_level: bool) -> None:
    """Add ``-v``, ``-q``, ``--log-level`` and ``--log-format`` to ``parser``.

    They are accepted before the subcommand and after it; a subcommand's parser leaves them
    unset (``SUPPRESS``) unless given, so it never overwrites what the main parser read.
    """
    default: dict[str, Any] = {} if top_level else {"default": argparse.SUPPRESS}
    group = parser.add_argument_group("logging (before or after the subcommand)")
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        help="log more: -v info, -vv debug (default: warnings and errors)",
        **({"default": 0} if top_level else default),
    )
    group.add_argument(
        "-q",
        "--quiet",
        action="count",
        help="log less: -q errors only, -qq critical only",
        **({"default": 0} if top_level else default),
    )
    group.add_argument(
        "--log-level",
        type=str.lower,
        choices=LOG_LEVELS,
        help="log level, overriding -v/-q",
        **default,
    )
    group.add_argument(
        "--log-format",
        type=str.lower,
        choices=LOG_FORMATS,
        help="text (default) or json: one JSON object per line with time, level, logger, "
        "message and the record's structured fields",
        **default,
    )


def wants_json(args: argparse.Namespace) -> bool:
    return getattr(args, "log_format", None) == "json"


def _level(args: argparse.Namespace) -> int:
    named: str | None = getattr(args, "log_level", None)
    if named is not None:
        return int(getattr(logging, named.upper()))
    steps = (getattr(args, "quiet", 0) or 0) - (getattr(args, "verbose", 0) or 0)
    return max(logging.DEBUG, min(logging.CRITICAL, logging.WARNING + 10 * steps))


def level_name(args: argparse.Namespace) -> str:
    """The level ``args`` ask for, by name (``warning``, …): what workers are told."""
    return logging.getLevelName(_level(args)).lower()


@contextlib.contextmanager
def logging_to_stderr(
    args: argparse.Namespace, *, fields: dict[str, str] | None = None
) -> Iterator[None]:
    """Log to stderr at the level and in the format ``args`` ask for, while the block runs;
    ``fields`` are added to every record (a worker's ``worker: w1``).

    The handler is removed and the root logger's level restored on exit, so ``main()`` called
    in a process that configured logging itself (a test) leaves it as it was.
    """
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if wants_json(args) else TextFormatter())
    if fields:
        handler.addFilter(_AddFields(fields))
    saved_level = root.level
    root.setLevel(_level(args))
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(saved_level)


class _AddFields(logging.Filter):
    def __init__(self, fields: dict[str, str]) -> None:
        super().__init__()
        self._fields = fields

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in self._fields.items():
            setattr(record, key, value)
        return True


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields a record was given with ``extra=`` (a ``None`` is left out)."""
    return {
        key: value
        for key, value in record.__dict__.items()
        if key not in _STANDARD and not key.startswith("_") and value is not None
    }


def _time(record: logging.LogRecord) -> str:
    moment = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _time(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in _fields(record).items():
            entry.setdefault(key, value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=_jsonable)


class TextFormatter(logging.Formatter):
    """``agent-actors: LEVEL: message``, then ``[logger]`` (unless it is the command's own) and
    the record's structured fields as ``key=value`` on its first line, and the traceback when
    there is one. No time: ``--log-format json`` has it, and a service manager's journal adds
    its own."""

    def format(self, record: logging.LogRecord) -> str:
        first, newline, rest = record.getMessage().partition("\n")
        tail = [f"{key}={_text(value)}" for key, value in _fields(record).items()]
        if record.name != COMMAND_LOGGER:
            tail.insert(0, f"[{record.name}]")
        line = f"agent-actors: {record.levelname.lower()}: {' '.join([first, *tail])}"
        line += newline + rest
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False) if (not value or " " in value) else value
    return json.dumps(value, ensure_ascii=False, default=_jsonable)
