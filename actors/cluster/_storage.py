"""Storage modes: which workers may own a shard, given where its sessions live.

Each worker advertises the storage it sees (``storageId``). The etcd coordinator binds a shard
to a storage when that storage first holds one of its sessions (``bindings/<s>``, no lease;
written before the first session write, or at a claim when the storage already holds some:
``_binding.py``), and from then on only workers that see that storage may own it. Unbound
shards go to any live worker, so a host joining later takes its share of the empty ones:

- ``local`` (default): the storage id is ``<host-id>:<data dir>``, unique to one host, so a
  shard fails over only between that host's workers. When the host is gone its shards are
  unowned, and calls for them answer ``unavailable`` until it returns or an operator runs
  ``agent-actors cluster evict-host`` (which deletes the bindings).
- ``shared``: every host names the same mount with ``--storage-id``, so any of them may take
  a shard over.

The in-process and remote coordinators record no bindings: every shard is unbound and every
worker eligible, exactly the one-host behaviour.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Literal

import attrs

from actors.cluster._coordinator import ClusterView, CoordinatorError
from actors.cluster._coordinator_etcd import compare_mod
from actors.cluster._etcd_http import open_etcd_client, prefix_end, request_delete
from actors.cluster._etcd_url import split_etcd_url
from actors.cluster._shards import eligible_workers

__all__ = [
    "STORAGE_MODES",
    "Eviction",
    "EvictionRefusedError",
    "Placement",
    "StorageMode",
    "default_host_id",
    "evict_host",
    "stranded",
]

StorageMode = Literal["local", "shared"]
STORAGE_MODES: tuple[StorageMode, ...] = ("local", "shared")


def default_host_id() -> str:
    """The host id when none is given: the hostname."""
    return socket.gethostname()


@attrs.frozen(kw_only=True)
class Placement:
    """Where a worker runs and which storage it sees."""

    #: Cluster-unique host name (worker ids are ``<host-id>-w1…``).
    host_id: str
    storage_mode: StorageMode = "local"
    #: ``<host-id>:<data dir>`` in local mode; the shared mount's name in shared mode.
    storage_id: str

    @classmethod
    def build(
        cls,
        *,
        data_dir: Path,
        host_id: str | None = None,
        storage_mode: StorageMode = "local",
        storage_id: str | None = None,
    ) -> Placement:
        """A placement, filling in the defaults.

        Raises:
            ValueError: an unknown mode, or shared mode without an explicit storage id.
        """
        if storage_mode not in STORAGE_MODES:
            raise ValueError(f"storage mode must be local or shared, got {storage_mode!r}")
        host = host_id or default_host_id()
        if storage_id is None:
            if storage_mode == "shared":
                raise ValueError(
                    "storage mode shared needs a storage id naming the shared mount "
                    "(--storage-id NAME, the same on every host that mounts it)"
                )
            storage_id = f"{host}:{Path(data_dir).resolve()}"
        if not storage_id:
            raise ValueError("storage id must not be empty")
        return cls(host_id=host, storage_mode=storage_mode, storage_id=storage_id)


def stranded(view: ClusterView, shard: int) -> bool:
    """Whether ``shard`` is unowned and bound to a storage no live worker sees: nobody may
    claim it until that storage's host returns or is evicted."""
    return view.owner(shard) is None and not eligible_workers(view, shard)


class EvictionRefusedError(CoordinatorError):
    """``evict-host`` refused: the host still has live members (use ``--force``)."""


@attrs.frozen(kw_only=True)
class Eviction:
    """What ``cluster evict-host`` did."""

    host: str
    #: Shards whose bindings were deleted (any worker may claim them now).
    evicted: tuple[int, ...] = ()
    #: Shards left bound: their storage is still seen by a live member on another host
    #: (a shared mount), so they are not stranded.
    kept: tuple[int, ...] = ()
    #: The host's live members (non-empty only with ``force``).
    live_members: tuple[str, ...] = ()


async def evict_host(url: str, host: str, *, force: bool = False) -> Eviction:
    """Delete the storage bindings ``host`` recorded, so its shards can be claimed elsewhere.

    The sessions of those shards stay on the evicted host's disk: a worker elsewhere starts
    them afresh (or finds them, if the disk is copied or mounted there).

    Args:
        url: ``etcd://host:port[,…][/cluster]``.
        host: The host id whose bindings go.
        force: Evict even though the host still has live members.

    Raises:
        EvictionRefusedError: ``host`` has live members and ``force`` is false.
        CoordinatorError: etcd is unreachable or refused a request.
    """
    urls, cluster = split_etcd_url(url)
    prefix = f"/agent-actors/{cluster}/".encode()
    async with open_etcd_client(urls) as client:
        _, kvs = await client.range(prefix, prefix_end(prefix))
        documents = {}
        for kv in kvs:
            try:
                documents[kv.key[len(prefix) :].decode()] = (kv, json.loads(kv.value))
            except ValueError:
                continue
        members = {k: d for k, (_, d) in documents.items() if k.startswith("members/")}
        here = sorted(
            k.removeprefix("members/") for k, d in members.items() if d.get("host") == host
        )
        if here and not force:
            raise EvictionRefusedError(
                f"host {host!r} still has live members ({', '.join(here)}); stop it first, "
                "or pass --force"
            )
        seen_elsewhere = {d.get("storageId") for d in members.values() if d.get("host") != host}
        evicted: list[int] = []
        kept: list[int] = []
        for name, (kv, document) in sorted(documents.items()):
            if not name.startswith("bindings/") or document.get("host") != host:
                continue
            shard = int(name.removeprefix("bindings/"))
            if document.get("storageId") in seen_elsewhere:
                kept.append(shard)
                continue
            # Only the binding as read: one re-bound meanwhile is left alone.
            ok, _, _ = await client.txn(
                [compare_mod(kv.key, kv.mod_revision)], [request_delete(kv.key)]
            )
            if ok:
                evicted.append(shard)
    return Eviction(
        host=host,
        evicted=tuple(sorted(evicted)),
        kept=tuple(sorted(kept)),
        live_members=tuple(here),
    )
