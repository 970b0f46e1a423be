"""The mention codec against ``mention_vectors.json``, the vectors the Python and TypeScript
codecs share (session-reference.md §2), and the linear parser against upstream's regex.

Each vector is also checked against an independent rendering of the spec: the URI from
``json.dumps`` and base64url, the error message from a JSON-quoted URI, and the parse from
upstream's global regex run by Python's ``re`` (quadratic on some inputs, fine on small ones).
"""

from __future__ import annotations

import base64
import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from actors.session_references import (
    SESSION_REFERENCE_SCHEME,
    SessionReferenceError,
    SessionReferenceErrorCode,
    decode_session_reference_uri,
    encode_session_reference_uri,
    format_session_reference_mention,
    parse_session_reference_text,
)

VECTORS = json.loads((Path(__file__).parent / "mention_vectors.json").read_text("ascii"))

# Upstream: /@\[((?:\\.|[^\\\]])*)\]\((dsh-session:[^\s)]*)\)|(dsh-session:[A-Za-z0-9_-]+)/gu,
# with JS `.` and `\s` spelled out (§2.4).
_JS_SPACE = "\t\n\x0b\x0c\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_UPSTREAM = re.compile(
    r"@\[((?:\\[^\n\r\u2028\u2029]|[^\\\]])*)\]\((dsh-session:[^)" + _JS_SPACE + r"]*)\)"
    r"|(dsh-session:[A-Za-z0-9_-]+)"
)


def upstream_parse(text: str) -> dict[str, Any]:
    """§2.4 by upstream's regex: the wire result, or ``{"error": message}``."""
    references: list[dict[str, str]] = []

    def replace(match: re.Match[str]) -> str:
        raw_label, markdown_uri, bare_uri = match.group(1, 2, 3)
        session_id = decode_session_reference_uri(markdown_uri or bare_uri)
        label = session_id if raw_label is None else re.sub(
            r"\\([^\n\r\u2028\u2029])", lambda m: m.group(1), raw_label
        )  # fmt: skip
        references.append({"sessionId": session_id, "label": label})
        return "@" + label

    try:
        return {"text": _UPSTREAM.sub(replace, text), "references": references}
    except SessionReferenceError as error:
        return {"error": error.message}


def ours(text: str) -> dict[str, Any]:
    try:
        return parse_session_reference_text(text).to_wire()
    except SessionReferenceError as error:
        return {"error": error.message}


def has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


@pytest.mark.parametrize("case", VECTORS["encode"], ids=lambda c: c["uri"])
def test_encode_vectors(case: dict[str, str]) -> None:
    """Each id encodes to its URI and the URI decodes back to the id; for ids without lone
    surrogates the URI is also base64url(json.dumps(id)) computed here."""
    session_id, uri = case["sessionId"], case["uri"]
    assert encode_session_reference_uri(session_id) == uri
    assert decode_session_reference_uri(uri) == session_id
    if not has_lone_surrogate(session_id):
        literal = json.dumps(session_id, ensure_ascii=False).encode("utf-8")
        assert uri == "dsh-session:" + base64.urlsafe_b64encode(literal).rstrip(b"=").decode()


def test_reject_vectors_cover_every_rule_of_section_2_2() -> None:
    """The rejected URIs hold an example of each decoding rule: scheme, payload alphabet,
    decoding to JSON, a string result, and the canonical re-encoding."""
    assert {case["rule"] for case in VECTORS["reject"]} == {
        "scheme", "payload", "decode", "string", "canonical"
    }  # fmt: skip


@pytest.mark.parametrize("case", VECTORS["reject"], ids=lambda c: c["note"])
def test_reject_vectors(case: dict[str, str]) -> None:
    """Each rejected URI fails INVALID_REFERENCE with ``invalid session reference URI`` and the
    JSON-quoted URI, as upstream words it."""
    with pytest.raises(SessionReferenceError) as caught:
        decode_session_reference_uri(case["uri"])
    assert caught.value.code is SessionReferenceErrorCode.INVALID_REFERENCE
    assert caught.value.message == case["message"]
    assert case["message"] == "invalid session reference URI " + json.dumps(
        case["uri"], ensure_ascii=False
    )


@pytest.mark.parametrize("case", VECTORS["format"], ids=lambda c: c["mention"])
def test_format_vectors(case: dict[str, str]) -> None:
    """Each ``{sessionId, label?}`` formats to its mention, which parses back to the id and the
    label (the id when absent)."""
    label = case.get("label")
    assert format_session_reference_mention(case["sessionId"], label) == case["mention"]
    shown = case["sessionId"] if label is None else label
    assert ours(case["mention"]) == {
        "text": "@" + shown,
        "references": [{"sessionId": case["sessionId"], "label": shown}],
    }


@pytest.mark.parametrize("case", VECTORS["parse"], ids=lambda c: c.get("note") or c["text"])
def test_parse_vectors(case: dict[str, Any]) -> None:
    """Each text parses to its result (or fails with its error), exactly as upstream's regex
    parses it."""
    expected = case["result"] if "result" in case else {"error": case["error"]["message"]}
    if "error" in case:
        assert case["error"]["code"] == VECTORS["errorCode"]
    assert ours(case["text"]) == expected
    assert upstream_parse(case["text"]) == expected


_PIECES = [
    "@[", "@", "[", "]", "(", ")", "](", "\\", "\\\\", "\\]", "\n", "\u2028", " ", "\u00a0",
    "\ufeff", "\x85", "x", "源", "😀", "-", "_", "=", ".", SESSION_REFERENCE_SCHEME,
    "InNvdXJjZSI", "IiI", "Im9uZSI", "IiJ", "%", "](dsh-session:", "](dsh-session:InNvdXJjZSI)",
]  # fmt: skip


def test_linear_parser_equals_upstreams_regex_on_random_text() -> None:
    """On 20 000 random texts built from the characters and fragments that matter to the
    grammar, the parser's text, references and error equal upstream's regex's."""
    rng = random.Random(21)
    for _ in range(20_000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 14)))
        assert ours(text) == upstream_parse(text), repr(text)


def test_parsing_is_linear_in_the_text() -> None:
    """Text on which upstream's regex is quadratic (each of 200 000 ``@[`` starts a label that
        runs to the end), 300 000 bare URIs after the last ``@[``, and 200 000 labels whose URI runs
    all reach the end of the text parse within seconds in a child
        process (the regex would take hours)."""
    program = (
        "from actors.session_references import parse_session_reference_text as p\n"
        "t = '@[' * 200_000 + '@[x](dsh-session:' + '%' * 400_000 + ' '\n"
        "t += 'dsh-session:InNvdXJjZSI ' * 300_000\n"
        "r = p(t)\n"
        "assert len(r.references) == 300_000, len(r.references)\n"
        "assert {x.session_id for x in r.references} == {'source'}\n"
        # Each label ends at once and its URI run goes on to the end of the text.
        "assert p('@[x](dsh-session:' * 200_000).references == ()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
