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
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_COLLECTION_THRESHOLD", "settle_collector"]

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
