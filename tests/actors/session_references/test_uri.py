"""Mention URIs: canonical encoding, strict decoding, mention formatting and text parsing."""

from __future__ import annotations

import pytest

from actors.session_references._errors import SessionReferenceError, SessionReferenceErrorCode
from actors.session_references._uri import (
    SESSION_REFERENCE_SCHEME,
    MentionReference,
    decode_session_reference_uri,
    encode_session_reference_uri,
    format_session_reference_mention,
    parse_session_reference_text,
)

SOURCE_URI = "dsh-session:InNvdXJjZSI"

ENCODED = [
    ("source", "dsh-session:InNvdXJjZSI"),
    ("source]", "dsh-session:InNvdXJjZV0i"),
    ("target", "dsh-session:InRhcmdldCI"),
    ("one", "dsh-session:Im9uZSI"),
    ("two", "dsh-session:InR3byI"),
    ("three", "dsh-session:InRocmVlIg"),
    ("", "dsh-session:IiI"),
    ('unicode/引号"/slash\\/line\n', "dsh-session:InVuaWNvZGUv5byV5Y-3XCIvc2xhc2hcXC9saW5lXG4i"),
]


def _invalid(uri: str) -> str:
    return f"^invalid session reference URI {_json_quote(uri)}$"


def _json_quote(text: str) -> str:
    import json
    import re

    return re.escape(json.dumps(text, ensure_ascii=False))


@pytest.mark.parametrize(("session_id", "uri"), ENCODED)
def test_encode_matches_upstream_examples(session_id: str, uri: str) -> None:
    """Each spec example id encodes to upstream's exact URI."""
    assert encode_session_reference_uri(session_id) == uri


@pytest.mark.parametrize(("session_id", "uri"), ENCODED)
def test_decode_round_trips_examples(session_id: str, uri: str) -> None:
    """Each canonical example URI decodes back to its id."""
    assert decode_session_reference_uri(uri) == session_id


@pytest.mark.parametrize(
    "session_id",
    [
        "a\u2028b\u2029c",
        "\x7f\x00\x01\x1f\b\t\f\r",
        "emoji 😀 and </tag>",
        "\ud800 lone high",
        "lone low \udfff",
        "x" * 1000,
    ],
)
def test_every_string_round_trips(session_id: str) -> None:
    """Control characters, separators, astral characters and lone surrogates round-trip."""
    uri = encode_session_reference_uri(session_id)
    assert uri.startswith(SESSION_REFERENCE_SCHEME)
    assert "=" not in uri
    assert decode_session_reference_uri(uri) == session_id


def test_encode_escapes_like_json_stringify() -> None:
    """Controls use short escapes or lowercase \\u00xx; U+007F and U+2028 stay raw."""
    import base64

    uri = encode_session_reference_uri("\x01\x7f\u2028\ud800")
    payload = uri[len(SESSION_REFERENCE_SCHEME) :]
    raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode("utf-8")
    assert raw == '"\\u0001\x7f\u2028\\ud800"'


def test_surrogate_pair_as_two_code_points_encodes_as_the_character() -> None:
    """A high/low pair held as two code points is the same JS string as the character."""
    assert encode_session_reference_uri("\ud83d\ude00") == encode_session_reference_uri("😀")


@pytest.mark.parametrize(
    "uri",
    [
        "https://example.test",
        "dsh-session:",
        "dsh-session:%%%",
        "dsh-session:IiJ",
        "dsh-session:eyJpZCI6IngifQ",
        "dsh-session:not-canonical",
        "dsh-session:InNvdXJjZSI\n",
        "dsh-session:InNvdXJjZSI=",
        "DSH-SESSION:InNvdXJjZSI",
        "dsh-session:InNvdXJjZSIx",
        "dsh-session:I",
    ],
)
def test_decode_rejects_non_canonical_uris(uri: str) -> None:
    """Wrong scheme, empty or bad payload, non-string JSON and non-canonical text fail."""
    with pytest.raises(SessionReferenceError, match=_invalid(uri)) as caught:
        decode_session_reference_uri(uri)
    assert caught.value.code is SessionReferenceErrorCode.INVALID_REFERENCE


def test_decode_rejects_escaped_surrogate_pair_json() -> None:
    """JSON spelling a pair as escapes decodes to the character, whose canonical form differs."""
    import base64

    payload = base64.urlsafe_b64encode(b'"\\ud83d\\ude00"').rstrip(b"=").decode()
    uri = SESSION_REFERENCE_SCHEME + payload
    with pytest.raises(SessionReferenceError, match=_invalid(uri)):
        decode_session_reference_uri(uri)


def test_decode_error_message_example_and_cause() -> None:
    """The spec's example message is exact and the inner failure is the cause."""
    with pytest.raises(SessionReferenceError) as caught:
        decode_session_reference_uri("dsh-session:IiJ")
    assert str(caught.value) == 'invalid session reference URI "dsh-session:IiJ"'
    assert isinstance(caught.value.__cause__, TypeError)


def test_decode_error_quotes_lone_surrogates_like_json_stringify() -> None:
    """A lone surrogate in a rejected URI is written as \\udxxx in the message."""
    with pytest.raises(SessionReferenceError) as caught:
        decode_session_reference_uri("x\ud800")
    assert caught.value.message == 'invalid session reference URI "x\\ud800"'


def test_format_escapes_only_backslash_and_bracket() -> None:
    """Only \\ and ] are escaped; [, parentheses, newlines and @ pass through."""
    assert format_session_reference_mention("source", "源]会话") == (
        "@[源\\]会话](dsh-session:InNvdXJjZSI)"
    )
    assert format_session_reference_mention("source", "a[b(c)\n\x01@\\") == (
        "@[a[b(c)\n\x01@\\\\](dsh-session:InNvdXJjZSI)"
    )


def test_format_defaults_label_to_escaped_id() -> None:
    """Without a label the id is the label, escaped too."""
    assert format_session_reference_mention("source]") == "@[source\\]](dsh-session:InNvdXJjZV0i)"
    assert format_session_reference_mention("a\\b").startswith("@[a\\\\b](")


def test_format_keeps_empty_label() -> None:
    """An empty label is a label, not an absent one."""
    assert format_session_reference_mention("source", "") == "@[](dsh-session:InNvdXJjZSI)"


def _refs(*pairs: tuple[str, str]) -> tuple[MentionReference, ...]:
    return tuple(MentionReference(session_id=sid, label=label) for sid, label in pairs)


@pytest.mark.parametrize(
    ("text", "expected_text", "expected_refs"),
    [
        ("what is a dsh-session: URI?", "what is a dsh-session: URI?", ()),
        ("see dsh-session:%%%", "see dsh-session:%%%", ()),
        (
            f"see {SOURCE_URI}. and `{SOURCE_URI}`",
            "see @source. and `@source`",
            _refs(("source", "source"), ("source", "source")),
        ),
        (f"@[a]b]({SOURCE_URI})", "@[a]b](@source)", _refs(("source", "source"))),
        (f"@[x] ({SOURCE_URI})", "@[x] (@source)", _refs(("source", "source"))),
        (f"@[multi\nline]({SOURCE_URI})", "@multi\nline", _refs(("source", "multi\nline"))),
        (
            f"@[a\\\\b\\]c]({SOURCE_URI}) x {SOURCE_URI}.",
            "@a\\b]c x @source.",
            _refs(("source", "a\\b]c"), ("source", "source")),
        ),
        (f"@[]({SOURCE_URI})", "@", _refs(("source", ""))),
        (f"x{SOURCE_URI}!", "x@source!", _refs(("source", "source"))),
        ("plain text", "plain text", ()),
    ],
)
def test_parse_matches_upstream_table(
    text: str, expected_text: str, expected_refs: tuple[MentionReference, ...]
) -> None:
    """The spec's verified parse table holds exactly."""
    parsed = parse_session_reference_text(text)
    assert parsed.text == expected_text
    assert parsed.references == expected_refs


@pytest.mark.parametrize(
    ("text", "bad_uri"),
    [
        ("see dsh-session:IiJ", "dsh-session:IiJ"),
        ("@[bad](dsh-session:%%%)", "dsh-session:%%%"),
        ("@[x](dsh-session:)", "dsh-session:"),
        (f"{SOURCE_URI}-x", f"{SOURCE_URI}-x"),
    ],
)
def test_parse_fails_on_malformed_mentions(text: str, bad_uri: str) -> None:
    """A malformed explicit mention or a base64url-shaped bare URI aborts the parse."""
    with pytest.raises(SessionReferenceError, match=_invalid(bad_uri)):
        parse_session_reference_text(text)


def test_parse_fails_at_first_bad_match_in_order() -> None:
    """The first failing match (left to right) names the error."""
    with pytest.raises(SessionReferenceError, match=_invalid("dsh-session:IiJ")):
        parse_session_reference_text(f"{SOURCE_URI} dsh-session:IiJ dsh-session:%%%x")


@pytest.mark.parametrize(
    "space",
    [
        *("\t", "\n", "\x0b", "\x0c", "\r", " ", "\u00a0", "\u1680", "\u2000", "\u200a"),
        *("\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff"),
    ],
)
def test_markdown_uri_stops_at_javascript_whitespace(space: str) -> None:
    """A JS whitespace character ends the markdown URI, so the mention form fails there."""
    text = f"@[x](dsh-session:InNvdXJjZSI{space})"
    parsed = parse_session_reference_text(text)
    # The markdown form cannot close; the bare URI inside still matches.
    assert parsed.text == f"@[x](@source{space})"


@pytest.mark.parametrize("char", ["\x1c", "\x1d", "\x1e", "\x1f", "\x85"])
def test_markdown_uri_absorbs_python_only_whitespace(char: str) -> None:
    """Characters Python's \\s matches but JS's does not stay inside the URI (then fail)."""
    text = f"@[x](dsh-session:InNvdXJjZSI{char})"
    with pytest.raises(SessionReferenceError, match=_invalid(f"dsh-session:InNvdXJjZSI{char}")):
        parse_session_reference_text(text)


@pytest.mark.parametrize("terminator", ["\n", "\r", "\u2028", "\u2029"])
def test_label_escape_cannot_escape_line_terminators(terminator: str) -> None:
    """Backslash before a JS line terminator is not an escape: the markdown form fails."""
    text = f"@[a\\{terminator}b]({SOURCE_URI})"
    parsed = parse_session_reference_text(text)
    assert parsed.text == f"@[a\\{terminator}b](@source)"


@pytest.mark.parametrize("char", ["\x0b", "\x0c", "\x85", "\u00a0"])
def test_label_escape_accepts_non_terminators(char: str) -> None:
    """Characters JS `.` matches (Python `.` would too, except newline) are escapable."""
    parsed = parse_session_reference_text(f"@[a\\{char}b]({SOURCE_URI})")
    assert parsed.references == _refs(("source", f"a{char}b"))


def test_label_with_astral_and_lone_surrogates() -> None:
    """Astral characters and lone surrogates in labels are matched as single code points."""
    parsed = parse_session_reference_text(f"@[\\😀\ud800]({SOURCE_URI})")
    assert parsed.references == _refs(("source", "😀\ud800"))
    assert parsed.text == "@😀\ud800"


def test_replacement_label_is_literal() -> None:
    """A label with regex replacement syntax is inserted literally."""
    parsed = parse_session_reference_text(f"@[$1 \\\\1 \\g<0>]({SOURCE_URI})")
    assert parsed.text == "@$1 \\1 g<0>"


def test_format_then_parse_round_trips() -> None:
    """A formatted mention parses back to its id and label for awkward labels."""
    for session_id, label in [
        ("s", "a]b\\c"),
        ('unicode/引号"/slash\\/line\n', "multi\nline ] \\"),
        ("", "empty id"),
    ]:
        mention = format_session_reference_mention(session_id, label)
        parsed = parse_session_reference_text(f"before {mention} after")
        assert parsed.references == _refs((session_id, label))
        assert parsed.text == f"before @{label} after"
