"""Which shard an agent lives in, and which worker should own each shard.

Both functions are stable across processes, hosts and Python versions: they hash with
BLAKE2b, never with Python's ``hash()``, which is salted per process (``PYTHONHASHSEED``) and
would send one agent to different shards in different workers.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable

__all__ = ["DEFAULT_SHARDS", "desired_shards", "rendezvous_owner", "shard_of"]

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


def desired_shards(worker: str, workers: Iterable[str], shard_count: int) -> set[int]:
    """The shards ``worker`` should own when ``workers`` are the live members."""
    members = sorted(set(workers) | {worker})
    return {s for s in range(shard_count) if rendezvous_owner(s, members) == worker}
