"""`EtcdCoordinator`: the `Coordinator` interface backed by etcd v3, for clusters across hosts.

Keys under ``/agent-actors/<cluster>/`` (values are JSON):

- ``config`` → ``{shardCount}``: written once by the first process (create if absent); every
  later process checks it asks for the same shard count.
- ``members/<worker-id>`` → ``{endpoint, host, storageId, startedAt, version}``, attached to
  the worker's lease.
- ``shards/<s>`` → ``{workerId, endpoint, storageId}``, attached to the owner's lease. The
  fencing **epoch is the key's create_revision**.
- ``bindings/<s>`` → ``{storageId, host, boundAt}``, no lease: the storage a shard's sessions
  live on, written by `EtcdCoordinator.bind` when that storage first holds one of the
  shard's sessions (before the first write of a session in the unbound shard, or at a claim
  when the storage already holds some), only while the binder still owns the shard. A claim
  never writes it, and succeeds only if the binding is absent or names the claimer's
  storage, so a shard never moves to a worker that cannot see its sessions
  (``_storage.py``). Only ``cluster evict-host`` deletes bindings.

Each operation is one etcd request, so every rule of ``actors/cluster/_coordinator.py`` is
etcd's own guarantee: a claim is the transaction "create ``shards/<s>`` if absent, and only if
``members/<id>`` is still on my lease"; a bind is "create ``bindings/<s>`` if absent, and only
if ``shards/<s>`` still has my epoch"; a release is "delete if create_revision == my epoch";
revoking or expiring a lease deletes the member and all its claims in one revision; the view's
revision is the store revision of the read (etcd's header revision). A lease's TTL is whole
seconds, at least etcd's minimum (``ceil(1.5 × election timeout)``: 2 s with etcd's defaults).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import socket
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

import trio

from actors.cluster._coordinator import (
    BoundElsewhereError,
    Claim,
    ClaimLostError,
    ClusterView,
    CoordinatorError,
    Lease,
    LeaseExpiredError,
    Member,
    MemberConflictError,
)
from actors.cluster._etcd_http import (
    NOT_FOUND,
    EtcdClient,
    EtcdError,
    EtcdUnavailableError,
    KeyValue,
    b64,
    compare_create,
    compare_lease,
    open_etcd_client,
    prefix_end,
    request_delete,
    request_put,
    request_range,
)
from actors.cluster._etcd_keys import ClusterKeys, binding_of
from actors.cluster._etcd_url import DEFAULT_CLUSTER as DEFAULT_CLUSTER
from actors.cluster._etcd_url import parse_etcd_url as parse_etcd_url
from actors.cluster._etcd_url import split_etcd_url as split_etcd_url

__all__ = [
    "DEFAULT_CLUSTER",
    "EtcdCoordinator",
    "open_etcd_coordinator",
    "parse_etcd_url",
    "split_etcd_url",
]

log = logging.getLogger("actors.cluster")

#: Version written into ``members/<id>`` (what a rolling upgrade would compare).
PROTOCOL_VERSION = "1"

#: Pause before re-opening a broken watch, doubling up to the maximum (seconds).
_WATCH_RETRY = 0.1
_WATCH_RETRY_MAX = 2.0


def compare_mod(key: bytes, revision: int) -> dict[str, Any]:
    """Compare: ``key``'s mod_revision equals ``revision`` (unchanged since it was read)."""
    return {"key": b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": revision}


def _kvs(response: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue.from_json(kv) for kv in response["response_range"].get("kvs", [])]


class EtcdCoordinator:
    """Membership and shard claims in etcd (see the module docstring for the key layout).

    Build it with `open_etcd_coordinator`.
    """

    def __init__(
        self,
        client: EtcdClient,
        *,
        cluster: str,
        shard_count: int,
        host: str,
        storage_id: str,
        storage_mode: str = "local",
    ) -> None:
        if shard_count < 1:
            raise ValueError(f"shard_count must be positive, got {shard_count}")
        if not cluster or "/" in cluster:
            raise ValueError(f"cluster name must be non-empty and contain no '/': {cluster!r}")
        self._etcd = client
        self._shard_count = shard_count
        self._host = host
        self._storage_id = storage_id
        self._storage_mode = storage_mode
        #: shard -> (storage id, mod_revision) of its binding as last seen: the claim
        #: transaction's guess, checked by etcd (a wrong guess costs one more round trip).
        self._bindings: dict[int, tuple[str, int]] = {}
        self._keys = ClusterKeys.of(cluster)
        self.prefix = self._keys.prefix
        #: lease id -> endpoint of the member that joined under it here (saves a read per claim)
        self._endpoints: dict[int, str] = {}
        #: worker id -> lease id, as of the latest view this object built (the supervisor
        #: revokes a dead worker's lease by it; `Member` itself carries no lease).
        self.member_leases: dict[str, int] = {}
        #: Revision of this object's latest successful write; `watch` yields no view older than
        #: it, so a worker never reads its own fresh claim as lost from a lagging watch event.
        self._written = 0

    @property
    def shard_count(self) -> int:
        return self._shard_count

    async def check_config(self) -> None:
        """Record the shard count on first use; refuse a cluster created with another one.

        Raises:
            CoordinatorError: the cluster exists with a different shard count.
        """
        key = self._keys.config
        value = json.dumps({"shardCount": self._shard_count}).encode()
        ok, _, responses = await self._etcd.txn(
            [compare_create(key, 0)], [request_put(key, value)], [request_range(key)]
        )
        if ok:
            return
        kvs = responses[0]["response_range"].get("kvs", [])
        stored = json.loads(KeyValue.from_json(kvs[0]).value) if kvs else {}
        if stored.get("shardCount") != self._shard_count:
            raise CoordinatorError(
                f"etcd cluster {self.prefix.decode()!r} has shardCount "
                f"{stored.get('shardCount')!r}, this process was started with {self._shard_count}"
            )

    # -- membership -------------------------------------------------------------------------

    async def join(self, member: Member, *, ttl: float) -> Lease:
        if ttl <= 0:
            raise ValueError(f"ttl must be positive, got {ttl}")
        lease_id, granted = await self._etcd.lease_grant(max(1, math.ceil(ttl)))
        key = self._keys.member(member.worker_id)
        value = json.dumps(
            {
                "endpoint": member.endpoint,
                "host": self._host,
                "storageId": self._storage_id,
                "storageMode": self._storage_mode,
                "startedAt": time.time(),
                "version": PROTOCOL_VERSION,
            }
        ).encode()
        try:
            ok, revision, responses = await self._etcd.txn(
                [compare_create(key, 0)],
                [request_put(key, value, lease=lease_id)],
                [request_range(key)],
            )
        except BaseException:
            with trio.move_on_after(2, shield=True), contextlib.suppress(CoordinatorError):
                await self._etcd.lease_revoke(lease_id)
            raise
        if not ok:
            with trio.move_on_after(2, shield=True), contextlib.suppress(CoordinatorError):
                await self._etcd.lease_revoke(lease_id)
            kvs = responses[0]["response_range"].get("kvs", [])
            holder = KeyValue.from_json(kvs[0]).lease if kvs else "?"
            raise MemberConflictError(
                f"worker {member.worker_id!r} is already a member (lease {holder})"
            )
        self._endpoints[lease_id] = member.endpoint
        self._written = max(self._written, revision)
        return Lease(lease_id=lease_id, worker_id=member.worker_id, ttl=float(granted))

    async def keep_alive(self, lease: Lease) -> None:
        if await self._etcd.lease_keep_alive(lease.lease_id) <= 0:
            raise LeaseExpiredError(
                f"lease {lease.lease_id} of worker {lease.worker_id!r} expired or was revoked"
            )

    async def leave(self, lease: Lease) -> None:
        self._endpoints.pop(lease.lease_id, None)
        await self._etcd.lease_revoke(lease.lease_id)

    # -- claims -----------------------------------------------------------------------------

    async def claim(self, lease: Lease, shard: int) -> Claim | None:
        if not 0 <= shard < self._shard_count:
            raise ValueError(f"shard {shard} is out of range 0..{self._shard_count - 1}")
        member_key = self._keys.member(lease.worker_id)
        endpoint = self._endpoints.get(lease.lease_id) or await self._endpoint_of(member_key, lease)
        value = json.dumps(
            {"workerId": lease.worker_id, "endpoint": endpoint, "storageId": self._storage_id}
        ).encode()
        key = self._keys.shard(shard)
        binding_key = self._keys.binding(shard)
        # At most three rounds: a wrong guess about the binding is corrected from the failure
        # branch's read, and a binding that keeps changing under us is given up on (None).
        for _ in range(3):
            known = self._bindings.get(shard)
            # The member check makes the claim fail as a whole once the lease is gone. The
            # claim writes no binding (the first session write does, `bind`), but it compares
            # the binding key so that it never races a bind: "still unbound", or "bound to
            # this storage and unchanged since read".
            compares = [compare_create(key, 0), compare_lease(member_key, lease.lease_id)]
            if known is None:
                compares.append(compare_create(binding_key, 0))
            elif known[0] == self._storage_id:
                compares.append(compare_mod(binding_key, known[1]))
            else:
                return None  # bound to a storage this worker does not see
            try:
                ok, revision, responses = await self._etcd.txn(
                    compares,
                    [request_put(key, value, lease=lease.lease_id)],
                    [request_range(member_key), request_range(key), request_range(binding_key)],
                )
            except EtcdError as exc:
                if exc.code == NOT_FOUND:
                    raise self._expired(lease) from None
                raise
            if ok:
                self._written = max(self._written, revision)
                return Claim(
                    shard=shard,
                    worker_id=lease.worker_id,
                    endpoint=endpoint,
                    epoch=revision,
                    lease_id=lease.lease_id,
                )
            member, held, bound = (_kvs(r) for r in responses)
            if not member or member[0].lease != lease.lease_id:
                raise self._expired(lease)
            if held:
                return None
            self._remember_binding(shard, bound[0] if bound else None)
        return None

    async def bind(self, claim: Claim) -> None:
        """Record ``bindings/<s>`` → this storage, only while ``claim`` holds the shard.

        One transaction: "``create_revision(shards/<s>) == epoch`` and
        ``create_revision(bindings/<s>) == 0``", putting the binding (no lease). A shard known
        bound to this storage costs no request.

        Raises:
            ClaimLostError: the claim no longer holds the shard (nothing was bound).
            BoundElsewhereError: the shard is bound to another storage.
            CoordinatorError: etcd did not answer.
        """
        shard = claim.shard
        key = self._keys.shard(shard)
        binding_key = self._keys.binding(shard)
        value = json.dumps(
            {"storageId": self._storage_id, "host": self._host, "boundAt": time.time()}
        ).encode()
        known = self._bindings.get(shard)
        if known is not None and known[0] == self._storage_id:
            return
        ok, revision, responses = await self._etcd.txn(
            [compare_create(key, claim.epoch), compare_create(binding_key, 0)],
            [request_put(binding_key, value)],
            [request_range(key), request_range(binding_key)],
        )
        if ok:
            self._written = max(self._written, revision)
            self._bindings[shard] = (self._storage_id, revision)
            return
        held, bound = (_kvs(r) for r in responses)
        self._remember_binding(shard, bound[0] if bound else None)
        if not held or held[0].create_revision != claim.epoch:
            raise ClaimLostError(
                f"shard {shard}: worker {claim.worker_id!r} no longer holds it under epoch "
                f"{claim.epoch}; not bound"
            )
        now = self._bindings.get(shard)
        if now is not None and now[0] == self._storage_id:
            return  # bound by a concurrent first write of ours
        raise BoundElsewhereError(
            f"shard {shard} is bound to storage {now[0] if now else '?'!r}, not to "
            f"{self._storage_id!r}"
        )

    def _remember_binding(self, shard: int, kv: KeyValue | None) -> None:
        if kv is None:
            self._bindings.pop(shard, None)
        else:
            self._bindings[shard] = binding_of(kv)

    async def _endpoint_of(self, member_key: bytes, lease: Lease) -> str:
        _, kvs = await self._etcd.range(member_key)
        if not kvs or kvs[0].lease != lease.lease_id:
            raise self._expired(lease)
        return str(json.loads(kvs[0].value)["endpoint"])

    @staticmethod
    def _expired(lease: Lease) -> LeaseExpiredError:
        return LeaseExpiredError(
            f"lease {lease.lease_id} of worker {lease.worker_id!r} expired or was revoked"
        )

    async def revoke(self, lease_id: int) -> bool:
        """Revoke a lease by id (a supervisor saw its worker die); whether it was live."""
        return await self._etcd.lease_revoke(lease_id)

    async def release(self, claim: Claim) -> bool:
        key = self._keys.shard(claim.shard)
        ok, revision, _ = await self._etcd.txn(
            [compare_create(key, claim.epoch)], [request_delete(key)]
        )
        if ok:
            self._written = max(self._written, revision)
        return ok

    # -- observing --------------------------------------------------------------------------

    async def view(self) -> ClusterView:
        revision, kvs = await self._etcd.range(self.prefix, prefix_end(self.prefix))
        state = {kv.key: kv for kv in kvs}
        return self._view_of(revision, state)

    async def watch(self, after: int = 0) -> AsyncGenerator[ClusterView, None]:
        last = after
        pause = _WATCH_RETRY
        while True:
            try:
                revision, kvs = await self._etcd.range(self.prefix, prefix_end(self.prefix))
                state = {kv.key: kv for kv in kvs}
                if revision > last:
                    last = revision
                    yield self._view_of(revision, state)
                batches = self._etcd.watch(
                    self.prefix, prefix_end(self.prefix), start_revision=revision + 1
                )
                async with contextlib.aclosing(batches):
                    async for batch in batches:
                        pause = _WATCH_RETRY
                        for deleted, kv in batch.events:
                            if deleted:
                                state.pop(kv.key, None)
                            else:
                                state[kv.key] = kv
                        if batch.revision > last and batch.revision >= self._written:
                            last = batch.revision
                            yield self._view_of(batch.revision, state)
            except (EtcdUnavailableError, EtcdError) as exc:
                # Reads keep working while etcd is away: the last view stands until it is back.
                log.warning("etcd watch on %s failed (%s); retrying", self.prefix.decode(), exc)
                await trio.sleep(pause)
                pause = min(pause * 2, _WATCH_RETRY_MAX)

    def _view_of(self, revision: int, state: dict[bytes, KeyValue]) -> ClusterView:
        decoded = self._keys.decode(revision, state, self._shard_count)
        # Bindings missing from the view were evicted.
        self._bindings.clear()
        self._bindings.update(decoded.bindings)
        self.member_leases = decoded.member_leases
        return decoded.view


@contextlib.asynccontextmanager
async def open_etcd_coordinator(
    urls: Sequence[str] | str,
    *,
    cluster: str,
    shard_count: int,
    host: str | None = None,
    storage_id: str = "",
    storage_mode: str = "local",
) -> AsyncIterator[EtcdCoordinator]:
    """An `EtcdCoordinator` for ``cluster``, its shard count checked against etcd.

    Args:
        urls: ``etcd://host:port[,…]`` (a cluster part in it is ignored: ``cluster`` rules) or
            a list of gateway base URLs (``http://host:port``).
        cluster: Cluster name; keys live under ``/agent-actors/<cluster>/``.
        shard_count: S; must match what the cluster was created with.
        host: This host's name in ``members/<id>`` (default: the hostname).
        storage_id: Which storage this process sees (written into members, claims and the
            bindings it records).
        storage_mode: ``local`` or ``shared`` (advertised in ``members/<id>``).

    Raises:
        CoordinatorError: etcd is unreachable or the cluster has another shard count.
    """
    bases = parse_etcd_url(urls) if isinstance(urls, str) else list(urls)
    async with open_etcd_client(bases) as client:
        coordinator = EtcdCoordinator(
            client,
            cluster=cluster,
            shard_count=shard_count,
            host=host if host is not None else socket.gethostname(),
            storage_id=storage_id,
            storage_mode=storage_mode,
        )
        await coordinator.check_config()
        yield coordinator
