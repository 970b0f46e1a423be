"""JavaScript string semantics for the byte-exact parts of session references.

Upstream is TypeScript: strings are UTF-16, ``JSON.stringify`` escapes lone surrogates as
``\\udxxx``, and ``Buffer.byteLength`` / ``TextEncoder`` count and encode a lone surrogate
as U+FFFD (3 bytes). A Python ``str`` is a sequence of code points and may hold lone
surrogates (``json.loads('"\\\\ud800"')``) or, rarely, a high/low pair as two code points.
These helpers give Python strings the JavaScript view: "a Python port should replace lone
surrogates with U+FFFD before byte work and escape them in JSON if it wants bit-exactness
on such input" (session-reference §9.14).
"""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring
from typing import Any

__all__ = [
    "compact_json",
    "has_surrogate",
    "js_canonical",
    "json_string",
    "pretty_json",
    "tag_safe_json",
    "utf8_bytes",
    "utf8_len",
]

_SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogate(text: str) -> bool:
    """Whether ``text`` holds any surrogate code point.

    Strict UTF-8 encoding fails exactly on surrogates and runs far faster than a regex
    scan over non-ASCII text; ``isascii`` settles the common case first.
    """
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def js_canonical(text: str) -> str:
    """Merge adjacent high/low surrogate code points into the character they encode.

    A JavaScript string whose UTF-16 units form a valid pair *is* that character, so the
    Python string equal to a JS string is the one with pairs merged; only lone surrogates
    remain afterwards.
    """
    if not has_surrogate(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def utf8_bytes(text: str) -> bytes:
    """Encode like ``TextEncoder``/``Buffer.from``: a lone surrogate becomes U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", js_canonical(text)).encode("utf-8")


def utf8_len(text: str) -> int:
    """Return ``Buffer.byteLength(text, 'utf8')`` (a lone surrogate counts 3 bytes)."""
    if text.isascii():
        return len(text)
    return len(utf8_bytes(text))


def _escape_lone_surrogates(json_text: str) -> str:
    """Escape the surrogates left in JSON output as ``JSON.stringify`` does (``\\udxxx``).

    Surrogates can occur only inside string literals, so after merging valid pairs every
    remaining one is lone and is replaced by its lowercase six-character escape.
    """
    if not has_surrogate(json_text):
        return json_text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", js_canonical(json_text))


def json_string(text: str) -> str:
    """Return ``JSON.stringify(text)`` for a string.

    Same escapes as ``json.dumps(text, ensure_ascii=False)`` (``\\" \\\\ \\b \\t \\n \\f \\r``,
    other C0 controls as lowercase ``\\u00xx``, everything else raw, including U+007F and
    U+2028/U+2029), plus lone surrogates as ``\\udxxx``.
    """
    return _escape_lone_surrogates(encode_basestring(text))


def compact_json(value: Any) -> str:
    """Return compact ``JSON.stringify(value)`` (keys in insertion order).

    Raises:
        TypeError: The value has no JSON representation (also NaN and infinities, which
            session-reference values never hold).
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError("session-reference data is not JSON-serializable") from exc
    return _escape_lone_surrogates(text)


def tag_safe_json(value: Any) -> str:
    """Return compact JSON with every ``<`` written as ``\\u003c`` (session-reference §4.8).

    The result parses back to the same value and holds no literal ``<``, so it cannot
    close the ``<referenced-sessions>`` frame it is embedded in.
    """
    return compact_json(value).replace("<", "\\u003c")


def pretty_json(value: Any) -> str:
    """Return ``JSON.stringify(value, null, 2)`` (plain, not tag-safe)."""
    try:
        text = json.dumps(value, ensure_ascii=False, indent=2, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError("session-reference data is not JSON-serializable") from exc
    return _escape_lone_surrogates(text)
