"""``docs/api.md``: the reference of every endpoint, rendered from ``system/describe``.

:func:`render_api_markdown` turns a description (what ``system/describe`` answers, or
``actors._serve.describe_builtin()`` offline) into Markdown: per namespace, each endpoint's
doc line, ``mutates``, arguments, result and error codes, with one ``agent-actors call`` and
one TypeScript example; then the error codes and every record of ``$defs``. Types are read
from the JSON Schemas and written as TypeScript. The examples and the meanings of the codes
come from ``actors.cli._api_examples``, the shell and TypeScript text from
``actors.cli._api_snippets``.

Regenerate the document with ``python -m actors.cli._api_markdown > docs/api.md``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from actors.cli._api_examples import (
    CODE_MEANINGS,
    CWD,
    EXAMPLES,
    NAMESPACES,
    SESSION_REFERENCE_MEANINGS,
    CodeMeaning,
)
from actors.cli._api_snippets import call_snippet, shell_line, type_text

__all__ = ["REGENERATE", "heading_anchor", "render_api_markdown"]

#: The command that writes ``docs/api.md``.
REGENERATE = "python -m actors.cli._api_markdown > docs/api.md"

_ERRORS_ANCHOR = "error-codes"
_SESSION_REFERENCE_ANCHOR = "session-reference-codes"


def render_api_markdown(description: dict[str, Any]) -> str:
    """The Markdown reference of every endpoint and record type in ``description``."""
    endpoints = sorted(description["endpoints"], key=lambda e: str(e["name"]))
    defs: dict[str, Any] = description.get("$defs", {})
    namespaces: dict[str, list[dict[str, Any]]] = {}
    for endpoint in endpoints:
        namespaces.setdefault(str(endpoint["name"]).split("/", 1)[0], []).append(endpoint)
    parts = [
        *_header(),
        *_contents(namespaces, defs),
        *_reading(),
        *(
            line
            for namespace, members in namespaces.items()
            for line in _namespace(namespace, members)
        ),
        *_error_codes(),
        *_types(defs),
    ]
    return "\n".join(parts).rstrip("\n") + "\n"


def heading_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _code(text: str) -> str:
    return f"`{text}`"


def _link(text: str, heading: str) -> str:
    return f"[{text}](#{heading_anchor(heading)})"


def _cell(text: str) -> str:
    """A table cell: ``|`` escaped, even inside code spans (GitHub's rule), one line."""
    return text.replace("|", "\\|").replace("\n", " ")


def _prose(doc: str) -> str:
    """A docstring paragraph as one Markdown line (reST ````x```` → ```x```)."""
    return " ".join(re.sub(r"``(.+?)``", r"`\1`", doc).split())


def _markdown_type(schema: Mapping[str, Any]) -> str:
    """``schema`` as TypeScript in code spans, record names linked to their section."""
    out: list[str] = []
    for index, piece in enumerate(type_text(schema).split("\0")):
        if index % 2:
            out.append(_link(_code(piece), piece))
        elif piece.strip():
            lead = " " if piece.startswith(" ") else ""
            trail = " " if piece.endswith(" ") else ""
            out.append(f"{lead}{_code(piece.strip())}{trail}")
        else:
            out.append(piece)
    return "".join(out)


def _header() -> Iterator[str]:
    yield "# API reference"
    yield ""
    yield (
        f"Generated from `system/describe` by `{REGENERATE}`; do not edit it by hand "
        "(`tests/actors/cli/test_api_doc.py` fails when it is out of date)."
    )
    yield ""
    yield (
        "Every endpoint of `agent-actors serve`: what it does, its arguments, result and "
        "errors, with one call from the shell and one from the TypeScript client. How calls "
        "travel (frames, deadlines, cancellation, the `details` of each error) is "
        "[the wire protocol](protocol.md)."
    )
    yield ""


def _contents(
    namespaces: Mapping[str, list[dict[str, Any]]], defs: Mapping[str, Any]
) -> Iterator[str]:
    yield "## Contents"
    yield ""
    yield f"- {_link('Reading this page', 'Reading this page')}"
    for namespace, members in namespaces.items():
        methods = ", ".join(
            _link(_code(str(e["name"]).split("/", 1)[1]), _code(str(e["name"]))) for e in members
        )
        yield f"- {_link(_code(namespace), _code(namespace))}: {methods}"
    yield f"- {_link('Error codes', 'Error codes')}"
    names = ", ".join(_link(_code(name), _code(name)) for name in _sorted_names(defs))
    yield f"- {_link('Types', 'Types')}: {names}"
    yield ""


def _reading() -> Iterator[str]:
    yield "## Reading this page"
    yield ""
    yield (
        "- **Types** are written as TypeScript: `T[]` is an array, `Record<string, T>` a map, "
        '`A | B` either, `"text"` exactly that string, `null` msgpack nil and `any` any '
        "value. `integer` is a whole `number`: the server refuses a float where it expects "
        "an integer, even `2.0` ([protocol §19](protocol.md#19-checklist-for-a-new-client)). "
        "Record names link to [Types](#types). An argument or field that is not required "
        "may be left out."
    )
    yield (
        "- **Mutates** `true`: the call runs alone on its agent, in arrival order; `false`: "
        "it runs alongside the agent's other read-only calls "
        "([protocol §14](protocol.md#14-agents-the-agent-lookup-and-scheduling)). For an "
        "endpoint that takes no agent the flag is informative only."
    )
    yield (
        f"- **Errors** are the codes a call may end with; [Error codes](#{_ERRORS_ANCHOR}) "
        "says what each means, whether the call took effect and whether to retry."
    )
    yield ""
    yield (
        "The examples call a server on `tcp://127.0.0.1:7555` (`agent-actors serve "
        "--endpoint tcp://127.0.0.1:7555`). `$AGENT` is an agent's id, `$SOURCE` another "
        "session's, and `$PWD` a project directory; in the shell they come from (with "
        "`jq`):"
    )
    yield ""
    yield "```sh"
    for name, title in (("AGENT", "Refactor the parser"), ("SOURCE", "Parser notes")):
        create = shell_line("agents/create", {"title": title, "cwd": CWD}, agent=False, wrap=False)
        yield f"{name}=$({create} | jq -r .agentId)"
    yield "```"
    yield ""
    yield (
        "The shell examples use `agent-actors call ENDPOINT METHOD [--agent ID] key=text "
        "key:=json` ([README](../README.md#using-it)); the TypeScript ones use the client of "
        "[`clients/typescript/`](../clients/typescript/README.md), set up as:"
    )
    yield ""
    yield "```ts"
    yield 'import { connect } from "agent-actors-client";'
    yield ""
    yield 'const client = await connect("tcp://127.0.0.1:7555");'
    for variable, title in (("agentId", "Refactor the parser"), ("sourceId", "Parser notes")):
        target = "agentId" if variable == "agentId" else f"agentId: {variable}"
        yield f"const {{ {target} }} = await client.call<{{ agentId: string }}>("
        yield f'  "agents/create", {{ title: "{title}", cwd: process.cwd() }});'
    yield "```"
    yield ""
    yield (
        "`client.agent(agentId).namespace.method(…)` takes the arguments in the order of the "
        "table, without `agentId`; `client.call(endpoint, args)` takes them by name."
    )
    yield ""


def _namespace(namespace: str, members: Sequence[dict[str, Any]]) -> Iterator[str]:
    yield f"## {_code(namespace)}"
    yield ""
    if namespace in NAMESPACES:
        yield NAMESPACES[namespace]
        yield ""
    for endpoint in members:
        yield from _endpoint(endpoint)


def _endpoint(endpoint: Mapping[str, Any]) -> Iterator[str]:
    name = str(endpoint["name"])
    params: list[dict[str, Any]] = list(endpoint.get("params", []))
    schema: Mapping[str, Any] = endpoint.get("schema", {})
    takes_agent = any(p.get("lookup") == "agent" for p in params)
    yield f"### {_code(name)}"
    yield ""
    yield _prose(str(endpoint.get("doc", ""))) or "(Not documented.)"
    yield ""
    yield f"**Mutates:** {_mutates(bool(endpoint.get('mutates')), takes_agent)}"
    yield ""
    yield from _arguments(params, schema.get("args", {}))
    yield f"**Result:** {_markdown_type(schema.get('result', {}))}"
    yield ""
    yield f"**Errors:** {', '.join(_error_link(str(c)) for c in endpoint.get('errors', []))}"
    yield ""
    yield from _examples(name, params, takes_agent)


def _mutates(mutates: bool, takes_agent: bool) -> str:
    if not takes_agent:
        return f"`{str(mutates).lower()}` (takes no agent, so the flag is informative only)."
    if mutates:
        return "`true`: runs alone on its agent, in arrival order."
    return "`false`: runs alongside the agent's other read-only calls."


def _arguments(params: Sequence[Mapping[str, Any]], args: Mapping[str, Any]) -> Iterator[str]:
    if not params:
        yield "**Arguments:** none."
        yield ""
        return
    properties: Mapping[str, Any] = args.get("properties", {})
    yield "**Arguments:**"
    yield ""
    yield "| name | type | required | notes |"
    yield "|---|---|---|---|"
    for param in params:
        pname = str(param["name"])
        prop: Mapping[str, Any] = properties.get(pname, {})
        notes = _constraints(prop)
        if param.get("lookup") == "agent":
            notes.append("the agent: `--agent` in the shell, filled in by `client.agent(id)`")
        if prop.get("description"):
            notes.append(_prose(str(prop["description"])))
        kind = _markdown_type(prop) if prop else _code(str(param.get("type", "any")))
        required = "yes" if param.get("required") else "no"
        yield f"| {_code(pname)} | {_cell(kind)} | {required} | {_cell('; '.join(notes))} |"
    yield ""


def _constraints(schema: Mapping[str, Any]) -> list[str]:
    """``≥ 0``, ``≤ 1000``, … from the bounds of ``schema`` or of its alternatives."""
    found: list[str] = []
    for part in [schema, *schema.get("anyOf", [])]:
        low, high = part.get("minimum"), part.get("maximum")
        safe = 2**53 - 1
        if low == -safe and high == safe:
            found.append("a safe integer (±(2^53 − 1))")
            continue
        for key, sign in (
            ("minimum", "≥"),
            ("exclusiveMinimum", ">"),
            ("maximum", "≤"),
            ("exclusiveMaximum", "<"),
        ):
            if key in part:
                value = part[key]
                shown = "2^53 − 1" if value == safe else f"{value:g}"
                found.append(f"{sign} {shown}")
    return found


def _error_link(code: str) -> str:
    if code in CODE_MEANINGS:
        return f"[{_code(code)}](#{_ERRORS_ANCHOR})"
    if code in SESSION_REFERENCE_MEANINGS:
        return f"[{_code(code)}](#{_SESSION_REFERENCE_ANCHOR})"
    return _code(code)


def _examples(name: str, params: Sequence[Mapping[str, Any]], takes_agent: bool) -> Iterator[str]:
    example = EXAMPLES.get(name)
    if example is None:
        yield ("**Example:** none yet (add one to `EXAMPLES` in `actors/cli/_api_examples.py`).")
        yield ""
        return
    yield f"**Example:** {example.note}".rstrip()
    yield ""
    yield "```sh"
    yield shell_line(name, example.args, agent=takes_agent)
    yield "```"
    yield ""
    yield "```ts"
    order = [str(p["name"]) for p in params if p.get("lookup") != "agent"]
    yield call_snippet(name, example.args, order, agent=takes_agent)
    yield "```"
    yield ""


def _error_codes() -> Iterator[str]:
    yield "## Error codes"
    yield ""
    yield (
        "What each code an endpoint lists means, whether the call took effect, and what to "
        "do, for one server process and for `serve --workers` alike "
        "([protocol §12.2](protocol.md#122-every-code) lists every code and its `details`, "
        "[§12.3](protocol.md#123-what-a-terminal-frame-says-about-the-calls-effect) each "
        "mode). A call whose outcome is unknown is safe to retry only with the same "
        "`idempotencyKey` ([§15.4](protocol.md#154-idempotency-keys-for-the-session-endpoints)"
        "), which the session writes and `agents/create` take. Every call may also fail "
        "before it is sent, in the client (`too-large`, `arguments-invalid`, `unavailable`)."
    )
    yield ""
    yield from _code_table(CODE_MEANINGS)
    yield "### Session-reference codes"
    yield ""
    yield (
        "Upstream DSH's codes, passed through unchanged with upstream's message; the "
        "`sessionReferenceResolver/*` endpoints raise them, and none of those changes a "
        "session."
    )
    yield ""
    yield from _code_table(SESSION_REFERENCE_MEANINGS)


def _code_table(meanings: Mapping[str, CodeMeaning]) -> Iterator[str]:
    yield "| code | means | took effect | what to do |"
    yield "|---|---|---|---|"
    for code, meaning in meanings.items():
        cells = (_code(code), meaning.means, meaning.effect, meaning.then)
        yield "| " + " | ".join(_cell(c) for c in cells) + " |"
    yield ""


def _sorted_names(defs: Mapping[str, Any]) -> list[str]:
    return sorted(defs, key=lambda n: (n.lower(), n))


def _types(defs: Mapping[str, Any]) -> Iterator[str]:
    yield "## Types"
    yield ""
    yield (
        "The records, unions and enumerations the endpoints use, as they travel: maps with "
        "camelCase keys, listed in the order the server writes them. A field that is not "
        "required is left out rather than sent as nil; a `null` in its type means it may be "
        "nil when present."
    )
    yield ""
    for name in _sorted_names(defs):
        schema: Mapping[str, Any] = defs[name]
        yield f"### {_code(name)}"
        yield ""
        if schema.get("description"):
            yield _prose(str(schema["description"]))
            yield ""
        properties: Mapping[str, Any] | None = schema.get("properties")
        if properties is None:
            yield f"One of: {_markdown_type({k: v for k, v in schema.items() if k != 'title'})}"
            yield ""
            continue
        if not properties:
            yield "An empty map."
            yield ""
            continue
        required = set(schema.get("required", []))
        yield "| field | type | required | notes |"
        yield "|---|---|---|---|"
        for field, prop in properties.items():
            notes = _constraints(prop)
            if prop.get("description"):
                notes.append(_prose(str(prop["description"])))
            cells = (
                _code(field),
                _markdown_type(prop),
                "yes" if field in required else "no",
                "; ".join(notes),
            )
            yield "| " + " | ".join(_cell(c) for c in cells) + " |"
        yield ""


def main() -> int:
    """Print ``docs/api.md`` for the endpoints of this package's server."""
    from actors._serve import describe_builtin

    sys.stdout.write(render_api_markdown(describe_builtin()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
