"""The server's limits (:class:`ServerLimits`, the ``[wire]`` table), and limits on hostile
input that the frame size alone does not bound.

A peer that stops reading makes the server hold its replies: :data:`DEFAULT_MAX_BACKLOG` and
:data:`DEFAULT_MAX_BACKLOG_BYTES` bound what is kept for one peer before it is dropped as a
slow consumer (``docs/protocol.md`` § 11.3), in frames and in bytes.

An 8 MiB frame can hold a million-element array or a map nested thousands of levels deep;
either costs far more to validate and to hand to a handler than its size suggests. The server
checks every call's ``args`` against :class:`ArgumentLimits` before the call is admitted
(``docs/protocol.md`` § 11.4), and :func:`salvage_call_id` reads the call id out of a frame that
cannot be decoded whole, so that even a frame the codec rejects gets an error for its call
instead of leaving the caller waiting for its deadline.

Sans-IO: plain functions over decoded values and bytes; no clock, no socket.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import msgpack

__all__ = [
    "DEFAULT_MAX_ARG_DEPTH",
    "DEFAULT_MAX_ARG_ITEMS",
    "DEFAULT_MAX_BACKLOG",
    "DEFAULT_MAX_BACKLOG_BYTES",
    "ArgumentLimits",
    "LimitExceeded",
    "ServerLimits",
    "check_arguments",
    "is_flat",
    "salvage_call_id",
]

#: Deepest nesting of arrays and maps inside ``args`` (``args`` itself is depth 1). The DSH
#: contract nests about six levels (an append's events → event → data → message → content →
#: part); 32 leaves room without letting a peer make the server recurse thousands of levels.
DEFAULT_MAX_ARG_DEPTH = 32
#: Most elements in any one array or map inside ``args`` (``args`` itself included).
DEFAULT_MAX_ARG_ITEMS = 65_536

#: Frames held for one peer whose pipe is full before it is dropped (``[wire] maxBacklog``).
DEFAULT_MAX_BACKLOG = 100_000
#: Bytes held likewise (``[wire] maxBacklogBytes``). Frames alone did not bound memory: 100,000
#: unread ``system/describe`` replies of 6.5 KB held 600 MB. 64 MiB holds eight replies of the
#: largest frame (8 MiB), so a reader that is merely slow for a moment is not dropped for one
#: large reply.
DEFAULT_MAX_BACKLOG_BYTES = 64 * 1024 * 1024

#: Call ids stay exact in a JavaScript number; repeated here so the module needs no codec.
_MAX_CALL_ID = 2**53 - 1


@attrs.frozen(kw_only=True)
class ArgumentLimits:
    """Structural limits on one call's ``args``."""

    #: Deepest nesting of arrays and maps, counting ``args`` itself as depth 1.
    max_depth: int = DEFAULT_MAX_ARG_DEPTH
    #: Most elements (array items or map entries) in any one array or map.
    max_items: int = DEFAULT_MAX_ARG_ITEMS


@attrs.frozen
class LimitExceeded:
    """Where ``args`` broke a limit, and which."""

    #: The offending value's path in the ``details.path`` syntax (``events[3].data``).
    path: str
    #: Human-readable, names the limit: ``nested deeper than 32 levels``.
    problem: str
    #: The limit's value, sent as ``details.limit``.
    limit: int


def check_arguments(args: Mapping[str, Any], limits: ArgumentLimits) -> LimitExceeded | None:
    """The first limit ``args`` breaks, or ``None``.

    Walks depth first in the order the map holds its keys; the walk stops at the first
    problem, so its cost is bounded by the frame size even for hostile input. Scalars are
    never looked into (strings are bounded by the frame size alone). Nearly every call breaks
    nothing: a walk that keeps no paths says so, and only a call that breaks a limit is walked
    again to name where (an append's events took 5 µs a call with the paths, a twentieth of
    a relaying supervisor's work in a cancel storm).
    """
    if _within(args, limits.max_depth, limits.max_items):
        return None
    return _first_exceeded(args, limits)


def _within(args: Mapping[str, Any], max_depth: int, max_items: int) -> bool:
    """Whether ``args`` breaks no limit: :func:`_first_exceeded`'s walk, without the paths."""
    if len(args) > max_items:
        return False
    # An explicit stack rather than recursion: the depth limit must not depend on Python's.
    stack: list[tuple[Any, int]] = []
    for value in args.values():
        kind = type(value)
        if kind is list or kind is dict:
            stack.append((value, 2))
    if stack and max_depth < 2:
        return False
    while stack:
        value, depth = stack.pop()
        if len(value) > max_items:
            return False
        for child in value if type(value) is list else value.values():
            kind = type(child)
            if kind is list or kind is dict:
                if depth >= max_depth:
                    return False
                stack.append((child, depth + 1))
    return True


def _first_exceeded(args: Mapping[str, Any], limits: ArgumentLimits) -> LimitExceeded | None:
    """The first limit ``args`` breaks, with its path, or ``None``."""
    if len(args) > limits.max_items:
        return LimitExceeded("", _too_many(len(args), limits.max_items), limits.max_items)
    stack: list[tuple[Any, str, int]] = [
        (value, str(key), 2) for key, value in args.items() if _nested(value)
    ]
    stack.reverse()
    max_depth = limits.max_depth
    max_items = limits.max_items
    if stack and max_depth < 2:
        value, path, _ = stack[-1]
        return LimitExceeded(path, _too_deep(max_depth), max_depth)
    while stack:
        value, path, depth = stack.pop()
        if len(value) > max_items:
            return LimitExceeded(path, _too_many(len(value), max_items), max_items)
        children = (
            [(v, f"{path}[{i}]") for i, v in enumerate(value) if _nested(v)]
            if type(value) is list
            else [(v, f"{path}.{k}") for k, v in value.items() if _nested(v)]
        )
        if not children:
            continue
        if depth >= max_depth:
            return LimitExceeded(children[0][1], _too_deep(max_depth), max_depth)
        stack.extend((v, p, depth + 1) for v, p in reversed(children))
    return None


def is_flat(args: Mapping[str, Any]) -> bool:
    """Whether no value of ``args`` is an array or a map (most calls): then only the count of
    ``args`` itself can break a limit, and :func:`check_arguments` need not walk it."""
    for value in args.values():
        kind = type(value)
        if kind is list or kind is dict:
            return False
    return True


def _nested(value: Any) -> bool:
    return type(value) is list or type(value) is dict


def _too_many(count: int, limit: int) -> str:
    return f"{count} elements exceed the limit of {limit} per array or map"


def _too_deep(limit: int) -> str:
    return f"nested deeper than {limit} levels"


# msgpack first bytes of the families a top-level key or a call id can take.
_FIXSTR = range(0xA0, 0xC0)
_STR8 = 0xD9
_POSITIVE_FIXINT = range(0x00, 0x80)
_UINTS = range(0xCC, 0xD0)
_INTS = range(0xD0, 0xD4)


def salvage_call_id(frame: bytes) -> int | None:
    """The call id of a frame that is a msgpack map but cannot be decoded whole, if readable.

    Reads the top-level map key by key and *skips* every value but ``id``: skipping neither
    builds objects nor checks UTF-8 or map keys, so an invalid string or a non-string key deep
    inside ``args`` does not hide the id, and an oversized frame costs no memory. Keys that are
    not short strings are skipped too. Returns ``None`` when the frame is not a map, the id is
    missing, comes after the damage, or is not a valid call id.
    """
    try:
        unpacker = msgpack.Unpacker(
            raw=False, strict_map_key=False, max_buffer_size=max(len(frame), 1)
        )
        unpacker.feed(frame)
        entries = unpacker.read_map_header()
        for _ in range(entries):
            if not _short_string_at(frame, unpacker.tell()):
                unpacker.skip()  # the key
                unpacker.skip()  # its value
                continue
            key = unpacker.unpack()
            if key != "id":
                unpacker.skip()
                continue
            if not _integer_at(frame, unpacker.tell()):
                return None
            value = unpacker.unpack()
            if type(value) is int and 0 <= value <= _MAX_CALL_ID:
                return value
            return None
    except Exception:  # msgpack raises several unrelated types for damaged input
        return None
    return None


def _short_string_at(frame: bytes, offset: int) -> bool:
    if offset >= len(frame):
        return False
    first = frame[offset]
    return first in _FIXSTR or (first == _STR8 and offset + 1 < len(frame))


def _integer_at(frame: bytes, offset: int) -> bool:
    if offset >= len(frame):
        return False
    first = frame[offset]
    return first in _POSITIVE_FIXINT or first in _UINTS or first in _INTS


@attrs.frozen(kw_only=True)
class ServerLimits:
    """Limits and timers a server announces in its welcome (``docs/protocol.md`` § Limits)."""

    #: Interval between pings to each peer (seconds).
    heartbeat: float = 1.0
    #: A peer silent this long is lost (seconds); the driver checks at least every 0.25 s.
    peer_timeout: float = 2.5
    #: Largest frame accepted or sent (bytes).
    max_frame_bytes: int = 8 * 1024 * 1024
    #: Calls one peer may have in flight; more are answered ``overloaded``.
    max_in_flight: int = 4096
    #: Calls all peers together may have in flight; more are answered ``overloaded``.
    max_in_flight_total: int = 65536
    #: Frames and bytes held per peer whose pipe is full before it is dropped as a slow
    #: consumer (not announced; ``[wire] maxBacklog`` and ``maxBacklogBytes``).
    max_backlog: int = 100_000
    max_backlog_bytes: int = DEFAULT_MAX_BACKLOG_BYTES
    #: Deepest nesting of arrays and maps in a call's ``args`` (``args`` is depth 1).
    max_arg_depth: int = DEFAULT_MAX_ARG_DEPTH
    #: Most elements in any one array or map of a call's ``args``.
    max_arg_items: int = DEFAULT_MAX_ARG_ITEMS
    #: Server software name sent in the welcome.
    name: str = "agent-actors"
