"""`agent-actors serve --sessions DIR`: an existing DSH sessions directory served by a real
server process, read-only unless `--writable` (issue 3, item 5)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from actors.cli._demo import start_server_process
from actors.session_log._reader import load_session
from tests.actors.test_session_service import wire_events
from tests.system.test_session_references_remote import place
from wire import ErrorCode, UnauthorizedError, open_client

FIXTURE = "apps__web__tests__snapshots__approval-composer__session.jsonl"


@asynccontextmanager
async def serving(tmp: Path, root: Path, *flags: str) -> AsyncIterator[str]:
    process, [address] = await start_server_process(
        f"ipc://{tmp}/server.sock", tmp / "data", extra=["--sessions", str(root), *flags]
    )
    try:
        yield address
    finally:
        process.terminate()
        with trio.move_on_after(10, shield=True):
            await process.wait()


async def test_served_directory_is_read_only_unless_writable(tmp_path: Path) -> None:
    """Without --writable the DSH log is read but an append is `unauthorized` and the file is
    untouched; with --writable the same append lands in the DSH log itself."""
    root = tmp_path / "dsh"
    agent, path = place(root, FIXTURE)
    before = path.read_bytes()
    captured = load_session(path).captured_through_seq

    async with serving(tmp_path / "ro", root) as address, open_client(address) as client:
        snapshot = await client.call("sessions/snapshot", {"agentId": agent})
        assert snapshot["capturedThroughSeq"] == captured
        with pytest.raises(UnauthorizedError) as refused:
            await client.call("sessions/append", {"agentId": agent, "events": wire_events(1)})
        assert refused.value.code is ErrorCode.UNAUTHORIZED
        assert "--writable" in refused.value.message
    assert path.read_bytes() == before

    async with serving(tmp_path / "rw", root, "--writable") as address:
        async with open_client(address) as client:
            appended = await client.call(
                "sessions/append", {"agentId": agent, "events": wire_events(1)}
            )
            assert min(appended["seqs"]) > captured
    assert path.read_bytes().startswith(before)
    assert load_session(path).captured_through_seq == max(appended["seqs"])
