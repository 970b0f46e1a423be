"""The TypeScript renderer: how each JSON Schema shape is declared, how endpoints become the
typed proxy maps, and that the client's committed ``src/endpoints.ts`` is current."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from actors._serve import describe_builtin
from actors.cli._schema import render_schema
from actors.cli._typescript import render_typescript

ROOT = Path(__file__).resolve().parents[3]
CLIENT = ROOT / "clients" / "typescript"
COMMITTED = CLIENT / "src" / "endpoints.ts"
REGENERATE = "agent-actors schema --format typescript --out clients/typescript/src/endpoints.ts"

LONG_CODES = [f"SOMETHING_RATHER_LONG_ERROR_CODE_{n}" for n in range(4)]
#: Too long for `export type Medium = …;`, short enough for the line after it.
MEDIUM = [f"twenty-characters-{n:02}" for n in range(4)]
STRING = {"type": "string"}
DESCRIPTION: dict[str, Any] = {
    "protocol": 1,
    "endpoints": [
        {
            "name": "demo/find",
            "params": [
                {"name": "agentId", "type": "string", "required": True, "lookup": "agent"},
                {"name": "query", "type": "string", "required": True},
                {"name": "limit", "type": "integer", "required": False},
            ],
            "doc": "Find ``query``.",
            "errors": ["internal", "session-not-found", *LONG_CODES],
            "schema": {
                "args": {
                    "type": "object",
                    "properties": {
                        "agentId": STRING,
                        "query": STRING,
                        "limit": {"type": "integer"},
                    },
                },
                "result": {"type": "array", "items": {"$ref": "#/$defs/Everything"}},
                "errors": {"$ref": "#/$defs/LongCode"},
            },
        },
        {
            "name": "demo/gap",
            "params": [
                {"name": "first", "type": "string", "required": False},
                {"name": "second", "type": "bytes", "required": True},
            ],
            "doc": "",
            "errors": ["internal"],
            "schema": {
                "args": {
                    "type": "object",
                    "properties": {"first": STRING, "second": {"x-msgpack": "bin"}},
                },
                "result": {"type": "null"},
            },
        },
    ],
    "$defs": {
        "Everything": {
            "type": "object",
            "title": "Everything",
            "description": "Every shape, ``once``.",
            "properties": {
                "count": {"type": "integer", "minimum": 0},
                "ratio": {"type": "number"},
                "blob": {"x-msgpack": "bin"},
                "anything": {},
                "tags": {"type": "object", "additionalProperties": STRING},
                "kinds": {"type": "array", "items": {"$ref": "#/$defs/Kind"}},
                "nothing": {"type": "null"},
                "maybe": {"anyOf": [STRING, {"type": "null"}]},
                "mixed": {"type": "array", "items": {"anyOf": [STRING, {"type": "integer"}]}},
                "pair": {
                    "type": "array",
                    "prefixItems": [STRING, {"type": "boolean"}],
                    "items": False,
                },
                "version": {"const": 1},
                "note": {**STRING, "description": "A note."},
                "self": {"$ref": "#/$defs/Everything"},
            },
            "required": ["count", "ratio", "blob", "anything", "tags", "kinds", "nothing"],
            "additionalProperties": False,
        },
        "Kind": {"title": "Kind", "enum": ["file", "directory"]},
        "Shape": {"anyOf": [{"$ref": "#/$defs/Everything"}, {"$ref": "#/$defs/Kind"}]},
        "LongCode": {"title": "LongCode", "enum": LONG_CODES},
        "Medium": {"enum": MEDIUM},
    },
}


def rendered() -> str:
    return render_typescript(DESCRIPTION, source="a test")


def test_committed_endpoints_ts_is_current() -> None:
    """clients/typescript/src/endpoints.ts is what the schema command generates today."""
    expected = render_schema(
        describe_builtin(), "typescript", source="the installed agent-actors package"
    )
    committed = COMMITTED.read_text(encoding="utf-8")
    assert committed == expected, (
        f"{COMMITTED.relative_to(ROOT)} is out of date: run `{REGENERATE}` from the repository "
        "root (and commit it)"
    )


def test_records_become_interfaces_field_for_field() -> None:
    """A record is an interface: properties in order, `?` on the optional ones, JSDoc from the
    descriptions, and every JSON Schema shape as its TypeScript type."""
    assert (
        "/** Every shape, `once`. */\n"
        "export interface Everything {\n"
        "  count: number;\n"
        "  ratio: number;\n"
        "  blob: Uint8Array;\n"
        "  anything: unknown;\n"
        "  tags: Record<string, string>;\n"
        "  kinds: Kind[];\n"
        "  nothing: null;\n"
        "  maybe?: string | null;\n"
        "  mixed?: (string | number)[];\n"
        "  pair?: [item0: string, item1: boolean];\n"
        "  version?: 1;\n"
        "  /** A note. */\n"
        "  note?: string;\n"
        "  self?: Everything;\n"
        "}\n"
    ) in rendered()


def test_named_unions_and_enums_become_type_aliases() -> None:
    """Named unions and enums are `export type` unions, literals in double quotes; one too
    long for its line goes whole onto the next, or else one member per line, as prettier
    prints it."""
    text = rendered()
    assert 'export type Kind = "file" | "directory";\n' in text
    assert "export type Shape = Everything | Kind;\n" in text
    members = [f'"{c}"' for c in LONG_CODES]
    assert "export type LongCode =\n  | " + "\n  | ".join(members) + ";\n" in text
    medium = " | ".join(f'"{w}"' for w in MEDIUM)
    assert f"export type Medium =\n  {medium};\n" in text


def test_endpoints_map_follows_the_proxy_binding() -> None:
    """Endpoints drops the agent lookup (an agent proxy fills it), ServiceEndpoints keeps it
    positional; an optional parameter before a required one takes `undefined`; errors are the
    common codes, the rest literally and the endpoint's own set by name."""
    text = rendered()
    agent_map, service_map = text.split("export interface ServiceEndpoints {")
    assert (
        "  /** Find `query`. */\n"
        '  "demo/find": {\n'
        "    params: [query: string, limit?: number];\n"
        "    result: Everything[];\n"
        '    errors: CommonErrorCode | "session-not-found" | LongCode;\n'
        "  };\n"
    ) in agent_map
    assert "params: [agentId: string, query: string, limit?: number];" in service_map
    assert "params: [first: string | undefined, second: Uint8Array];" in agent_map
    assert 'export type CommonErrorCode = "internal";\n' in text


def test_output_is_deterministic_and_says_how_to_regenerate() -> None:
    """The same description renders the same text, under a header saying it is generated,
    from where, and how to regenerate it."""
    text = rendered()
    assert text == rendered()
    header = text.split("*/", 1)[0]
    assert "from a test" in header
    assert "Generated by `agent-actors schema --format typescript`: do not edit" in header


@pytest.mark.skipif(
    shutil.which("node") is None or not (CLIENT / "node_modules" / ".bin" / "prettier").exists(),
    reason="needs node and the client's dev dependencies (npm ci in clients/typescript)",
)
@pytest.mark.parametrize("which", ["test description", "installed package"])
def test_prettier_leaves_the_output_unchanged(which: str, tmp_path: Path) -> None:
    """The generated text is already formatted as the client's prettier settings format it."""
    description = DESCRIPTION if which == "test description" else describe_builtin()
    text = render_typescript(description, source="a test")
    path = tmp_path / "endpoints.ts"
    path.write_text(text, encoding="utf-8")
    formatted = subprocess.run(
        [str(CLIENT / "node_modules" / ".bin" / "prettier"), "--config",
         str(CLIENT / ".prettierrc.json"), str(path)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert formatted == text
