"""The store's small value types: roots, options, outcomes, and how load failures read.

Durability (`Durability`), decided per store:

- ``"fsync"`` (default): each append call is one batch, written as one zstd frame and fsync'd
  before the reply. An acknowledged append survives SIGKILL and power loss.
- ``"flush"``: written before the reply without fsync: survives SIGKILL, not power loss.
- ``"write-behind"``: upstream's window: the reply comes at once and the store's timer flushes
  (with fsync) once the oldest pending event is `DEFAULT_BATCH_DELAY` old, and at passivation.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import attrs

from actors.session_log import DEFAULT_BATCH_DELAY, Compression, LogReadError
from actors.store._idempotency import IdempotencyPolicy
from wire import InternalError, WireError

__all__ = [
    "AppendOutcome",
    "Durability",
    "Persisted",
    "SessionRoot",
    "StoreOptions",
    "file_identity",
    "read_failure",
]

Durability = Literal["fsync", "flush", "write-behind"]
Persisted = Literal["fsync", "written", "pending"]
_PERSISTED: dict[Durability, Persisted] = {
    "fsync": "fsync",
    "flush": "written",
    "write-behind": "pending",
}


@attrs.frozen(kw_only=True)
class SessionRoot:
    """One DSH sessions directory the store serves."""

    path: Path
    compression: Compression
    writable: bool
    root_id: int
    """Its id in the projection cache."""


@attrs.frozen(kw_only=True)
class StoreOptions:
    durability: Durability = "fsync"
    batch_delay: float = DEFAULT_BATCH_DELAY
    pack_chunks: bool = True
    inline_writes: bool = True
    """Write an append's batch on the event loop while the disk is fast and the batch small
    (`actors.store._write_placement`); false: always in a worker thread (a disk that may hang
    then never holds up the loop). A root on a network file system turns it off by itself
    (`actors.store._remote_disks`)."""
    clock: Callable[[], int] = attrs.field(default=lambda: time.time_ns() // 1_000_000)
    """Epoch milliseconds, for event ``time``."""
    epoch_of: Callable[[str], int | None] | None = None
    """The fencing epoch a session may be written under, None when not clustered."""
    ack_guard: Callable[[str], None] | None = None
    """Called with the session id after an append is durable and before it is acknowledged;
    if it raises, the append fails with that error."""
    idempotency: IdempotencyPolicy = attrs.field(factory=IdempotencyPolicy)
    """How many idempotency keys each session remembers, and for how long."""

    @property
    def persisted(self) -> Persisted:
        """How far an acknowledged append has gone (`AppendOutcome.persisted`)."""
        return _PERSISTED[self.durability]


@attrs.frozen(kw_only=True)
class AppendOutcome:
    seqs: tuple[int, ...]
    persisted: Persisted
    """``fsync``: on stable storage; ``written``: in the OS (survives a crash of this process);
    ``pending``: in memory, flushed within the batch delay."""


def read_failure(session_id: str, error: LogReadError) -> WireError:
    """Upstream's query-layer wording for a session that fails to load (§6.5)."""
    if error.query_code == "SESSION_QUERY_CORRUPT_SESSION":
        message = f'stored session "{session_id}" is corrupt: {error}'
    else:
        message = f'failed to inspect session "{session_id}": {error}'
    details = {"sessionId": session_id, "queryCode": error.query_code}
    if error.path is not None:
        details["path"] = str(error.path)
    return InternalError(message, details=details)


def file_identity(path: Path) -> tuple[int, ...] | None:
    """``(dev, inode, size, mtime_ns)`` of a file, None when it does not exist."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
