"""A worker's side of storage bindings: bind a shard when this storage first holds its sessions.

A claim binds nothing (``docs/cluster.md``, storage modes). A shard becomes bound to this
worker's storage when the storage first holds one of its sessions:

- before the first write of a session in a shard not known bound here (creating its log, or
  the first open for write), `ShardBinder.before_write` binds the shard through the
  coordinator, only while this worker still owns it. If that fails the write fails before
  anything is written: ``moved`` (the shard is not, or no longer, ours) or ``unavailable``
  (bound to another storage, or the coordinator did not answer);
- right after a claim, `ShardBinder.after_claim` binds the shard when this storage already
  holds sessions of it (written before, or an existing ``--sessions`` directory it serves).

Shards known bound to this storage are remembered, so the write path costs a set lookup after
the first write and never talks to the coordinator again for them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Set

import trio

from actors.cluster._coordinator import (
    BoundElsewhereError,
    Claim,
    ClaimLostError,
    ClusterView,
    Coordinator,
    CoordinatorError,
)
from actors.cluster._gate import ShardGate
from actors.cluster._shards import shard_of
from actors.session_log import LogReadError, decode_segment, iter_session_logs
from actors.store import SessionStore
from wire import UnavailableError, WireError

__all__ = ["ShardBinder", "held_shards_of"]

log = logging.getLogger("actors.cluster")


class ShardBinder:
    """Binds this worker's shards to its storage at the first session write (or claim).

    Args:
        coordinator: Where bindings are recorded (etcd; the others bind nothing).
        gate: The worker's gate (which claims it holds, its latest view).
        storage_id: The storage this worker sees.
        held_shards: The shards of which this storage holds sessions now (blocking; run in a
            thread).
    """

    def __init__(
        self,
        coordinator: Coordinator,
        gate: ShardGate,
        storage_id: str,
        held_shards: Callable[[], Set[int]] = frozenset,
    ) -> None:
        self._coordinator = coordinator
        self._gate = gate
        self._storage_id = storage_id
        #: The shards of which this storage holds sessions (set once the store is open).
        self.held_shards = held_shards
        #: Shards known bound to this storage: their writes never ask the coordinator.
        self.bound: set[int] = set()

    def _known_bound(self, shard: int) -> bool:
        if shard in self.bound:
            return True
        view = self._gate.view
        if view is not None and view.binding(shard) == self._storage_id:
            self.bound.add(shard)
            return True
        return False

    def observe(self, view: ClusterView) -> None:
        """Forget shards ``view`` no longer shows bound here (``cluster evict-host --force``
        deleted the binding): their next first write binds again. The watch never yields a
        view older than our own binds, so a fresh bind is not forgotten."""
        if self.bound:
            self.bound = {s for s in self.bound if view.binding(s) == self._storage_id}

    async def before_write(self, session_id: str) -> None:
        """Make sure ``session_id``'s shard is bound to this storage before its first write.

        Raises:
            MovedError: this worker does not (or no longer) own the shard.
            UnavailableError: the shard is bound to another storage, or the coordinator did
                not answer; nothing may be written.
        """
        shard = shard_of(session_id, self._gate.shard_count)
        if self._known_bound(shard):
            return
        claim = self._gate.claim_of(shard)
        if claim is None:
            raise self._gate.moved(session_id, shard)
        try:
            await self._coordinator.bind(claim)
        except ClaimLostError:
            raise self._gate.moved(session_id, shard) from None
        except BoundElsewhereError as exc:
            raise UnavailableError(
                f'session "{session_id}" (shard {shard}): {exc}; not written',
                details={"sessionId": session_id, "shard": shard, "reason": "bound"},
            ) from None
        except (CoordinatorError, WireError) as exc:
            raise UnavailableError(
                f'session "{session_id}" (shard {shard}): cannot bind the shard to storage '
                f"{self._storage_id!r} before its first write ({exc}); not written",
                details={"sessionId": session_id, "shard": shard, "reason": "coordinator"},
            ) from None
        self.bound.add(shard)

    async def after_claim(self, claim: Claim) -> None:
        """Bind ``claim``'s shard when this storage already holds sessions of it.

        A failure is logged, not raised: the first write binds (or refuses) anyway.
        """
        shard = claim.shard
        if self._known_bound(shard):
            return
        try:
            held = await trio.to_thread.run_sync(self.held_shards)
        except Exception:
            log.exception("shard %d: cannot tell whether this storage holds its sessions", shard)
            return
        if shard not in held:
            return
        try:
            await self._coordinator.bind(claim)
        except (CoordinatorError, WireError) as exc:
            log.warning("shard %d: not bound at claim (%s); the first write binds it", shard, exc)
            return
        self.bound.add(shard)


def held_shards_of(store: SessionStore, shard_count: int) -> Callable[[], set[int]]:
    """What `ShardBinder.held_shards` asks (blocking): the shards of which ``store``'s roots
    hold sessions. The transcripts on disk are listed once (an existing ``--sessions``
    directory may not be indexed yet when the first claims come), then the projection cache
    adds the sessions indexed or created since (re-read only when the cache changed)."""
    cache = store.cache
    on_disk: set[int] | None = None
    indexed: tuple[int, set[int]] | None = None

    def held() -> set[int]:
        nonlocal on_disk, indexed
        if on_disk is None:
            found: set[int] = set()
            for root in store.roots:
                try:
                    for path in iter_session_logs(root.path, root.compression):
                        found.add(shard_of(decode_segment(path.parent.name), shard_count))
                except (OSError, LogReadError, ValueError) as exc:
                    log.warning("cannot list the sessions under %s (%s)", root.path, exc)
            on_disk = found
        revision = cache.revision()
        if indexed is None or indexed[0] != revision:
            indexed = (
                revision,
                {
                    shard_of(session_id, shard_count)
                    for root_id in store.root_ids
                    for session_id, _, _ in cache.file_states(root_id).values()
                },
            )
        return on_disk | indexed[1]

    return held
