"""``agent-actors schema``: TypeScript, JSON Schema and Markdown declarations of every
endpoint, from the installed package or a live server, printed or written with ``--out``."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trio
from referencing import Registry, Resource

from actors._serve import describe_builtin
from actors.cli._api_markdown import render_api_markdown
from actors.cli._schema import schema_document
from actors.cli._typescript import render_typescript
from wire import SCHEMA_DIALECT, SessionReferenceError, open_client

PACKAGE = "the installed agent-actors package"
DOCUMENT_URI = "urn:agent-actors:endpoints"


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actors", "schema", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def validator(document: dict[str, Any], endpoint: str, part: str) -> jsonschema.Validator:
    """A validator for one endpoint's ``args``/``result``/``errors`` inside the document."""
    registry: Registry[Any] = Registry().with_resource(
        DOCUMENT_URI, Resource.from_contents(document)
    )
    pointer = f"#/properties/{endpoint.replace('~', '~0').replace('/', '~1')}/properties/{part}"
    return jsonschema.Draft202012Validator({"$ref": f"{DOCUMENT_URI}{pointer}"}, registry=registry)


def test_typescript_from_the_package_printed_or_written(tmp_path: Path) -> None:
    """Without --endpoint the TypeScript declarations of the installed package are printed;
    with --out the same text is written to the file instead."""
    printed = run_cli("--format", "typescript")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == render_typescript(describe_builtin(), source=PACKAGE)
    assert "export interface SessionReferenceMentionCandidate {" in printed.stdout
    assert '"sessionReferenceResolver/candidates": {' in printed.stdout

    out = tmp_path / "endpoints.ts"
    written = run_cli("--out", str(out))
    assert written.returncode == 0, written.stderr
    assert written.stdout == ""
    assert f"wrote typescript declarations to {out}" in written.stderr
    assert out.read_text(encoding="utf-8") == printed.stdout


def test_jsonschema_is_one_valid_2020_12_document() -> None:
    """--format jsonschema prints one valid 2020-12 document: the shared $defs and, per
    endpoint, its args, result and errors schemas, which validate what they should."""
    printed = run_cli("--format", "jsonschema")
    assert printed.returncode == 0, printed.stderr
    document = json.loads(printed.stdout)
    assert document["$schema"] == SCHEMA_DIALECT
    jsonschema.Draft202012Validator.check_schema(document)
    described = describe_builtin()
    assert document["$defs"] == described["$defs"]
    assert list(document["properties"]) == [e["name"] for e in described["endpoints"]]
    for endpoint in described["endpoints"]:
        parts = document["properties"][endpoint["name"]]["properties"]
        assert parts["args"] == endpoint["schema"]["args"]
        assert parts["result"] == endpoint["schema"]["result"]
        for code in endpoint["errors"]:
            validator(document, endpoint["name"], "errors").validate(code)

    args = validator(document, "sessionReferenceResolver/prepare", "args")
    args.validate({"agentId": "a", "content": "x", "references": [{"sessionId": "s"}]})
    assert not args.is_valid({"agentId": "a", "content": "x", "references": [{"label": "l"}]})
    errors = validator(document, "sessionReferenceResolver/prepare", "errors")
    assert errors.is_valid("SESSION_REFERENCE_TOO_MANY")
    assert errors.is_valid("agent-busy")
    assert not errors.is_valid("SESSION_REFERENCE_NOPE")
    assert not validator(document, "fileReferences/list", "errors").is_valid(
        "SESSION_REFERENCE_TOO_MANY"
    )


def test_markdown_is_the_api_reference() -> None:
    """--format markdown prints the endpoint reference docs/api.md is made of."""
    printed = run_cli("--format", "markdown")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == render_api_markdown(describe_builtin())


async def test_live_server_declarations_and_real_answers(
    server_process: tuple[trio.Process, str], tmp_path: Path
) -> None:
    """--endpoint renders what the live server's system/describe says (the header names the
    server), and its real answers validate against the printed JSON Schema document."""
    _, address = server_process
    with trio.fail_after(30):
        async with open_client(address) as client:
            described = await client.call("system/describe")
    live_ts = await trio.to_thread.run_sync(lambda: run_cli("--endpoint", address))
    assert live_ts.returncode == 0, live_ts.stderr
    assert live_ts.stdout == render_typescript(described, source=f"the server at {address}")
    live = await trio.to_thread.run_sync(
        lambda: run_cli("--endpoint", address, "--format", "jsonschema", "--timeout", "20")
    )
    assert live.returncode == 0, live.stderr
    document = json.loads(live.stdout)
    assert document == schema_document(described, source=f"the server at {address}")
    assert f"from the server at {address};" in document["description"]

    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "main.py").write_text("print('hi')\n")
    with trio.fail_after(30):
        async with open_client(address) as client:
            source = await client.call("sessions/create", {"cwd": str(work)})
            await client.call("sessions/setTitle", {"agentId": source["sessionId"], "title": "S"})
            agent = (await client.call("sessions/create", {"cwd": str(work)}))["sessionId"]
            calls: list[tuple[str, dict[str, Any]]] = [
                ("sessionReferenceResolver/candidates", {"agentId": agent}),
                ("fileReferences/list", {"agentId": agent, "query": "src/"}),
                (
                    "sessionReferenceResolver/prepare",
                    {
                        "agentId": agent,
                        "content": "see @S",
                        "references": [{"sessionId": source["sessionId"], "label": "S"}],
                    },
                ),
            ]
            for name, args in calls:
                validator(document, name, "args").validate(args)
                result = await client.call(name, args)
                assert result
                validator(document, name, "result").validate(result)
            with pytest.raises(SessionReferenceError) as refused:
                await client.call(
                    "sessionReferenceResolver/prepare",
                    {"agentId": agent, "content": "x", "references": [{"sessionId": agent}]},
                )
    errors = validator(document, "sessionReferenceResolver/prepare", "errors")
    errors.validate(refused.value.code)


def test_unreachable_server_fails_with_exit_status_1(tmp_path: Path) -> None:
    """No server at the endpoint: the command says so on stderr, exits 1, prints nothing."""
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    silent = run_cli("--endpoint", f"tcp://127.0.0.1:{port}", "--timeout", "0.5")
    assert silent.returncode == 1
    assert silent.stderr.startswith(
        f"unavailable: no server answered at tcp://127.0.0.1:{port} within 0.5 s"
    )
    assert silent.stdout == ""
    missing = run_cli("--endpoint", f"ipc://{tmp_path}/nobody.sock")
    assert missing.returncode == 1
    assert "nobody.sock does not exist" in missing.stderr
    assert missing.stdout == ""
