"""Every Python example of the documentation runs as written against a real server.

The ```` ```python ```` blocks of ``README.md``, ``SECURITY.md`` and ``docs/*.md`` are run one
by one, each in its own Python process, against a fresh ``agent-actors serve`` process. The
conventions (also in ``CONTRIBUTING.md``):

- An example reaches the server at ``tcp://127.0.0.1:7555``; the test puts its own server's
  address in place of that string.
- An example that calls ``client_security`` runs against a CURVE server, from a directory that
  holds the server's ``server.pub`` and the key pair ``alice.key`` of a client with the
  ``write`` role (the files of ``agent-actors keys server --dir . && … keys alice --dir .``).
- A fragment that cannot run alone is fenced ```` ```python no-run ````, and the text around
  it says why; it is still checked for private imports.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from actors import generate_key_files
from tests._processes import reap

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = (ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").glob("*.md")))
#: The address examples are written against; replaced by the test server's.
EXAMPLE_ENDPOINT = "tcp://127.0.0.1:7555"
NO_RUN = "no-run"
#: An import of a private module (``actors._keys``, ``wire._client``, ``actors.store._state``).
PRIVATE_IMPORT = re.compile(r"\b(?:actors|wire)(?:\.[a-z]\w*)*\._\w+")
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
#: Seconds one example may take, its server's start included.
EXAMPLE_TIMEOUT = 60


@attrs.frozen(kw_only=True)
class Snippet:
    """One fenced Python block of a document."""

    path: Path
    #: Line of the opening fence (1-based).
    line: int
    code: str
    runnable: bool

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def python_blocks(path: Path, text: str) -> list[Snippet]:
    """The fenced blocks of ``text`` whose info string starts with ``python``.

    A fence may be indented (inside a list item); its indentation is removed from the block's
    lines. A block closes at a fence of the same character at least as long.
    """
    found: list[Snippet] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        index += 1
        if opening is None:
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        words = opening["info"].split()
        start, body = index, []
        while index < len(lines):
            closing = _FENCE.match(lines[index])
            if (
                closing is not None
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            body.append(lines[index][indent:] if lines[index][:indent].isspace() else lines[index])
            index += 1
        index += 1
        if words and words[0] == "python":
            found.append(
                Snippet(
                    path=path,
                    line=start,
                    code="\n".join(body) + "\n",
                    runnable=NO_RUN not in words[1:],
                )
            )
    return found


SNIPPETS = [
    snippet for path in DOCUMENTS for snippet in python_blocks(path, path.read_text("utf-8"))
]


def test_blocks_are_found_with_their_lines_and_markers() -> None:
    """The extractor finds python blocks (indented ones too) at their fence's line, skips
    other languages, and honours the no-run marker."""
    text = "\n".join(
        [
            "# Title",
            "```python",
            "print(1)",
            "```",
            "```sh",
            "echo no",
            "```",
            "- a list item:",
            "",
            "  ```python no-run",
            "  fragment(",
            "  ```",
            "````python",
            "```",
            "````",
        ]
    )
    blocks = python_blocks(ROOT / "README.md", text)
    assert [(b.where, b.code, b.runnable) for b in blocks] == [
        ("README.md:2", "print(1)\n", True),
        ("README.md:10", "fragment(\n", False),
        ("README.md:13", "```\n", True),
    ]


def test_the_readme_has_runnable_examples() -> None:
    """README.md's Python examples are found and none of them is excused from running."""
    readme = [s for s in SNIPPETS if s.path.name == "README.md"]
    assert len(readme) >= 3
    assert all(s.runnable for s in readme)


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.where for s in SNIPPETS])
def test_examples_import_only_the_public_api(snippet: Snippet) -> None:
    """No example imports a private module: what it shows is importable from ``actors`` and
    ``wire`` (or a public subpackage)."""
    private = sorted(set(PRIVATE_IMPORT.findall(snippet.code)))
    assert not private, f"{snippet.where}: the example uses private modules {private}"


@asynccontextmanager
async def example_server(work: Path, *, curve: bool) -> AsyncIterator[str]:
    """A real ``agent-actors serve`` on an ipc endpoint under ``work``; with ``curve``, CURVE
    with ``work/server.key`` and a client ``work/alice.key`` allowed to write."""
    from actors.cli._demo import start_server_process

    extra: list[str] = []
    if curve:
        server_key, _ = generate_key_files(work, "server")
        _, alice_public = generate_key_files(work, "alice")
        public = alice_public.read_text("utf-8").split('"')[-2]
        clients = work / "clients.toml"
        clients.write_text(f'[clients.alice]\nkey = "{public}"\nrole = "write"\n', "utf-8")
        clients.chmod(0o600)
        extra = ["--curve", str(server_key), "--clients", str(clients)]
    process, addresses = await start_server_process(
        f"ipc://{work}/server.sock", work / "data", extra=extra
    )
    try:
        yield addresses[0]
    finally:
        await reap(process)


runnable = [s for s in SNIPPETS if s.runnable]


@pytest.mark.parametrize("snippet", runnable, ids=[s.where for s in runnable])
async def test_example_runs(snippet: Snippet, tmp_path: Path) -> None:
    """The example exits 0 in its own Python process against a fresh real server."""
    work = tmp_path / "work"
    work.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("AGENT_ACTORS_")  # the example's keys are its own arguments
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with trio.fail_after(EXAMPLE_TIMEOUT):
        async with example_server(work, curve="client_security" in snippet.code) as address:
            script = work / "example.py"
            script.write_text(snippet.code.replace(EXAMPLE_ENDPOINT, address), "utf-8")
            done = await trio.run_process(
                [sys.executable, str(script)],
                cwd=work,
                env=env,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    assert done.returncode == 0, (
        f"{snippet.where}: the example exited with status {done.returncode}\n"
        f"--- stdout ---\n{done.stdout.decode(errors='replace')}"
        f"--- stderr ---\n{done.stderr.decode(errors='replace')}"
    )
