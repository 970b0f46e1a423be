"""Sessions listed by their header alone: the store's view of a log whose body does not load
(issue 21). Their rows come from the index; a load fails with the loader's reason; once the
log loads, its row is rebuilt from it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from actors.session_log import log_path
from tests.actors.store.test_session_store import open_services
from wire import InternalError

TITLE = {"type": "session/title", "seq": 0, "time": 1, "data": {"title": "Fixed", "messageSeqs": [],
         "source": {"kind": "user"}}}  # fmt: skip


def write_log(path: Path, version: int) -> None:
    header = {"type": "session", "version": version, "id": "s", "createdAt": 1, "cwd": "/w",
              "delegationDepth": 0}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(header) + "\n" + json.dumps(TITLE) + "\n", "utf-8")


async def test_a_listed_body_fails_to_load_then_loads_once_repaired(tmp_path: Path) -> None:
    """A version-1 log is listed (a row with its reason, no title) and its load fails with the
    loader's words; rewritten as version 0 with the same size and mtime, it loads, and its row
    gets its title and loses the reason although the indexer's change check cannot see it."""
    root = tmp_path / "dsh"
    path = log_path(root, "/w", "s", "none")
    write_log(path, version=1)
    services = await open_services(tmp_path / "data", sessions_dir=root)
    try:
        store = services.directory
        await store.refresh_index()
        row = services.cache.get("s")
        assert row is not None and row.title is None
        assert row.load_error == (
            'session "s" uses log format v1, but this harness reads only v0: the log was written '
            "by a newer harness — upgrade the harness to open it"
        )
        with pytest.raises(
            InternalError, match=r'^failed to inspect session "s": session "s" uses log format v1, '
        ):
            await store.load("s")
        stat = path.stat()
        write_log(path, version=0)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert path.stat().st_size == stat.st_size
        assert await store.load("s") is not None
        row = services.cache.get("s")
        assert row is not None and (row.title, row.load_error) == ("Fixed", None)
    finally:
        await services.aclose()
