"""Real DSH session logs for the load benchmark's server: the sources ``prepare`` references.

The logs are copied, at run time, from a directory of raw DSH logs (by default the 169 real
fixtures in ``../shared/fixtures/dsh-sessions``; never into the repository) into the DSH layout
under the run's temporary directory, and indexed into the server's data directory before the
server starts, so the server does not index during a measured phase. ``agent-actors serve
--sessions`` then serves them read-only: each is an agent whose log is loaded when it is first
read. Logs the index rejects (upstream's loader rejects ten of the fixtures) are left out of the
workload, since a reference to them fails by design.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from actors._store_services import CACHE_NAME
from actors.session_log import log_path
from actors.store import ProjectionCache, index_sessions
from bench._common import BenchError

__all__ = ["FIXTURES", "SourceSessions", "place_sessions", "size_summary"]

_CHECKOUT = Path(__file__).resolve().parents[1]
#: The real DSH session logs shipped beside the project (see ``../shared/fixtures/README.md``).
FIXTURES = _CHECKOUT.parent / "shared" / "fixtures" / "dsh-sessions"


@attrs.frozen(kw_only=True)
class SourceSessions:
    """Sessions placed for one run."""

    #: The directory they were copied from.
    origin: Path
    #: The DSH layout root the server serves (``--sessions``).
    root: Path
    #: Ids of the sessions the index accepted, in file-name order of the originals.
    ids: tuple[str, ...]
    #: Size in bytes of each accepted log (same order as ``ids``).
    sizes: tuple[int, ...]
    #: Logs found but not served: unreadable header, duplicate id, or rejected by the index.
    rejected: int

    def describe(self) -> dict[str, Any]:
        """What the report says about them."""
        # Relative to the checkout: a report names no path of the machine it ran on.
        origin = os.path.relpath(self.origin, _CHECKOUT)
        return {"origin": origin, "rejected": self.rejected, **size_summary(self.sizes)}


def size_summary(sizes: Sequence[int]) -> dict[str, Any]:
    """``sessions``, ``totalBytes`` and the p50 / p90 / max log size in bytes."""
    ordered = sorted(sizes)
    if not ordered:
        return {"sessions": 0, "totalBytes": 0, "p50Bytes": None, "p90Bytes": None}

    def at(fraction: float) -> int:
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]

    return {
        "sessions": len(ordered),
        "totalBytes": sum(ordered),
        "meanBytes": round(statistics.fmean(ordered)),
        "p50Bytes": at(0.5),
        "p90Bytes": at(0.9),
        "maxBytes": ordered[-1],
    }


def _header(path: Path) -> dict[str, Any] | None:
    with path.open("rb") as file:
        line = file.readline()
    try:
        header = json.loads(line)
    except ValueError:
        return None
    if not isinstance(header, dict) or header.get("type") != "session":
        return None
    if not isinstance(header.get("id"), str) or not header["id"]:
        return None
    cwd = header.get("cwd")
    return header if cwd is None or isinstance(cwd, str) else None


def place_sessions(origin: Path, root: Path, data: Path) -> SourceSessions:
    """Copy every raw (uncompressed) DSH log under ``origin`` into the layout at ``root`` and
    index them into ``data``'s projection cache.

    Raises:
        BenchError: ``origin`` holds no log the index accepts.
    """
    rejected = 0
    placed: dict[str, tuple[str, int]] = {}  # resolved copy -> (id, size)
    seen: set[str] = set()
    for path in sorted(origin.rglob("*.jsonl")):
        header = _header(path)
        if header is None or header["id"] in seen:
            rejected += 1
            continue
        seen.add(header["id"])
        target = log_path(root, header.get("cwd"), header["id"], "none")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        placed[str(target.resolve())] = (header["id"], path.stat().st_size)
    if not placed:
        raise BenchError(f"no raw DSH session logs (*.jsonl) under {origin}")
    data.mkdir(parents=True, exist_ok=True)
    cache = ProjectionCache.open(data / CACHE_NAME)
    try:
        summary = index_sessions(root, cache, compression="none")
    finally:
        cache.close()
    refused = {str(Path(r.path).resolve()) for r in summary.rejected}
    accepted = [entry for copy, entry in placed.items() if copy not in refused]
    if not accepted:
        raise BenchError(f"the index rejected every session log under {origin}")
    return SourceSessions(
        origin=origin,
        root=root,
        ids=tuple(i for i, _ in accepted),
        sizes=tuple(s for _, s in accepted),
        rejected=rejected + len(placed) - len(accepted),
    )
