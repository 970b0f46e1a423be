"""The mention codec: canonical ``dsh-session:`` URIs and ``@[label](uri)`` mentions
(session-reference §2).

A URI is ``dsh-session:`` + unpadded base64url of the UTF-8 of ``JSON.stringify(id)``.
Decoding is strict: only the exact canonical text of some string id is accepted, so
decoder leniency differences between Node and Python cannot change an outcome. Parsing text
finds what upstream's global regex finds (§2.4), in linear time (see `_matches`).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from typing import Any

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

_UNESCAPE = re.compile(r"\\([^" + _JS_LINE_TERMINATORS + r"])")
_ESCAPE = re.compile(r"[\\\]]")

# Upstream parses with the global regex
#   /@\[((?:\\.|[^\\\]])*)\]\((dsh-session:[^\s)]*)\)|(dsh-session:[A-Za-z0-9_-]+)/gu
# (the `u` flag makes every class match whole code points, as Python's `re` does on a `str`).
# `_matches` finds the same matches from these pieces, each matched possessively where it must
# start (both quantified parts are deterministic: backtracking into them never succeeds).
_LABEL = re.compile(r"(?:\\[^" + _JS_LINE_TERMINATORS + r"]|[^\\\]])*+")
_URI_RUN = re.compile(r"[^)" + _JS_WHITESPACE + r"]*+")
_MARKDOWN_OPEN = "@["
_URI_OPEN = "](" + SESSION_REFERENCE_SCHEME
_BARE_PAYLOAD = re.compile(r"[A-Za-z0-9_-]+")


@attrs.frozen(kw_only=True)
class MentionReference:
    """One reference found in text: the decoded id and its (unescaped) label."""

    #: Decoded session id.
    session_id: str
    #: Markdown label with escapes removed, or the session id for a bare URI.
    label: str

    def to_wire(self) -> dict[str, str]:
        """``{sessionId, label}``: one element of ``prepare``'s ``references`` argument."""
        return {"sessionId": self.session_id, "label": self.label}


@attrs.frozen(kw_only=True)
class ParsedSessionReferenceText:
    """Text with mentions replaced by ``@label``, and the references in appearance order."""

    #: The readable text.
    text: str
    #: References in order of appearance, duplicates kept (prepare de-duplicates).
    references: tuple[MentionReference, ...]

    def to_wire(self) -> dict[str, Any]:
        """``{text, references: [{sessionId, label}, …]}``."""
        return {"text": self.text, "references": [r.to_wire() for r in self.references]}


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


def _matches(text: str) -> Iterator[tuple[int, int, str | None, str]]:
    """Every match of upstream's global regex in ``text``: ``(start, end, label, uri)``, with
    ``label`` the raw Markdown label (None for a bare URI).

    Equivalent to scanning with that regex, in time linear in ``len(text)``. The regex itself
    is quadratic on text such as ``"@[" * n``: each ``@[`` starts a label that runs to the end
    before the attempt fails. Here a label is read once: a later ``@[`` inside it (before the
    character where it stopped) starts a label that stops at the same character, since both
    reads pass the ``@`` and ``[`` (neither an escape nor a ``]``) and coincide from then on;
    so does whatever follows that character, and the attempt's outcome is reused.
    """
    scheme = SESSION_REFERENCE_SCHEME
    position = 0
    next_open = text.find(_MARKDOWN_OPEN)
    next_bare = text.find(scheme)
    stop = -1  # where the last label read stopped ...
    outcome: tuple[int, str] | None = None  # ... and what followed it: (end, uri), or none
    uri_run = (-1, -1)  # the last URI run read: where it started and where it stopped
    while next_open >= 0 or next_bare >= 0:
        if next_bare < 0 or 0 <= next_open < next_bare:
            start = next_open
            if start >= stop:
                stop = _run_end(_LABEL, text, start + 2)
                outcome = None
                if text.startswith(_URI_OPEN, stop):
                    begin = stop + len(_URI_OPEN)
                    # A URI run that starts inside the last one read ends where it ended (the
                    # run is one character class), so text like "@[x](dsh-session:" * n is
                    # read once, not once per label.
                    if not uri_run[0] <= begin < uri_run[1]:
                        uri_run = (begin, _run_end(_URI_RUN, text, begin))
                    close = uri_run[1]
                    if text.startswith(")", close):
                        outcome = (close + 1, text[stop + 2 : close])
            if outcome is None:  # nor can a bare URI start at "@"
                next_open = text.find(_MARKDOWN_OPEN, start + 1)
                continue
            end, uri = outcome
            yield start, end, text[start + 2 : stop], uri
        else:
            start = next_bare
            payload = _BARE_PAYLOAD.match(text, start + len(scheme))
            if payload is None:
                next_bare = text.find(scheme, start + 1)
                continue
            end = payload.end()
            yield start, end, None, text[start:end]
        position = end
        # Only a candidate the match passed is looked for again (-1 stays: none is left).
        if 0 <= next_open < position:
            next_open = text.find(_MARKDOWN_OPEN, position)
        if 0 <= next_bare < position:
            next_bare = text.find(scheme, position)


def _run_end(pattern: re.Pattern[str], text: str, start: int) -> int:
    """Where a possessive run of ``pattern`` (which may be empty) starting at ``start`` ends."""
    run = pattern.match(text, start)
    return start if run is None else run.end()


def parse_session_reference_text(text: str) -> ParsedSessionReferenceText:
    """Replace mentions and bare URIs in ``text`` by ``@label`` and collect references
    (upstream's ``parseSessionReferenceText``, session-reference §2.4).

    Scans left to right for Markdown mentions ``@[label](dsh-session:...)`` and bare
    URIs ``dsh-session:<base64url>+``; each is decoded strictly. Text outside them is kept
    as it is; the label replaces its match literally. Linear in the length of ``text``.

    Raises:
        SessionReferenceError: INVALID_REFERENCE for the first match whose URI is not
            canonical; the whole parse fails.
    """
    references: list[MentionReference] = []
    pieces: list[str] = []
    done = 0
    for start, end, raw_label, uri in _matches(text):
        session_id = decode_session_reference_uri(uri)
        label = session_id if raw_label is None else _UNESCAPE.sub(lambda m: m.group(1), raw_label)
        references.append(MentionReference(session_id=session_id, label=label))
        pieces += (text[done:start], "@", label)
        done = end
    pieces.append(text[done:])
    return ParsedSessionReferenceText(text="".join(pieces), references=tuple(references))
