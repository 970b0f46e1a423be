"""JSON and number rules shared by the log reader and writer.

Upstream reads each line with Node's lossy UTF-8 decode and `JSON.parse`, and writes
with `JSON.stringify` (`session-log-format` §3, §12). This module gives the Python
equivalents: strict parsing (no `NaN`/`Infinity`), JavaScript's safe-integer notion over
Python numbers, and compact serialisation that escapes lone surrogates as
`JSON.stringify` does.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = [
    "MAX_SAFE_INTEGER",
    "dumps_line",
    "is_negative_zero",
    "js_str",
    "parse_header_line",
    "parse_line",
    "safe_int",
]

MAX_SAFE_INTEGER = 2**53 - 1


def _reject_constant(name: str) -> Any:
    # §3: "must reject what JSON.parse rejects (NaN, Infinity, …), which Python's json
    # accepts by default".
    raise ValueError(f"{name} is not valid JSON")


def _parse_int_keep_negative_zero(text: str) -> int | float:
    # JSON.parse("-0") is -0, which the header rules reject for createdAt and
    # delegationDepth (§4.2); Python's int("-0") is plain 0, so keep the sign as -0.0.
    if text == "-0":
        return -0.0
    return int(text)


_EVENT_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_HEADER_DECODER = json.JSONDecoder(
    parse_constant=_reject_constant, parse_int=_parse_int_keep_negative_zero
)


def parse_line(line: bytes) -> Any:
    """Decode one event line the way upstream does.

    Args:
        line: the line's bytes, without its terminating newline.

    Returns:
        The parsed JSON value.

    Raises:
        ValueError: the text is not strict JSON.
    """
    # §3: invalid UTF-8 becomes U+FFFD (Node's Buffer.toString), never an error.
    return _EVENT_DECODER.decode(line.decode("utf-8", "replace"))


def parse_header_line(line: bytes) -> Any:
    """Decode the header line, keeping a literal ``-0`` distinguishable (as ``-0.0``)."""
    return _HEADER_DECODER.decode(line.decode("utf-8", "replace"))


def safe_int(value: object) -> int | None:
    """Return `value` as an int if JavaScript's `Number.isSafeInteger` accepts it.

    §12.9: JSON may spell integers as ``1.0`` or ``1e3``; JS treats them as integers, so
    integral floats count. Booleans never do (``True == 1`` in Python, not in JS).
    """
    kind = type(value)
    if kind is int:
        number: int = value  # type: ignore[assignment]
        return number if -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER else None
    if kind is float:
        real: float = value  # type: ignore[assignment]
        if real.is_integer() and -MAX_SAFE_INTEGER <= real <= MAX_SAFE_INTEGER:
            return int(real)
    return None


def is_negative_zero(value: object) -> bool:
    """Whether `value` is JavaScript's ``-0`` (parsed by `parse_header_line` as ``-0.0``)."""
    return type(value) is float and value == 0 and math.copysign(1.0, value) < 0


def js_str(value: object) -> str:
    """Format `value` as a JavaScript template literal would (for upstream messages)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dict, list)):
        return "[object Object]" if isinstance(value, dict) else ",".join(map(js_str, value))
    return str(value)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps_line(value: Any) -> bytes:
    """Serialise `value` as one compact UTF-8 line body, like `JSON.stringify`.

    Raises:
        ValueError: `value` holds NaN or an infinity (not losslessly JSON-serialisable).
        TypeError: `value` holds something JSON cannot represent.
    """
    text = _ENCODER.encode(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # JSON.stringify escapes lone surrogates (well-formed stringify); a raw one
        # would be invalid UTF-8 on disk. They can only occur inside string literals.
        escaped = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
        return escaped.encode("utf-8")
