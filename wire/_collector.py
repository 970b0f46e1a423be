"""How a server process's cycle collector runs: rarely, and never over what startup built.

CPython collects young container objects every 700 net allocations, and every so often
collects them all, the whole heap: the modules, classes and registries startup built, and the
sessions a server holds. A collection stops every call in flight. Calls in flight outlive the
young collections that run between a batch's arrival and its answers, so their objects are
promoted and count towards the next full collection. Measured on a 2-CPU VM: under echo load a
``serve`` process holding the real DSH fixtures ran a full collection every 1.5 to 3 s, 11 to
14 ms each (31 ms once), and the supervisor of ``serve --workers`` relaying echo calls ran 55
in six seconds, up to 17 ms each.

:func:`settle_collector`, called once a server is ready, freezes what startup built (it stays
alive for the life of the process, so scanning it again finds nothing) and collects young
objects every :data:`YOUNG_COLLECTION_THRESHOLD` net allocations. Calls free their objects by
reference counting as they end, so few are ever promoted, and the rare reference cycle is still
collected, later. Only the ``serve`` processes call it: a program that embeds a ``wire`` client
or server keeps the collector it set up.

Because a collection stops every call, operators see them: :func:`collector_families` (in every
server's ``system/metrics``) counts collections by generation, and once :func:`watch_collector`
ran (the ``serve`` processes call it when ready) it times each one as well.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from wire._metrics import Histogram, counter, gauge, histogram_family

__all__ = [
    "YOUNG_COLLECTION_THRESHOLD",
    "collector_families",
    "settle_collector",
    "watch_collector",
]

#: Net new container objects between two young collections: 256 calls in flight, each with
#: its few dozen objects, fit under it with room to spare (CPython's default is 700).
YOUNG_COLLECTION_THRESHOLD = 10_000
_DEFAULT_YOUNG_THRESHOLD = 700


def settle_collector() -> bool:
    """Collect once, freeze every object left (what startup built), and collect young objects
    every :data:`YOUNG_COLLECTION_THRESHOLD` net allocations from now on.

    Returns ``False``, changing nothing, where the process chose its own collector: it is
    disabled, or its young threshold is not CPython's default."""
    young, middle, old = gc.get_threshold()
    if not gc.isenabled() or young != _DEFAULT_YOUNG_THRESHOLD:
        return False
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, old)
    return True


class _Pauses:
    """A ``gc.callbacks`` hook: how long each collection stopped the process, by generation.

    Collections never overlap (each runs to its end holding the GIL, in whichever thread set it
    off), so one start time is enough."""

    def __init__(self) -> None:
        self.by_generation = [Histogram() for _ in gc.get_stats()]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.by_generation[info["generation"]].observe(time.perf_counter() - self._started)


_pauses: _Pauses | None = None


def watch_collector() -> None:
    """Time every collection of this process from now on (``gc_pause_seconds`` in
    :func:`collector_families`); calling it again changes nothing. A hook costs two clock
    readings per collection."""
    global _pauses
    if _pauses is None:
        _pauses = _Pauses()
        gc.callbacks.append(_pauses)


def collector_families() -> dict[str, Any]:
    """This process's cycle-collector metric families, as ``wire._metrics`` snapshots them."""
    families = {
        "gc_collections_total": counter(
            "Cycle collections, by generation (2 walks the whole heap).",
            ("generation",),
            [
                ((str(generation),), stats["collections"])
                for generation, stats in enumerate(gc.get_stats())
            ],
        ),
        "gc_frozen_objects": gauge(
            "Objects frozen out of every collection (what startup built).",
            (),
            [((), gc.get_freeze_count())],
        ),
    }
    if _pauses is not None:
        families["gc_pause_seconds"] = histogram_family(
            "How long each cycle collection stopped the process, by generation.",
            ("generation",),
            [
                ((str(generation),), pauses)
                for generation, pauses in enumerate(_pauses.by_generation)
            ],
        )
    return families
