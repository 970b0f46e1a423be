"""Shared test fixtures: paths, and real server processes."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from tests._processes import reap

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "dsh-sessions"


@pytest.fixture
def dsh_fixtures() -> Path:
    """The real DSH session logs, or a skip when ../shared is absent."""
    if not FIXTURES.is_dir():
        pytest.skip(f"DSH fixtures not found at {FIXTURES}")
    return FIXTURES


@pytest.fixture
async def server_process(tmp_path: Path) -> AsyncIterator[tuple[trio.Process, str]]:
    """A real ``agent-actors serve`` child process on a fresh ipc endpoint."""
    from actors.cli._demo import start_server_process

    process, addresses = await start_server_process(
        f"ipc://{tmp_path}/server.sock", tmp_path / "data"
    )
    try:
        yield process, addresses[0]
    finally:
        await reap(process)


PYTHON = sys.executable
