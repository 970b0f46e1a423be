"""The TypeScript that ``agent-actors schema`` generates declares the DSH types field for field
as the specs state them: names, key order, optionality, types and literal unions.

What the spec says is read from its text (the markdown tables' field/type/optional columns,
the key-order lines, the code blocks); where it gives no machine-readable form, the
expectation is written here with the section it comes from. The specs live beside the
checkout in ``../shared/spec/``; without them these tests skip.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from actors._serve import describe_builtin
from actors.cli._typescript import render_typescript

SPEC = Path(__file__).resolve().parents[3] / ".." / "shared" / "spec"
pytestmark = pytest.mark.skipif(
    not SPEC.is_dir(), reason=f"the DSH specs are not beside the checkout ({SPEC})"
)

#: (name, optional, TypeScript type) of one property.
Field = tuple[str, bool, str]


# ---- the generated TypeScript ------------------------------------------------------------


@pytest.fixture(scope="module")
def ts() -> str:
    return render_typescript(describe_builtin(), source="the installed agent-actors package")


def _members(body: str) -> list[str]:
    """The members of an interface body: comments dropped, split at top-level ``;``."""
    body = re.sub(r"/\*\*.*?\*/", "", body, flags=re.S)
    out, depth, current = [], 0, ""
    for char in body:
        depth += char in "{[(<"
        depth -= char in "}])>"
        if char == ";" and depth == 0:
            out.append(" ".join(current.split()))
            current = ""
        else:
            current += char
    return [m for m in out if m]


def interface(ts: str, name: str) -> list[Field]:
    """The properties of ``export interface name { … }`` in order."""
    found = re.search(rf"^export interface {name} \{{\n(.*?)^\}}", ts, re.S | re.M)
    assert found, f"no `export interface {name}` in the generated TypeScript"
    fields = []
    for member in _members(found.group(1)):
        parsed = re.fullmatch(r'("[^"]+"|[\w$]+)(\?)?: (.*)', member)
        assert parsed, f"unreadable member {member!r} of {name}"
        key, optional, type_ = parsed.groups()
        fields.append((key.strip('"'), bool(optional), _union_text(type_)))
    return fields


def alias(ts: str, name: str) -> list[str]:
    """The members of ``export type name = A | B;``."""
    found = re.search(rf"^export type {name} =(.*?);$", ts, re.S | re.M)
    assert found, f"no `export type {name}` in the generated TypeScript"
    return _union(found.group(1))


def _union(text: str) -> list[str]:
    return [m.strip() for m in " ".join(text.split()).removeprefix("| ").split(" | ")]


def _union_text(text: str) -> str:
    return " | ".join(_union(text))


def endpoint(ts: str, name: str) -> dict[str, str]:
    """``params``, ``result`` and ``errors`` of one entry of ``interface Endpoints``."""
    body = re.search(r"^export interface Endpoints \{\n(.*?)^\}", ts, re.S | re.M)
    assert body
    entry = re.search(rf'^  "{re.escape(name)}": \{{\n(.*?)^  \}};', body.group(1), re.S | re.M)
    assert entry, f"no {name} in Endpoints"
    return {m.split(":", 1)[0]: m.split(": ", 1)[1] for m in _members(entry.group(1))}


# ---- the spec text -----------------------------------------------------------------------


def spec(name: str) -> str:
    return (SPEC / name).read_text(encoding="utf-8")


def section(text: str, number: str) -> str:
    """The body of ``### <number> …`` up to the next heading."""
    found = re.search(rf"^#+ {re.escape(number)} .*?\n(.*?)(?=^#)", text, re.S | re.M)
    assert found, f"no section {number}"
    return found.group(1)


def table(text: str) -> list[dict[str, str]]:
    """The first markdown table of ``text``: one dict per row, by header, backticks dropped."""
    rows = [line for line in text.splitlines() if line.startswith("|")]
    cells = [[c.strip().replace("`", "") for c in row.strip("|").split("|")] for row in rows]
    header, body = cells[0], [c for c in cells[2:]]
    return [dict(zip(header, row, strict=True)) for row in body]


def code_block(text: str) -> str:
    found = re.search(r"```\n(.*?)```", text, re.S)
    assert found, "no code block"
    return found.group(1)


def key_order(line_prefix: str, text: str) -> list[str]:
    """The names of a ``<prefix> `a, b (if any), c``` line, parentheticals dropped."""
    found = re.search(rf"{re.escape(line_prefix)}\s*`([^`]+)`", text)
    assert found, f"no line {line_prefix!r}"
    return [re.sub(r"\s*\(.*?\)", "", n).strip() for n in found.group(1).split(",")]


def ts_type(spec_type: str) -> str:
    """A spec table's type cell as TypeScript: the DSH wording of the scalar types."""
    if quoted := re.findall(r'"([^"]+)"', spec_type):
        return " | ".join(f'"{q}"' for q in quoted)
    word = spec_type.split()[0].strip(",")
    return {"string": "string", "int": "number", "bool": "boolean", "boolean": "boolean"}[word]


def fields_of(rows: list[dict[str, str]]) -> list[Field]:
    return [(r["field"], "optional" in r["type"], ts_type(r["type"])) for r in rows]


# ---- the DSH types -----------------------------------------------------------------------


def test_session_reference_input(ts: str) -> None:
    """SessionReferenceInput is session-reference.md §1.3's table: sessionId, then an
    optional label, both strings."""
    expected = fields_of(table(section(spec("session-reference.md"), "1.3")))
    assert expected == [("sessionId", False, "string"), ("label", True, "string")]
    assert interface(ts, "SessionReferenceInput") == expected


def test_mention_candidate(ts: str) -> None:
    """SessionReferenceMentionCandidate is the candidate of newer §2.2 (its table and key
    order line: displayTitle and cwd optional, sameWorkspace required), then §1.5's
    ``mention: string``; the old §1.4 key order survives inside it."""
    newer = section(spec("session-reference-newer.md"), "2.2")
    rows = fields_of(table(newer))
    order = key_order("Key order produced:", newer)
    assert [name for name, _, _ in rows] == order
    mention = re.search(r"`(\w+): (\w+)`", section(spec("session-reference.md"), "1.5"))
    assert mention
    expected = [*rows, (mention.group(1), False, ts_type(mention.group(2)))]
    generated = interface(ts, "SessionReferenceMentionCandidate")
    assert generated == expected
    assert [f[0] for f in generated] == [
        "sessionId", "label", "displayTitle", "cwd", "sameWorkspace", "createdAt", "mention",
    ]  # fmt: skip
    old = key_order("Key order in produced objects:", section(spec("session-reference.md"), "1.4"))
    names = [f[0] for f in generated]
    assert [n for n in names if n in old] == old


def test_session_reference_source(ts: str) -> None:
    """SessionReferenceSource is §1.7's code block (kind, form and version as literals, then
    references), and its reference element newer §2.3's key order, with the stats types of
    §1.6 and capturedThroughSeq an int or null (newer §2.1)."""
    old = spec("session-reference.md")
    newer = spec("session-reference-newer.md")
    block = code_block(section(old, "1.7"))
    top = re.findall(r"^\s*(\w+): ('[^']*'|\d+|\[)", block, re.M)
    literal = {"[": "SessionReferenceSourceReference[]"}
    expected = [(k, False, literal.get(v, v.replace("'", '"'))) for k, v in top]
    assert [k for k, _ in top] == ["kind", "form", "version", "references"]
    assert interface(ts, "SessionReferenceSource") == expected

    order = key_order("Key order:", section(newer, "2.3"))
    stats = dict(re.findall(r"`(\w+): (bool|int)`", section(old, "1.6")))
    seq = re.search(r"`capturedThroughSeq` is typed `\w+` \((\w+) or `(null)`\)", newer)
    assert seq
    types = {name: ts_type(t) for name, t in stats.items()}
    types["capturedThroughSeq"] = f"{ts_type(seq.group(1))} | {seq.group(2)}"
    # Hand-written (no table says them): sessionId and label are strings (§1.6's
    # ReferencedSessionData), capturedFormatVersion is `snapshot.session.version`, an int the
    # type marks optional (newer §2.3), inputIndex a position 0, 1, 2 … (§1.7).
    types |= {"sessionId": "string", "label": "string"}
    types |= {"capturedFormatVersion": "number", "inputIndex": "number"}
    assert "The type\nmarks it optional" in section(newer, "2.3")
    expected_element = [(n, n == "capturedFormatVersion", types[n]) for n in order]
    assert interface(ts, "SessionReferenceSourceReference") == expected_element
    old_order = re.search(r"references: \[ \{(.*?)\}", block, re.S)
    assert old_order
    old_names = [n.strip() for n in old_order.group(1).split(",") if n.strip()]
    assert [n for n in order if n in old_names] == old_names


def test_prepared_referenced_message(ts: str) -> None:
    """PreparedReferencedMessage is §1.8's table: content (the prepare argument's type, copied)
    and an optional additionalContext, a UserMessage whose key order (source, content, role,
    id) and role 'user' are §1.2's."""
    old = spec("session-reference.md")
    rows = table(section(old, "1.8"))
    assert [r["field"] for r in rows] == ["content", "additionalContext"]
    context_type = re.search(r"\b(UserMessage)\b", rows[1]["meaning"])
    assert context_type
    prepare = endpoint(ts, "sessionReferenceResolver/prepare")
    content_param = re.search(r"content: (.*?), references:", prepare["params"])
    assert content_param
    expected = [
        ("content", "optional" in rows[0]["meaning"], _union_text(content_param.group(1))),
        ("additionalContext", "optional" in rows[1]["meaning"], context_type.group(1)),
    ]
    assert expected[1][1] and not expected[0][1]
    assert interface(ts, "PreparedReferencedMessage") == expected

    model = section(old, "1.2")
    order = key_order("so its key order is", model)
    role = re.search(r"`UserMessage` has `role: '(\w+)'`", model)
    assert role
    message = interface(ts, "UserMessage")
    assert [f[0] for f in message] == order
    assert ("role", False, f'"{role.group(1)}"') in message
    assert ("content", False, "ContentBlock[]") in message


def test_content_blocks(ts: str) -> None:
    """ContentBlock is the union of §1.2's five blocks, each its ``type`` tag then its
    fields in the spec's order (isError optional)."""
    model = section(spec("session-reference.md"), "1.2")
    blocks = re.findall(r"`([\w-]+) \{([^}]*)\}`", model)
    assert [tag for tag, _ in blocks] == ["text", "reasoning", "image", "tool-call", "tool-result"]
    members = alias(ts, "ContentBlock")
    assert len(members) == len(blocks)
    for member, (tag, names) in zip(members, blocks, strict=True):
        fields = interface(ts, member)
        assert fields[0] == ("type", False, f'"{tag}"')
        expected = [(n.strip().rstrip("?"), n.strip().endswith("?")) for n in names.split(",")]
        assert [(name, optional) for name, optional, _ in fields[1:]] == expected


def test_error_codes(ts: str) -> None:
    """SessionReferenceErrorCode is §1.9's closed set, the seven codes in the spec's order."""
    codes = code_block(section(spec("session-reference.md"), "1.9")).split()
    assert len(codes) == 7
    assert alias(ts, "SessionReferenceErrorCode") == [f'"{c}"' for c in codes]
    assert "SessionReferenceErrorCode" in endpoint(ts, "sessionReferenceResolver/prepare")["errors"]


def test_file_reference_candidate(ts: str) -> None:
    """FileReferenceCandidate is file-reference.md §1.1's table, exactly two fields: path, a
    string, and kind, 'file' | 'directory'."""
    rows = fields_of(table(section(spec("file-reference.md"), "1.1")))
    assert rows == [("path", False, "string"), ("kind", False, '"file" | "directory"')]
    assert interface(ts, "FileReferenceCandidate") == rows


def test_remote_faces(ts: str) -> None:
    """The endpoints of session-reference.md §7.1's table take its parameters (the agent
    lookup and the signal aside) and answer its result types."""
    rows = table(section(spec("session-reference.md"), "7.1"))
    candidates = next(r for r in rows if r["endpoint"] == "sessionReferenceResolver/candidates")
    declared = endpoint(ts, "sessionReferenceResolver/candidates")
    assert declared["result"] == candidates["result"]
    wire_params = re.findall(r"(\w+): \w+", candidates["parameters (order)"])
    assert [p.split("?")[0] for p in re.findall(r"(\w+\??):", declared["params"])] == wire_params
    files = endpoint(ts, "fileReferences/list")
    assert files["result"] == "FileReferenceCandidate[]"
    assert files["params"] == "[query: string]"
