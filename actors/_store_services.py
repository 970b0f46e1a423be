"""Assembling the session store for a server: `build_session_services`.

The server runs `SessionServices.run` in its nursery (it re-indexes the roots in the background
and, for write-behind durability, flushes on the batch timer) and awaits
`SessionServices.aclose` at shutdown (flush every writer, release every lock, close the cache).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from actors._remote import RemoteService
from actors._session_service import Sessions
from actors.session_log import DEFAULT_BATCH_DELAY
from actors.store import (
    Durability,
    ProjectionCache,
    ProjectionCacheError,
    SessionRoot,
    SessionStore,
    StoreOptions,
    detect_compression,
)

__all__ = ["CACHE_NAME", "SESSIONS_DIR", "SessionServices", "build_session_services"]

SESSIONS_DIR = "sessions"
"""The embedded DSH root inside the data directory."""
CACHE_NAME = "sessions.sqlite3"
"""The projection cache inside the data directory."""

log = logging.getLogger(__name__)


@attrs.define(eq=False)
class SessionServices:
    """What a server needs from the session store."""

    #: The `AgentDirectory` to give the `ActorSystem`.
    directory: SessionStore
    #: Services to register (``sessions/*``).
    services: list[RemoteService]
    cache: ProjectionCache
    #: Re-index the roots when `run` starts.
    index_on_start: bool = True
    _closed: bool = False

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Background work until cancelled: committing the appends' progress rows
        (`ProgressCommits`), an incremental re-index of every root (so files changed while no
        server ran are listed), then the write-behind flush timer."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.directory.progress.run)
            task_status.started()
            await self._index_then_flush()

    async def _index_then_flush(self) -> None:
        store = self.directory
        if self.index_on_start:
            try:
                for summary in await store.refresh_index():
                    if summary.rejected:
                        log.warning(
                            "%s: %d transcript(s) rejected", summary.root, len(summary.rejected)
                        )
            except ProjectionCacheError as error:  # e.g. a full disk: expected, no trace
                log.warning("re-indexing the sessions roots failed: %s", error)
            except Exception:
                log.exception("re-indexing the sessions roots failed")
        if store.options.durability != "write-behind":
            await trio.sleep_forever()
        period = max(0.01, store.options.batch_delay / 4)
        while True:
            await trio.sleep(period)
            try:
                # pending_since is time.monotonic(), like SessionLogWriter's.
                await store.flush_due(time.monotonic())
            except Exception:
                log.exception("write-behind flush failed")

    async def aclose(self) -> None:
        """Flush and close every live session, then close the cache (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.directory.aclose()
        finally:
            self.cache.close()


def build_session_services(
    data_dir: Path,
    *,
    sessions_dir: Path | None = None,
    writable: bool = False,
    durability: Durability = "fsync",
    batch_delay: float = DEFAULT_BATCH_DELAY,
    inline_writes: bool = True,
    index_on_start: bool = True,
    epoch_of: Callable[[str], int | None] | None = None,
    ack_guard: Callable[[str], None] | None = None,
    before_write: Callable[[str], Awaitable[None]] | None = None,
) -> SessionServices:
    """The session store over ``<data_dir>/sessions`` (and ``sessions_dir`` if given).

    Args:
        data_dir: the server's data directory (created if missing).
        sessions_dir: an existing DSH sessions directory to serve as well (e.g.
            ``~/.dsh/sessions``); its encoding is detected from its first transcript.
        writable: whether ``sessions_dir`` accepts writes (new sessions are then created
            there); otherwise it is read-only.
        durability: ``"fsync"`` (default), ``"flush"`` or ``"write-behind"``.
        batch_delay: the write-behind window in seconds.
        inline_writes: write small appends on the event loop while the disk is fast
            (`actors.store.StoreOptions.inline_writes`).
        index_on_start: re-index the roots when `SessionServices.run` starts.
        epoch_of: the fencing epoch a session is written under (None: not clustered).
        ack_guard: checks each durable append before it is acknowledged (raises to fail it).
        before_write: awaited before the first byte of a session is written (raises to
            refuse the write; a clustered worker binds the shard to its storage).

    Raises:
        ProjectionCacheError: the cache cannot be opened.
        NotADirectoryError: ``sessions_dir`` is not a directory.
    """
    data_dir = Path(data_dir)
    embedded = data_dir / SESSIONS_DIR
    embedded.mkdir(parents=True, exist_ok=True)
    cache = ProjectionCache.open(data_dir / CACHE_NAME)
    roots = [
        SessionRoot(
            path=embedded.resolve(),
            compression="zstd",
            writable=True,
            root_id=cache.root_id(embedded, "zstd"),
        )
    ]
    if sessions_dir is not None:
        external = Path(sessions_dir).expanduser().resolve()
        if not external.is_dir():
            cache.close()
            raise NotADirectoryError(f"{external}: not a sessions directory")
        compression = detect_compression(external)
        roots.append(
            SessionRoot(
                path=external,
                compression=compression,
                writable=writable,
                root_id=cache.root_id(external, compression),
            )
        )
    options = StoreOptions(
        durability=durability,
        batch_delay=batch_delay,
        inline_writes=inline_writes,
        epoch_of=epoch_of,
        ack_guard=ack_guard,
    )
    store = SessionStore(cache, roots, options, before_write=before_write)
    return SessionServices(
        directory=store, services=[Sessions(store)], cache=cache, index_on_start=index_on_start
    )
