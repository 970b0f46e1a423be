"""``fileReferences/list`` over the wire against a real server process: the typed proxy, shared
scans under caller cancellation, tool-result invalidation, escapes, bad arguments, and a quick
run of ``bench.files``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from actors._reference_services import SessionFileReferences
from actors.cli._demo import start_server_process
from actors.file_references import FileReferenceCandidate
from tests._processes import reap, run_bench
from wire import ArgumentsInvalidError, SessionNotFoundError, WireError, open_client

SHM = Path("/dev/shm")


async def make_agent(client: Any, cwd: Path, title: str = "files") -> str:
    created = await client.call("agents/create", {"cwd": str(cwd), "title": title})
    return str(created["agentId"])


@pytest.fixture
def fast_tmp(tmp_path: Path) -> Iterator[Path]:
    """A scratch directory on tmpfs when there is one (creating 30,000 files on a disk
    filesystem of a loaded VM takes ten times longer), else ``tmp_path``."""
    if not (SHM.is_dir() and os.access(SHM, os.W_OK)):
        yield tmp_path
        return
    scratch = Path(tempfile.mkdtemp(prefix="file-refs-", dir=SHM))
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture
async def full_tree_server(tmp_path: Path) -> AsyncIterator[str]:
    """A server whose ``[fileReferences]`` lifts the entry cap (``unlimitedEntries``), so a
    first query scans a whole large tree."""
    config = tmp_path / "server.toml"
    config.write_text("[fileReferences]\nunlimitedEntries = true\n", encoding="utf-8")
    process, addresses = await start_server_process(
        f"ipc://{tmp_path}/full.sock", tmp_path / "data", extra=["--config", str(config)]
    )
    try:
        yield addresses[0]
    finally:
        await reap(process)


def write_wide_tree(root: Path, directories: int = 30, subdirectories: int = 10) -> Path:
    """``directories x subdirectories`` folders of 100 empty files each; returns the one file
    that sorts last in breadth-first order (found only when the scan finished)."""
    for d in range(directories):
        for s in range(subdirectories):
            folder = root / f"d{d:02d}" / f"s{s}"
            folder.mkdir(parents=True)
            base = str(folder)
            for f in range(100):
                os.close(os.open(f"{base}/f{f:03d}.txt", os.O_CREAT | os.O_WRONLY, 0o644))
    last = root / f"d{directories - 1:02d}" / f"s{subdirectories - 1}" / "zz_last_target.py"
    last.touch()
    return last


async def test_typed_proxy_returns_file_candidates(
    server_process: tuple[trio.Process, str], tmp_path: Path
) -> None:
    """The typed proxy of SessionFileReferences gives FileReferenceCandidate records, both modes."""
    _, address = server_process
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "mailbox.py").write_text("x")
    (work / "src" / "mailbag.md").write_text("x")
    async with open_client(address) as client:
        with trio.fail_after(20):
            files = client.agent(await make_agent(client, work)).remote(SessionFileReferences)
            listed = await files.list("")
            found = await files.list("mailb")
            inside = await files.list("src/mailbo")
    assert listed == [FileReferenceCandidate("src", "directory")]
    assert found == [
        FileReferenceCandidate("src/mailbag.md", "file"),
        FileReferenceCandidate("src/mailbox.py", "file"),
    ]
    assert inside == [FileReferenceCandidate("src/mailbox.py", "file")]
    assert all(type(c) is FileReferenceCandidate for c in [*listed, *found, *inside])


async def test_cancelled_caller_leaves_the_shared_scan_running(
    full_tree_server: str, fast_tmp: Path
) -> None:
    """A caller cancelled during a first-query index build gets trio.Cancelled, while a
    concurrent caller for the same agent gets the result of the scan that kept going."""
    work = fast_tmp / "tree"
    last = write_wide_tree(work)  # 30,000 files: the unlimited scan takes a noticeable time
    async with open_client(full_tree_server) as client:
        agent = await make_agent(client, work)
        files = client.agent(agent).remote(SessionFileReferences)
        outcome: dict[str, Any] = {}

        async def cancelled_caller(scope: trio.CancelScope) -> None:
            with scope:
                try:
                    outcome["first"] = await files.list("zz_last")
                except trio.Cancelled:
                    outcome["first cancelled"] = True
                    raise

        async def other_caller() -> None:
            outcome["second"] = await files.list("zz_last")
            outcome["second at"] = time.monotonic()

        async def running_calls() -> int:
            stats = await client.call("system/stats")
            return int(stats["calls"]["running"]) - 1  # not this stats call

        with trio.fail_after(25):
            async with trio.open_nursery() as nursery:
                scope = trio.CancelScope()
                nursery.start_soon(cancelled_caller, scope)
                nursery.start_soon(other_caller)
                while await running_calls() < 2:
                    await trio.sleep(0.005)
                scope.cancel()
                cancelled_at = time.monotonic()
            while (await client.call("system/stats"))["cancelledTotal"] < 1:
                await trio.sleep(0.01)  # the server saw the cancel of the first caller
            again = await files.list("zz_last")
    assert outcome.get("first cancelled") is True
    assert "first" not in outcome
    expected = [FileReferenceCandidate(last.relative_to(work).as_posix(), "file")]
    assert outcome["second"] == expected
    # The answer came after the cancel: the scan was still running and was not stopped by it.
    assert outcome["second at"] > cancelled_at
    assert again == expected


def tool_turn(call_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A turn that calls a tool: the events before its result, and the result and turn end."""
    call = {"type": "tool-call", "id": call_id, "name": "write", "arguments": "{}"}
    model = {"kind": "model", "provider": "test", "model": "m"}
    before = [
        {"type": "turn/start", "data": {"turn": 1}},
        {"type": "step/start", "data": {"turn": 1, "step": 1}},
        {
            "type": "assistant/message",
            "surfaceOp": "append",
            "data": {
                "turn": 1,
                "step": 1,
                "message": {"id": "a1", "role": "assistant", "content": [call], "source": model},
            },
        },
        {
            "type": "tool/call",
            "data": {"turn": 1, "step": 1, "callId": call_id, "name": "write", "arguments": "{}"},
        },
    ]
    block = {
        "type": "tool-result",
        "toolCallId": call_id,
        "content": [{"type": "text", "text": "ok"}],
    }
    result = {
        "type": "tool/result",
        "surfaceOp": "append",
        "data": {
            "turn": 1,
            "step": 1,
            "message": {
                "id": "r1",
                "role": "user",
                "source": {"kind": "tool", "callId": call_id},
                "content": [block],
            },
        },
    }
    after = [
        result,
        {"type": "step/end", "data": {"turn": 1, "step": 1}},
        {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]
    return before, after


async def test_tool_result_refreshes_the_index(
    server_process: tuple[trio.Process, str], tmp_path: Path
) -> None:
    """A file created after the index was built stays invisible to global queries until the
    agent's session records a tool result; other events leave the index stale."""
    _, address = server_process
    work = tmp_path / "work"
    (work / "notes").mkdir(parents=True)
    (work / "notes" / "old.md").write_text("x")
    async with open_client(address) as client:
        with trio.fail_after(20):
            agent = await make_agent(client, work)
            files = client.agent(agent).remote(SessionFileReferences)
            assert await files.list("fresh") == []
            (work / "notes" / "fresh_output.txt").write_text("written by a tool")
            stale = await files.list("fresh")
            live = await files.list("notes/fre")  # directory mode is always live
            before, after = tool_turn("call-1")
            await client.call("sessions/append", {"agentId": agent, "events": before})
            still_stale = await files.list("fresh")
            await client.call("sessions/append", {"agentId": agent, "events": after})
            refreshed = await files.list("fresh")
    assert stale == [] and still_stale == []
    assert live == [FileReferenceCandidate("notes/fresh_output.txt", "file")]
    assert refreshed == [FileReferenceCandidate("notes/fresh_output.txt", "file")]


async def test_escapes_return_nothing(
    server_process: tuple[trio.Process, str], tmp_path: Path
) -> None:
    """Queries that leave the cwd (``..``, absolute paths, ``~``, a drive prefix, a symlink to
    outside) return an empty list over the wire and never name anything outside."""
    _, address = server_process
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "app.test.py").write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret-keys.txt").write_text("secret")
    (work / "escape").symlink_to(outside, target_is_directory=True)
    queries = [
        "../", "../outside/", "../outside/sec", "src/../../", "src/../../outside/",
        "..\\outside\\", "/", "/etc/", "/etc/pass", f"{outside}/", f"{outside}/sec",
        f"{tmp_path}/", "~/", "~root/", "~/.ssh/", "C:/", "C:\\Windows\\", "escape/",
        "escape/sec", "./escape/", "src/../escape/",
    ]  # fmt: skip
    async with open_client(address) as client:
        with trio.fail_after(20):
            agent = await make_agent(client, work)
            proxy = client.agent(agent).fileReferences
            answers = {query: await proxy.list(query) for query in queries}
            secret = await proxy.list("secret")
            dots = await proxy.list("..")  # global fuzzy, not navigation: inside only
    assert answers == {query: [] for query in queries}
    assert secret == []
    assert dots and all(not c["path"].startswith(("..", "/")) for c in dots)


async def test_bad_arguments_are_rejected(
    server_process: tuple[trio.Process, str], tmp_path: Path
) -> None:
    """Wrong argument types and missing or unknown arguments give arguments-invalid; an unknown
    agent gives session-not-found; the server keeps answering."""
    _, address = server_process
    (tmp_path / "a.py").write_text("x")
    async with open_client(address) as client:
        with trio.fail_after(20):
            agent = await make_agent(client, tmp_path)
            bad: list[dict[str, Any]] = [
                {"agentId": agent, "query": 5},
                {"agentId": agent, "query": None},
                {"agentId": agent, "query": ["a"]},
                {"agentId": agent, "query": b"a"},
                {"agentId": agent},
                {"agentId": agent, "query": "a", "limit": 3},
                {"agentId": 7, "query": "a"},
            ]
            errors: list[WireError] = []
            for args in bad:
                with pytest.raises(ArgumentsInvalidError) as info:
                    await client.call("fileReferences/list", args)
                errors.append(info.value)
            with pytest.raises(SessionNotFoundError):
                await client.call("fileReferences/list", {"agentId": "no-such-agent", "query": "a"})
            still = await client.agent(agent).fileReferences.list("a.p")
    assert all(error.code == "arguments-invalid" for error in errors)
    assert "query" in str(errors[0])
    assert still == [{"path": "a.py", "kind": "file"}]


def test_bench_quick_run(tmp_path: Path, fast_tmp: Path) -> None:
    """``python -m bench.files --quick`` writes its JSON report and PNG and prints the targets
    with PASS or MISS."""
    out = tmp_path / "files.json"
    report, stdout = run_bench(
        "bench.files", "--quick", "--tmp", str(fast_tmp), out=out, timeout=120
    )
    assert Path(report["png"]).read_bytes().startswith(b"\x89PNG")
    assert report["config"]["quick"] is True
    assert report["tree"]["files"] == report["config"]["files"]
    assert set(report["baseline"]) == {"osWalk", "osWalkPruned"}
    assert all(walk["medianSeconds"] > 0 for walk in report["baseline"].values())
    assert set(report["wire"]) == {"fullTree", "defaultCap"}
    typed = report["wire"]["fullTree"]["keystrokes"]
    # Every keystroke of the 10 queries (the empty query after "@" first) was answered.
    assert typed["count"] == sum(len(q) + 1 for q in report["config"]["queries"])
    assert 0 < typed["p50Us"] <= typed["p99Us"]
    index = report["service"]["firstQuery"]["fullTree"]["index"]
    assert index["entries"] > 0 and index["truncated"] is False
    assert [t["name"] for t in report["targets"]] == [
        "first query, full tree, service <= 1.5 x os.walk",
        "first query, full tree, wire <= 1.5 x os.walk",
        "keystroke p99, full tree, wire <= 10 ms",
        "keystroke p99, default cap, wire <= 10 ms",
    ]
    assert all(("PASS" if t["passed"] else "MISS") in stdout for t in report["targets"])


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("maxResults = 0", "file-reference-local: maxResults must be a positive safe integer"),
        ("maxEntries = 1.5", "file-reference-local: maxEntries must be a positive safe integer"),
        (
            'excludedDirectories = ["a/b"]',
            "file-reference-local: excludedDirectories entries must be non-empty directory "
            "basenames",
        ),
    ],
)
def test_invalid_config_stops_the_server_at_start(tmp_path: Path, table: str, message: str) -> None:
    """A real ``agent-actors serve`` with an invalid [fileReferences] value exits before
    serving, with upstream's message."""
    config = tmp_path / "bad.toml"
    config.write_text(f"[fileReferences]\n{table}\n")
    argv = [sys.executable, "-m", "actors", "serve", "--endpoint", f"ipc://{tmp_path}/s.sock"]
    argv += ["--data", str(tmp_path / "data"), "--config", str(config)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert result.stdout == ""
    assert message in result.stderr
