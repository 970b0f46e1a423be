"""Which shard an agent lives in, and which worker should own each shard.

Both functions are stable across processes, hosts and Python versions: they hash with
BLAKE2b, never with Python's ``hash()``, which is salted per process (``PYTHONHASHSEED``) and
would send one agent to different shards in different workers.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable

from actors.cluster._coordinator import ClusterView

__all__ = [
    "DEFAULT_SHARDS",
    "desired_shards",
    "eligible_workers",
    "placement_owner",
    "rendezvous_owner",
    "shard_of",
]

#: Shards per cluster unless configured: enough that 4 workers get about 16 each, few enough
#: that a rebalance is 64 claims at most.
DEFAULT_SHARDS = 64


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


@functools.lru_cache(maxsize=65536)
def shard_of(agent_id: str, shard_count: int) -> int:
    """The shard of ``agent_id``: the first 8 bytes of BLAKE2b(agentId), big-endian, mod S."""
    return _hash64(agent_id) % shard_count


def rendezvous_owner(shard: int, workers: Iterable[str]) -> str | None:
    """The worker that should own ``shard`` (highest random weight), or None without workers.

    Each worker scores ``BLAKE2b("<workerId>/<shard>")``; the highest score wins, ties broken
    by the larger id. A worker joining takes from each other worker only the shards it now
    scores highest on, and a worker leaving hands only its own shards on: about S/N move.
    """
    best: tuple[int, str] | None = None
    for worker in workers:
        score = (_hash64(f"{worker}/{shard}"), worker)
        if best is None or score > best:
            best = score
    return None if best is None else best[1]


def eligible_workers(view: ClusterView, shard: int, *, also: str | None = None) -> list[str]:
    """The live workers that may own ``shard``: those that see the storage it is bound to,
    or all of them when it is unbound (``docs/cluster.md``, storage modes). ``also`` adds a
    worker the view does not list yet (it may take unbound shards only)."""
    bound = view.binding(shard)
    workers = [m.worker_id for m in view.members if bound is None or m.storage_id == bound]
    if also is not None and bound is None and also not in workers:
        workers.append(also)
    return workers


def placement_owner(view: ClusterView, shard: int) -> str | None:
    """The worker that should own ``shard`` in ``view`` (rendezvous over its eligible
    workers), or None when no live worker may own it."""
    return rendezvous_owner(shard, eligible_workers(view, shard))


def desired_shards(
    worker: str, workers: Iterable[str] | ClusterView, shard_count: int | None = None
) -> set[int]:
    """The shards ``worker`` should own.

    Args:
        worker: The worker asking.
        workers: The live members' ids (every shard open to all of them), or a cluster view,
            whose storage bindings restrict each bound shard to the workers that see its
            storage.
        shard_count: S; taken from the view when ``workers`` is one.
    """
    if isinstance(workers, ClusterView):
        view = workers
        return {
            s
            for s in range(view.shard_count)
            if rendezvous_owner(s, eligible_workers(view, s, also=worker)) == worker
        }
    if shard_count is None:
        raise TypeError("desired_shards needs shard_count with a list of workers")
    members = sorted(set(workers) | {worker})
    return {s for s in range(shard_count) if rendezvous_owner(s, members) == worker}
