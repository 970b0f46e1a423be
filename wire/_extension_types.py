"""msgpack extension types, which protocol v1 refuses wherever they are in a frame.

``docs/protocol.md`` § 2: extension types, the timestamp extension included, MUST NOT be sent.
msgpack hands every extension but the timestamp (ext -1) to an ``ext_hook``, which refuses it
as it is decoded, at no cost to frames without one; it builds timestamps itself, so
:func:`holds_timestamp` looks for them in the decoded value, at a cost per value rather than
per byte. The codec calls it only for frames holding a 0xff byte (a timestamp's type), which
UTF-8 text never does.

Sans-IO: pure functions over bytes and decoded values.
"""

from __future__ import annotations

from typing import Any

import msgpack

__all__ = [
    "NO_EXTENSIONS",
    "ExtensionTypeRefused",
    "holds_timestamp",
    "refuse_extension_type",
    "timestamp_refusal",
]

NO_EXTENSIONS = "msgpack extension types are not allowed"


class ExtensionTypeRefused(ValueError):
    """An extension type in a frame (``docs/protocol.md`` § 2: they MUST NOT be sent)."""


def refuse_extension_type(code: int, data: bytes) -> Any:
    """msgpack's ``ext_hook``: refuse an extension type as soon as it is decoded."""
    raise ExtensionTypeRefused(f"{NO_EXTENSIONS}: ext type {code} ({len(data)} bytes)")


def holds_timestamp(value: Any) -> bool:
    """Whether a decoded value holds a msgpack timestamp anywhere (its cost is per value)."""
    if type(value) is not list and type(value) is not dict:
        return type(value) is msgpack.Timestamp
    stack = [value]
    while stack:
        item = stack.pop()
        items = item.values() if type(item) is dict else item
        # A long array or map of scalars (binary data, numbers) is ruled out in one C pass.
        if len(items) > 16 and set(map(type, items)).isdisjoint(_FLAGGED):
            continue
        for child in items:
            kind = type(child)
            if kind is list or kind is dict:
                stack.append(child)
            elif kind is msgpack.Timestamp:
                return True
    return False


_FLAGGED = frozenset((list, dict, msgpack.Timestamp))


def _timestamp_path(value: Any) -> str | None:
    """The path of the first msgpack timestamp inside a decoded value (``""`` if it is one)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if type(item) is msgpack.Timestamp:
            return path
        # Pushed in reverse so that the walk is depth first in frame order.
        if type(item) is dict:
            entries = [(v, f"{path}.{k}" if path else str(k)) for k, v in item.items()]
            stack.extend(reversed(entries))
        elif type(item) is list:
            stack.extend(reversed([(v, f"{path}[{i}]") for i, v in enumerate(item)]))
    return None


def timestamp_refusal(value: Any) -> str:
    """The error message for a decoded value that holds a timestamp, naming where."""
    where = _timestamp_path(value)
    return f"{NO_EXTENSIONS}: a timestamp (ext -1) at {where or 'the top level'}"
