"""The keys of one cluster in etcd: their names, and the `ClusterView` a read of them decodes to.

What each key holds, and which transaction writes it, is the etcd coordinator's contract
(`actors.cluster._coordinator_etcd`): ``config``, ``members/<worker-id>``, ``shards/<s>`` and
``bindings/<s>``, all under ``/agent-actors/<cluster>/``.
"""

from __future__ import annotations

import json
import logging

import attrs

from actors.cluster._coordinator import Binding, Claim, ClusterView, Member
from actors.cluster._etcd_http import KeyValue

__all__ = ["ClusterKeys", "DecodedView", "binding_of"]

log = logging.getLogger("actors.cluster")


@attrs.frozen(kw_only=True)
class DecodedView:
    """A cluster view, with what the coordinator keeps of the keys behind it."""

    view: ClusterView
    #: worker id -> the lease its member key is attached to (`Member` carries no lease).
    member_leases: dict[str, int]
    #: shard -> (storage id, mod_revision) of its binding, for the shards in ``view``.
    bindings: dict[int, tuple[str, int]]


@attrs.frozen
class ClusterKeys:
    """The keys of one cluster, all under ``prefix``."""

    prefix: bytes

    @classmethod
    def of(cls, cluster: str) -> ClusterKeys:
        """The keys of the cluster named ``cluster``."""
        return cls(f"/agent-actors/{cluster}/".encode())

    @property
    def config(self) -> bytes:
        return self.prefix + b"config"

    def member(self, worker_id: str) -> bytes:
        return self.prefix + b"members/" + worker_id.encode()

    def shard(self, shard: int) -> bytes:
        return self.prefix + b"shards/" + str(shard).encode()

    def binding(self, shard: int) -> bytes:
        return self.prefix + b"bindings/" + str(shard).encode()

    def decode(self, revision: int, state: dict[bytes, KeyValue], shard_count: int) -> DecodedView:
        """The view of the keys ``state`` (key -> kv) read at ``revision``; malformed values
        and shards out of ``0..shard_count - 1`` are left out (and logged)."""
        members: list[Member] = []
        claims: list[Claim] = []
        bindings: list[Binding] = []
        leases: dict[str, int] = {}
        known: dict[int, tuple[str, int]] = {}
        for key, kv in state.items():
            name = key[len(self.prefix) :].decode(errors="replace")
            try:
                document = json.loads(kv.value)
                if name.startswith("members/"):
                    worker_id = name[len("members/") :]
                    members.append(
                        Member(
                            worker_id=worker_id,
                            endpoint=document["endpoint"],
                            storage_id=str(document.get("storageId", "")),
                        )
                    )
                    leases[worker_id] = kv.lease
                elif name.startswith("shards/"):
                    claims.append(
                        Claim(
                            shard=int(name[len("shards/") :]),
                            worker_id=document["workerId"],
                            endpoint=document["endpoint"],
                            epoch=kv.create_revision,
                            lease_id=kv.lease,
                        )
                    )
                elif name.startswith("bindings/"):
                    shard = int(name[len("bindings/") :])
                    bindings.append(Binding(shard=shard, storage_id=document["storageId"]))
                    known[shard] = (document["storageId"], kv.mod_revision)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring malformed etcd key %r: %r", key, exc)
        members.sort(key=lambda m: m.worker_id)
        claims.sort(key=lambda c: c.shard)
        claims = [c for c in claims if 0 <= c.shard < shard_count]
        bindings = sorted(
            (b for b in bindings if 0 <= b.shard < shard_count), key=lambda b: b.shard
        )
        view = ClusterView(
            revision=revision,
            shard_count=shard_count,
            members=tuple(members),
            claims=tuple(claims),
            bindings=tuple(bindings),
        )
        in_view = {b.shard for b in bindings}
        return DecodedView(
            view=view,
            member_leases=leases,
            bindings={shard: seen for shard, seen in known.items() if shard in in_view},
        )


def binding_of(kv: KeyValue) -> tuple[str, int]:
    """``(storage id, mod_revision)`` of a ``bindings/<s>`` key."""
    try:
        return str(json.loads(kv.value)["storageId"]), kv.mod_revision
    except (ValueError, KeyError, TypeError):
        # Unreadable: guess "mine at this revision"; etcd's compare settles it.
        return "", kv.mod_revision
