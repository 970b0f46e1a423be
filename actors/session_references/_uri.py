"""Canonical ``dsh-session:`` URIs and ``@[label](uri)`` mentions (session-reference.md §2).

A URI is ``dsh-session:`` + unpadded base64url of the UTF-8 of ``JSON.stringify(id)``.
Decoding is strict: only the exact canonical text of some string id is accepted, so
decoder leniency differences between Node and Python cannot change an outcome.
"""

from __future__ import annotations

import base64
import binascii
import json
import re

import attrs

from actors.session_references._errors import SessionReferenceError
from actors.session_references._jstext import json_string

__all__ = [
    "SESSION_REFERENCE_SCHEME",
    "MentionReference",
    "ParsedSessionReferenceText",
    "decode_session_reference_uri",
    "encode_session_reference_uri",
    "format_session_reference_mention",
    "parse_session_reference_text",
]

#: URI scheme reserved for DSH session snapshots.
SESSION_REFERENCE_SCHEME = "dsh-session:"

_PAYLOAD = re.compile(r"[A-Za-z0-9_-]+")

# JavaScript `\s` (the spec spells it out, §2.4): Python's `\s` adds U+001C-U+001F and
# U+0085 and lacks U+FEFF, so the class is written explicitly.
_JS_WHITESPACE = "\t\n\x0b\x0c\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
# JavaScript `.` (no `s` flag) excludes exactly these line terminators; Python's `.`
# excludes only U+000A.
_JS_LINE_TERMINATORS = "\n\r\u2028\u2029"

# Upstream: /@\[((?:\\.|[^\\\]])*)\]\((dsh-session:[^\s)]*)\)|(dsh-session:[A-Za-z0-9_-]+)/gu
# The `u` flag makes every class match whole code points, which is what Python's `re`
# does on a `str` once surrogate pairs are merged.
_MENTION = re.compile(
    r"@\[((?:\\[^" + _JS_LINE_TERMINATORS + r"]|[^\\\]])*)\]"
    r"\((dsh-session:[^)" + _JS_WHITESPACE + r"]*)\)"
    r"|(dsh-session:[A-Za-z0-9_-]+)"
)
_UNESCAPE = re.compile(r"\\([^" + _JS_LINE_TERMINATORS + r"])")
_ESCAPE = re.compile(r"[\\\]]")


@attrs.frozen(kw_only=True)
class MentionReference:
    """One reference found in text: the decoded id and its (unescaped) label."""

    #: Decoded session id.
    session_id: str
    #: Markdown label with escapes removed, or the session id for a bare URI.
    label: str


@attrs.frozen(kw_only=True)
class ParsedSessionReferenceText:
    """Text with mentions replaced by ``@label``, and the references in appearance order."""

    #: The readable text.
    text: str
    #: References in order of appearance, duplicates kept (prepare de-duplicates).
    references: tuple[MentionReference, ...]


def encode_session_reference_uri(session_id: str) -> str:
    """Encode any session id as its canonical URI.

    Args:
        session_id: Opaque id; any string, including the empty one.

    Returns:
        ``dsh-session:`` + base64url (no padding) of the UTF-8 JSON string literal.
    """
    # json_string escapes lone surrogates, so the literal is always encodable.
    literal = json_string(session_id).encode("utf-8")
    payload = base64.urlsafe_b64encode(literal).rstrip(b"=").decode("ascii")
    return SESSION_REFERENCE_SCHEME + payload


def decode_session_reference_uri(uri: str) -> str:
    """Decode a canonical URI back to its session id.

    Raises:
        SessionReferenceError: INVALID_REFERENCE ``invalid session reference URI "<uri>"``
            for a wrong scheme, an empty or non-base64url payload, a payload that is not
            a JSON string, or any text other than the canonical encoding of that string.
    """
    if not uri.startswith(SESSION_REFERENCE_SCHEME):
        raise SessionReferenceError.invalid_uri(uri)
    payload = uri[len(SESSION_REFERENCE_SCHEME) :]
    # A whole-string match: JS `$` does not allow a trailing newline, Python's `$` would.
    if _PAYLOAD.fullmatch(payload) is None:
        raise SessionReferenceError.invalid_uri(uri)
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        parsed = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError) as exc:
        raise SessionReferenceError.invalid_uri(uri, exc) from exc
    if not isinstance(parsed, str):
        cause = TypeError("decoded session id is not a string")
        raise SessionReferenceError.invalid_uri(uri, cause) from cause
    if encode_session_reference_uri(parsed) != uri:
        cause = TypeError("URI is not canonical")
        raise SessionReferenceError.invalid_uri(uri, cause) from cause
    return parsed


def format_session_reference_mention(session_id: str, label: str | None = None) -> str:
    """Render ``@[label](uri)``; the label defaults to the id.

    Only ``\\`` and ``]`` are escaped (with a backslash); ``[``, parentheses, newlines,
    controls and ``@`` pass through unchanged.
    """
    shown = session_id if label is None else label
    escaped = _ESCAPE.sub(lambda m: "\\" + m.group(), shown)
    return f"@[{escaped}]({encode_session_reference_uri(session_id)})"


def parse_session_reference_text(text: str) -> ParsedSessionReferenceText:
    """Replace mentions and bare URIs in ``text`` by ``@label`` and collect references.

    Scans left to right for Markdown mentions ``@[label](dsh-session:...)`` and bare
    URIs ``dsh-session:<base64url>+``; each is decoded strictly.

    Raises:
        SessionReferenceError: INVALID_REFERENCE for the first match whose URI is not
            canonical; the whole parse fails.
    """
    references: list[MentionReference] = []

    def replace(match: re.Match[str]) -> str:
        raw_label, markdown_uri, bare_uri = match.group(1, 2, 3)
        uri = markdown_uri if markdown_uri is not None else bare_uri
        session_id = decode_session_reference_uri(uri)
        label = session_id if raw_label is None else _UNESCAPE.sub(lambda m: m.group(1), raw_label)
        references.append(MentionReference(session_id=session_id, label=label))
        return "@" + label

    rendered = _MENTION.sub(replace, text)
    return ParsedSessionReferenceText(text=rendered, references=tuple(references))
