"""Shard hashing and rendezvous ownership: stable, balanced, minimal movement."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from actors.cluster import DEFAULT_SHARDS, desired_shards, rendezvous_owner, shard_of


def test_shard_of_is_stable_across_processes() -> None:
    """A child process with another hash seed maps ids to the same shards (no ``hash()``)."""
    ids = [f"agent-{i}" for i in range(50)]
    script = (
        "from actors.cluster import shard_of; import sys; "
        "print(','.join(str(shard_of(a, 64)) for a in sys.argv[1:]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, *ids],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PYTHONPATH": "."},
    ).stdout.strip()
    assert out == ",".join(str(shard_of(a, 64)) for a in ids)
    assert (
        shard_of("agent-0", 64)
        == int.from_bytes(hashlib.blake2b(b"agent-0", digest_size=8).digest(), "big") % 64
    )


def test_rendezvous_partitions_every_shard() -> None:
    """Each shard has exactly one desired owner among the live workers."""
    workers = ["w1", "w2", "w3"]
    parts = [desired_shards(w, workers, DEFAULT_SHARDS) for w in workers]
    assert set().union(*parts) == set(range(DEFAULT_SHARDS))
    assert sum(len(p) for p in parts) == DEFAULT_SHARDS
    assert all(DEFAULT_SHARDS // 6 < len(p) < DEFAULT_SHARDS // 2 for p in parts)
    assert rendezvous_owner(0, []) is None


def test_joining_or_leaving_moves_only_that_workers_shards() -> None:
    """Adding a fourth worker moves shards only to it (about S/4); removing it moves them
    back, and no shard moves between the other workers."""
    before = {s: rendezvous_owner(s, ["w1", "w2", "w3"]) for s in range(DEFAULT_SHARDS)}
    after = {s: rendezvous_owner(s, ["w1", "w2", "w3", "w4"]) for s in range(DEFAULT_SHARDS)}
    moved = [s for s in before if before[s] != after[s]]
    assert all(after[s] == "w4" for s in moved)
    assert DEFAULT_SHARDS / 8 <= len(moved) <= DEFAULT_SHARDS * 3 / 8
