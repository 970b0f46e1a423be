"""docs/api.md: generated from system/describe, current, complete, and its examples run."""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio

from actors._serve import describe_builtin
from actors.cli._api_examples import (
    AGENT,
    CODE_MEANINGS,
    CWD,
    EXAMPLES,
    SESSION_REFERENCE_MEANINGS,
    SOURCE,
    Placeholder,
)
from actors.cli._api_markdown import REGENERATE, heading_anchor, render_api_markdown
from actors.cli._api_snippets import ENDPOINT, call_snippet, shell_line, type_text
from actors.cli._call import parse_items
from wire import open_client

ROOT = Path(__file__).resolve().parents[3]
API_DOC = ROOT / "docs" / "api.md"
FENCED = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
LINK = re.compile(r"\]\(([^)\s]*)\)")
CODE = re.compile(r"`[^`\n]*`")


@pytest.fixture(scope="module")
def description() -> dict[str, Any]:
    """What system/describe of this package's server says."""
    return describe_builtin()


@pytest.fixture(scope="module")
def document() -> str:
    """The committed docs/api.md."""
    return API_DOC.read_text(encoding="utf-8")


def sections(markdown: str) -> dict[str, str]:
    """``### `title` `` heading text → the section's body up to the next heading."""
    parts = re.split(r"^#{2,3} `([^`]+)`\n", markdown, flags=re.M)
    return {
        parts[i]: re.split(r"^## ", parts[i + 1], flags=re.M)[0] for i in range(1, len(parts), 2)
    }


def test_the_document_is_current(description: dict[str, Any], document: str) -> None:
    """docs/api.md is exactly what render_api_markdown makes of describe_builtin()."""
    expected = render_api_markdown(description)
    if document != expected:
        diff = difflib.unified_diff(
            document.splitlines(), expected.splitlines(), "docs/api.md", "rendered", lineterm=""
        )
        shown = "\n".join(list(diff)[:40])
        pytest.fail(f"docs/api.md is out of date; regenerate it with `{REGENERATE}`\n{shown}")


def test_every_endpoint_is_documented(description: dict[str, Any], document: str) -> None:
    """Each endpoint has its arguments, result, every error code and both examples."""
    found = sections(document)
    for endpoint in description["endpoints"]:
        name = endpoint["name"]
        body = found.get(name)
        assert body is not None, f"no section for {name}"
        for param in endpoint["params"]:
            assert f"| `{param['name']}` |" in body, f"{name}: argument {param['name']}"
        if not endpoint["params"]:
            assert "**Arguments:** none." in body
        assert "**Result:** " in body, name
        errors = next(line for line in body.splitlines() if line.startswith("**Errors:**"))
        for code in endpoint["errors"]:
            assert f"`{code}`" in errors, f"{name}: error {code}"
        blocks = dict(FENCED.findall(body))
        takes_agent = any(p.get("lookup") == "agent" for p in endpoint["params"])
        command = f"agent-actors call {ENDPOINT} {name}" + (
            " --agent $AGENT" if takes_agent else ""
        )
        assert blocks["sh"].startswith(command), name
        namespace, method = name.split("/")
        if takes_agent:
            assert f"client.agent(agentId).{namespace}.{method}(" in blocks["ts"], name
        else:
            assert "client.call(" in blocks["ts"], name
            assert f'"{name}"' in blocks["ts"], name


def test_every_type_and_code_is_explained(description: dict[str, Any], document: str) -> None:
    """Every record of $defs has a section and every error code a meaning."""
    found = sections(document)
    for name in description["$defs"]:
        assert name in found, f"no section for type {name}"
    codes = {code for endpoint in description["endpoints"] for code in endpoint["errors"]}
    unexplained = codes - set(CODE_MEANINGS) - set(SESSION_REFERENCE_MEANINGS)
    assert not unexplained


def test_examples_are_written_for_exactly_the_endpoints(description: dict[str, Any]) -> None:
    """The example table has one entry per endpoint, using only declared arguments."""
    params = {e["name"]: {p["name"] for p in e["params"]} for e in description["endpoints"]}
    assert set(EXAMPLES) == set(params)
    for name, example in EXAMPLES.items():
        assert set(example.args) <= params[name] - {"agentId"}, name


def test_links_inside_the_documents_resolve(document: str) -> None:
    """Every link of docs/api.md names a heading that exists, here or in the linked file."""
    anchors: dict[Path, set[str]] = {}

    def anchors_of(path: Path) -> set[str]:
        if path not in anchors:
            text = FENCED.sub("", path.read_text(encoding="utf-8"))
            headings = re.findall(r"^#+ (.+)$", text, re.M)
            anchors[path] = {heading_anchor(h) for h in headings}
            assert len(anchors[path]) == len(headings) or path != API_DOC, "duplicate headings"
        return anchors[path]

    for target in LINK.findall(CODE.sub("", FENCED.sub("", document))):
        file, _, fragment = target.partition("#")
        path = (API_DOC.parent / file).resolve() if file else API_DOC
        assert path.exists(), target
        if fragment:
            assert fragment in anchors_of(path), target


def resolve(value: Any, values: Mapping[str, str]) -> Any:
    """``value`` with each placeholder replaced by the reader's value for it."""
    if isinstance(value, Placeholder):
        return values[value.shell.lstrip("$")]
    if isinstance(value, Mapping):
        return {k: resolve(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, values) for v in value]
    return value


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_shell_examples_pass_the_example_arguments(name: str, tmp_path: Path) -> None:
    """The shell line, as bash splits and expands it, passes exactly the example's arguments."""
    project = tmp_path / "my project"
    project.mkdir()
    values = {"AGENT": "agent-1", "SOURCE": "source 2", "PWD": str(project)}
    line = shell_line(name, EXAMPLES[name].args, agent=True)
    # Print the words bash passes to the command, instead of calling a server.
    script = "agent-actors() { printf '%s\\0' \"$@\"; }\n" + line
    done = subprocess.run(
        ["bash", "-c", script],
        env={**os.environ, "AGENT": values["AGENT"], "SOURCE": values["SOURCE"]},
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    words = done.stdout.split("\0")[:-1]
    assert words[:5] == ["call", ENDPOINT, name, "--agent", "agent-1"]
    assert parse_items(words[5:]) == resolve(dict(EXAMPLES[name].args), values)


def test_typescript_text_of_schemas() -> None:
    """Schemas read as TypeScript: unions in arrays parenthesized, tuples, maps, binary."""
    assert type_text(
        {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "null"}]}}
    ) == ("(string | null)[]")
    assert (
        type_text({"type": "array", "prefixItems": [{"type": "integer"}, {}]}) == "[integer, any]"
    )
    assert type_text({"type": "object", "additionalProperties": {"$ref": "#/$defs/A"}}) == (
        "Record<string, \0A\0>"
    )
    assert type_text({"x-msgpack": "bin"}) == "Uint8Array"
    assert type_text({"enum": ["file", "directory"]}) == '"file" | "directory"'


def test_typescript_calls_are_positional_in_declaration_order() -> None:
    """A skipped optional argument is passed as undefined; agentless calls go by name."""
    assert call_snippet("a/b", {"c": 1}, ["a", "b", "c"], agent=True) == (
        "const result = await client.agent(agentId).a.b(undefined, undefined, 1);"
    )
    assert call_snippet("a/b", {"cwd": CWD}, ["cwd"], agent=False) == (
        'const result = await client.call("a/b", { cwd: process.cwd() });'
    )
    with pytest.raises(ValueError, match="not parameters"):
        call_snippet("a/b", {"x": 1}, ["a"], agent=True)


def shell_examples(document: str) -> list[str]:
    """The shell blocks of docs/api.md that call a server."""
    return [
        body
        for lang, body in FENCED.findall(document)
        if lang == "sh" and "agent-actors call" in body
    ]


async def test_shell_examples_run(
    server_process: tuple[trio.Process, str], tmp_path: Path, document: str
) -> None:
    """Every `agent-actors call` example of docs/api.md exits 0 against a real server and
    prints JSON, with $AGENT, $SOURCE and $PWD set up as the document says."""
    _, address = server_process
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print('hello')\n")
    with trio.fail_after(30):
        async with open_client(address) as client:
            agent = await client.call(
                "agents/create", {"title": "Refactor the parser", "cwd": str(project)}
            )
            source = await client.call(
                "agents/create", {"title": "Parser notes", "cwd": str(project)}
            )
            message = EXAMPLES["sessions/append"].args["events"]
            await client.call("sessions/append", {"agentId": source["agentId"], "events": message})
    env = {**os.environ, AGENT.shell[1:]: agent["agentId"], SOURCE.shell[1:]: source["agentId"]}
    # The console script sits beside the interpreter when the project is installed; else the
    # same command is `python -m actors`.
    bin_dir = Path(sys.executable).parent
    prelude = "set -euo pipefail\n"
    if not (bin_dir / "agent-actors").exists():
        prelude += f'agent-actors() {{ {shlex.quote(sys.executable)} -m actors "$@"; }}\n'
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    blocks = shell_examples(document)
    assert len(blocks) == len(EXAMPLES) + 1  # one per endpoint, and the setup
    if shutil.which("jq", path=env["PATH"]) is None:
        blocks = [b for b in blocks if "| jq" not in b]  # only the setup uses jq
    failures: list[str] = []
    limiter = trio.CapacityLimiter(2)

    async def run(block: str) -> None:
        async with limiter:
            done = await trio.run_process(
                ["bash", "-c", prelude + block.replace(ENDPOINT, address)],
                cwd=project,
                env=env,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
        if done.returncode != 0:
            failures.append(f"{block}exit {done.returncode}: {done.stderr.decode()}")
        elif block.startswith("agent-actors call"):
            json.loads(done.stdout)

    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            for block in blocks:
                nursery.start_soon(run, block)
    assert not failures, "\n".join(failures)
