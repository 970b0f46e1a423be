"""Fixtures of the store's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from actors._store_services import SessionServices, build_session_services


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[SessionServices]:
    """Session services over a fresh data directory, without the start-up re-index."""
    built = build_session_services(tmp_path / "data", index_on_start=False)
    try:
        yield built
    finally:
        await built.aclose()
