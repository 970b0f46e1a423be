"""Endpoints for the wire tests that run a server (test_transport.py has its own, with tcp)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["inproc", "ipc"])
def inproc_or_ipc(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return {
        "inproc": f"inproc://test-detached-{id(tmp_path)}",
        "ipc": f"ipc://{tmp_path}/s.sock",
    }[request.param]


@pytest.fixture
def ipc(tmp_path: Path) -> str:
    return f"ipc://{tmp_path}/s.sock"
