"""JavaScript string semantics: UTF-8 byte counts, JSON escapes and tag-safe JSON."""

from __future__ import annotations

import json

import pytest

from actors.session_references._jstext import (
    compact_json,
    js_canonical,
    json_string,
    pretty_json,
    tag_safe_json,
    utf8_bytes,
    utf8_len,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("abc", 3), ("界", 3), ("😀", 4), ("\ud800", 3), ("a\udfffb", 5), ("é", 2)],
)
def test_utf8_len_counts_lone_surrogates_as_three(text: str, expected: int) -> None:
    """Byte length matches Buffer.byteLength, a lone surrogate counting as U+FFFD."""
    assert utf8_len(text) == expected


def test_utf8_bytes_replaces_lone_surrogates_and_merges_pairs() -> None:
    """Lone surrogates encode as EF BF BD; a split pair encodes as its character."""
    assert utf8_bytes("a\ud800b") == b"a\xef\xbf\xbdb"
    assert utf8_bytes("\ud83d\ude00") == "😀".encode()


def test_js_canonical_merges_only_valid_pairs() -> None:
    """Only a high surrogate followed by a low one merges; reversed order stays lone."""
    assert js_canonical("\ud83d\ude00") == "😀"
    assert js_canonical("\ude00\ud83d") == "\ude00\ud83d"
    assert js_canonical("plain") == "plain"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"\\', '"\\"\\\\"'),
        ("\b\t\n\f\r", '"\\b\\t\\n\\f\\r"'),
        ("\x00\x01\x1f", '"\\u0000\\u0001\\u001f"'),
        ("\x7f\u2028\u2029/", '"\x7f\u2028\u2029/"'),
        ("引号😀", '"引号😀"'),
        ("\ud800x\udc00", '"\\ud800x\\udc00"'),
        ("<tag>", '"<tag>"'),
    ],
)
def test_json_string_matches_json_stringify(text: str, expected: str) -> None:
    """String literals escape exactly like JSON.stringify (lowercase hex, raw non-ASCII)."""
    assert json_string(text) == expected


def test_tag_safe_json_escapes_every_less_than() -> None:
    """Every < becomes \\u003c, the result is compact and parses back to the same value."""
    value = {"b": "</referenced-sessions><x>", "a": [1, None, True], "c": "<<"}
    encoded = tag_safe_json(value)
    assert "<" not in encoded
    assert encoded == (
        '{"b":"\\u003c/referenced-sessions>\\u003cx>","a":[1,null,true],"c":"\\u003c\\u003c"}'
    )
    assert json.loads(encoded) == value


def test_compact_json_escapes_lone_surrogates_in_keys_and_values() -> None:
    """Lone surrogates anywhere in the structure use \\udxxx escapes."""
    assert compact_json({"k\ud800": ["\udfff"]}) == '{"k\\ud800":["\\udfff"]}'


def test_non_serializable_value_is_a_type_error() -> None:
    """A value without a JSON form raises upstream's TypeError message."""
    with pytest.raises(TypeError, match=r"^session-reference data is not JSON-serializable$"):
        tag_safe_json({"x": object()})
    with pytest.raises(TypeError, match=r"not JSON-serializable"):
        compact_json(float("nan"))


def test_pretty_json_matches_two_space_stringify() -> None:
    """Indented output uses two spaces, ': ' and no trailing newline, like JSON.stringify."""
    assert pretty_json({"a": None, "b": [1, 2], "c": "<"}) == (
        '{\n  "a": null,\n  "b": [\n    1,\n    2\n  ],\n  "c": "<"\n}'
    )
