"""``FileReferenceService``: per-agent index lifecycle and the ``list`` entry point, on trio.

Concurrency model (spec §4.2, §5, §6.3, §6.4):

- Each agent key has one search: its root and at most one index *generation* (a scan in flight
  or finished). The first global query starts the scan; every concurrent and later global query
  waits for and shares it until :meth:`FileReferenceService.invalidate`.
- A scan is a task in the service's own nursery (opened by :meth:`FileReferenceService.run`)
  that hands the blocking walk to a worker thread. Callers only *wait* for the generation, so a
  cancelled caller leaves at once with ``trio.Cancelled`` while the scan goes on for the others
  ("The shared scan is not stopped and other waiters still get their results").
- Invalidation cancels the scan task's scope, which abandons the thread
  (``abandon_on_cancel=True``), and sets the thread's private abort flag, which the walk checks
  before each directory; waiters are rejected with :class:`FileIndexInvalidatedError` at once
  ("not transparently retried"), and the next global query starts a fresh scan.
- Directory-mode listings and ranking of very large indexes run in worker threads too, abandoned
  on cancel, so a huge directory never stalls the event loop of an actor host.
"""

from __future__ import annotations

import builtins
import logging
import threading
from os import PathLike
from typing import Final

import attrs
import trio

from actors.file_references._config import FileReferencesConfig
from actors.file_references._index import (
    FileIndex,
    FileIndexStatistics,
    ScanAbortedError,
    build_index,
)
from actors.file_references._listing import list_directory
from actors.file_references._query import (
    DirectoryQuery,
    FileReferenceCandidate,
    absolute_root,
    parse_query,
)
from actors.file_references._rank import RankAbortedError

__all__ = [
    "TOOL_RESULT_EVENT",
    "FileIndexFailedError",
    "FileIndexInvalidatedError",
    "FileReferenceError",
    "FileReferenceService",
    "FileReferenceStatistics",
]

_LOG: Final = logging.getLogger(__name__)
# Up to this many entries, ranking (well under a millisecond at the default cap) runs inline: a
# thread hop would cost more than it saves. Larger (unlimitedEntries) indexes rank in a worker
# thread, so a slow ranking never stalls the event loop.
_INLINE_RANK_LIMIT: Final = 20_000
_DEFAULT_SCAN_THREADS: Final = 4
_PREPARE_DELAY: Final = 0.05  # seconds between a finished scan and its ranking preparation

TOOL_RESULT_EVENT: Final = "tool/result"
"""The session event type after which an agent's index is stale (spec §1.5)."""


class FileReferenceError(Exception):
    """Base of the rejections ``list`` produces besides cancellation (spec §6.2)."""


class FileIndexInvalidatedError(FileReferenceError):
    """The index this call waited for was invalidated (or disposed) before it finished.

    "Any caller still waiting on the aborted scan is rejected with that same Error 'file search
    index invalidated' (not transparently retried)" (spec §6.4).
    """

    def __init__(self) -> None:
        super().__init__("file search index invalidated")


class FileIndexFailedError(FileReferenceError):
    """The scan failed for a reason other than invalidation; its cause is chained."""


@attrs.frozen(kw_only=True)
class FileReferenceStatistics:
    """A snapshot of the service's state."""

    agents: int
    """Agents with a cached search (root and possibly an index)."""
    scans_running: int
    """Index generations still scanning."""
    waiting_callers: int
    """``list`` calls waiting for a scan to finish."""
    truncated_indexes: int
    """Finished indexes that the entry cap cut off (see ``index_statistics``)."""
    builds: int = 0
    """Indexes built since start (a cwd's first global query, and again after each
    invalidation)."""
    entries: int = 0
    """Files and directories in the finished indexes held now."""


@attrs.define(eq=False)
class _Generation:
    abort: threading.Event = attrs.field(factory=threading.Event)
    cancel_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)
    index: FileIndex | None = None
    error: Exception | None = None
    invalidated: bool = False
    waiters: int = 0
    prepare_abort: threading.Event = attrs.field(factory=threading.Event)
    """Stops the ranking preparation that follows a finished scan."""

    def outcome(self) -> FileIndex:
        if self.index is not None and not self.invalidated:
            return self.index
        if self.error is not None:
            raise FileIndexFailedError(f"file search index failed: {self.error}") from self.error
        raise FileIndexInvalidatedError

    def invalidate(self) -> None:
        self.prepare_abort.set()
        if self.done.is_set():
            return
        self.invalidated = True
        self.abort.set()
        self.cancel_scope.cancel()
        self.done.set()


@attrs.define(eq=False)
class _AgentSearch:
    root: str
    generation: _Generation | None = None


class FileReferenceService:
    """Path-only ``@``-completion for many agents, each bounded by its session cwd.

    Start it with ``await nursery.start(service.run)``; directory-mode queries work without it,
    global queries need its nursery to scan in.
    """

    def __init__(
        self,
        config: FileReferencesConfig | None = None,
        *,
        scan_threads: int = _DEFAULT_SCAN_THREADS,
    ) -> None:
        """Create a stopped service.

        Args:
            config: provider settings; upstream's defaults when omitted.
            scan_threads: most index scans running in worker threads at once.
        """
        self._config = config if config is not None else FileReferencesConfig()
        self._scan_limiter = trio.CapacityLimiter(scan_threads)
        self._searches: dict[str, _AgentSearch] = {}
        self._builds = 0
        self._cap_warned: set[str] = set()
        self._nursery: trio.Nursery | None = None
        self._closed = False

    @property
    def config(self) -> FileReferencesConfig:
        """The settings in force."""
        return self._config

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the scans until cancelled; then dispose every search.

        Raises:
            RuntimeError: the service already ran.
        """
        if self._nursery is not None or self._closed:
            raise RuntimeError("FileReferenceService.run() can only be started once")
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._closed = True
            self._nursery = None
            for key in builtins.list(self._searches):
                self.dispose(key)

    async def list(
        self, agent_key: str, cwd: PathLike[str] | str, query: str
    ) -> builtins.list[FileReferenceCandidate]:
        """Return the completion candidates of one query, best first (spec §2.4).

        Args:
            agent_key: the addressed agent; one index is cached per key.
            cwd: the agent's session cwd (the caller passes the host cwd when the session has
                none); bounds discovery. A different cwd for a known key starts a new search.
            query: the text after ``@`` or ``@"``.

        Returns:
            At most ``maxResults`` candidates; empty after the service stopped, or when the
            query leaves the cwd or hits a filesystem error.

        Raises:
            trio.Cancelled: the caller was cancelled (checked first, even after shutdown); a
                shared scan keeps running for the other callers.
            FileIndexInvalidatedError: the index this global query waited for was invalidated.
            FileIndexFailedError: the scan failed unexpectedly.
            RuntimeError: a global query arrived before :meth:`run` started.
        """
        # "If the caller's signal is already aborted, reject ... This check precedes the
        # disposed check" (spec §2.4 step 1, §6.3).
        await trio.lowlevel.checkpoint()
        if self._closed:
            return []
        parsed = parse_query(query)
        search = self._search_for(agent_key, cwd)
        if isinstance(parsed, DirectoryQuery):
            # "Directory-mode queries never touch the cached index" (spec §1.4).
            return await trio.to_thread.run_sync(
                list_directory, search.root, parsed, self._config, abandon_on_cancel=True
            )
        index = await self._index_of(search)
        limit = self._config.max_results
        if len(index) <= _INLINE_RANK_LIMIT:
            return index.search(parsed.needle, limit)
        # A repeated query (backspacing, retyping) is answered from the kept results, with no
        # thread hop.
        cached = index.search_cached(parsed.needle, limit)
        if cached is not None:
            return cached
        # A superseded keystroke leaves at once (the thread is abandoned) and its thread stops
        # at the ranking's next check instead of finishing work nobody will read.
        abort = threading.Event()
        try:
            return await trio.to_thread.run_sync(
                index.search, parsed.needle, limit, abort, abandon_on_cancel=True
            )
        except BaseException:
            abort.set()
            raise

    def invalidate(self, agent_key: str) -> None:
        """Forget the agent's index; call it when the agent's session records a tool result.

        "invalidate() aborts the current scan ... and forgets the generation; the next global
        query starts a fresh scan" (spec §6.4). Unknown keys are ignored.
        """
        search = self._searches.get(agent_key)
        if search is None or search.generation is None:
            return
        generation, search.generation = search.generation, None
        generation.invalidate()

    def on_session_event(self, agent_key: str, event_type: str) -> None:
        """Apply upstream's freshness rule to one event recorded in the agent's session.

        "session/event with event type tool/result: find the agent for that session id; if it
        has a cached search, invalidate it. Every other event type ... [is] ignored" (spec §1.5).

        Args:
            agent_key: the agent whose session recorded the event.
            event_type: the log record's ``type`` (e.g. ``"tool/result"``).
        """
        if event_type == TOOL_RESULT_EVENT:
            self.invalidate(agent_key)

    def dispose(self, agent_key: str) -> None:
        """Drop the agent's search (the agent went away); pending waiters are rejected.

        A later ``list`` for the same key starts afresh, as upstream does (spec §9.14).
        """
        self.invalidate(agent_key)
        self._searches.pop(agent_key, None)

    def statistics(self) -> FileReferenceStatistics:
        """Return a snapshot of cached searches, running scans and waiting callers."""
        generations = [s.generation for s in self._searches.values() if s.generation is not None]
        return FileReferenceStatistics(
            agents=len(self._searches),
            scans_running=sum(not g.done.is_set() for g in generations),
            waiting_callers=sum(g.waiters for g in generations),
            truncated_indexes=sum(g.index is not None and g.index.truncated for g in generations),
            builds=self._builds,
            entries=sum(len(g.index) for g in generations if g.index is not None),
        )

    def index_statistics(self, agent_key: str) -> FileIndexStatistics | None:
        """Return the agent's finished index's size and whether the cap cut it, else ``None``."""
        search = self._searches.get(agent_key)
        generation = search.generation if search is not None else None
        if generation is None or generation.index is None:
            return None
        return generation.index.statistics()

    def _search_for(self, agent_key: str, cwd: PathLike[str] | str) -> _AgentSearch:
        root = absolute_root(cwd)
        search = self._searches.get(agent_key)
        if search is None or search.root != root:
            if search is not None:
                self.invalidate(agent_key)
            search = self._searches[agent_key] = _AgentSearch(root=root)
        return search

    async def _index_of(self, search: _AgentSearch) -> FileIndex:
        generation = search.generation
        if generation is None:
            if self._nursery is None:
                raise RuntimeError("FileReferenceService.run() must be running for global queries")
            generation = search.generation = _Generation()
            self._nursery.start_soon(self._scan, search, generation)
        if not generation.done.is_set():
            generation.waiters += 1
            try:
                await generation.done.wait()
            finally:
                generation.waiters -= 1
        return generation.outcome()

    async def _scan(self, search: _AgentSearch, generation: _Generation) -> None:
        try:
            with generation.cancel_scope:
                index = await trio.to_thread.run_sync(
                    build_index,
                    search.root,
                    self._config,
                    generation.abort,
                    abandon_on_cancel=True,
                    limiter=self._scan_limiter,
                )
                if not generation.invalidated:
                    generation.index = index
                    self._builds += 1
                    if index.truncated and search.root not in self._cap_warned:
                        # Upstream cuts silently (spec §9.4); say so once per directory, not
                        # again for every agent working in it.
                        self._cap_warned.add(search.root)
                        _LOG.warning(
                            "file-reference-local: the index of %s stopped at maxEntries=%d;"
                            " deeper paths are not offered (set unlimitedEntries = true in"
                            " [fileReferences] to index the whole tree)",
                            search.root,
                            index.entry_cap,
                        )
        except ScanAbortedError:
            pass  # invalidated: the waiters were already rejected
        except Exception as exc:
            # "If a scan ever failed for a non-abort reason, the generation would be cleared and
            # waiters rejected with that Error" (spec §6.4); the service itself carries on.
            _LOG.warning("file-reference-local: index scan of %s failed", search.root, exc_info=exc)
            generation.error = exc
            if search.generation is generation:
                search.generation = None
        finally:
            # On shutdown the task is cancelled from outside; stop an abandoned walk as well.
            generation.abort.set()
            generation.done.set()
        if generation.index is not None and not generation.invalidated:
            await self._prepare(generation.index, generation)

    async def _prepare(self, index: FileIndex, generation: _Generation) -> None:
        # After the waiters have their index: the ranking's one-off work (grouping by parent
        # directory, the subsequence tier's bit sets) in a worker thread, so the first
        # keystroke that needs it does not pay for it. It starts a moment later, so the
        # waiters' own rankings do not share the interpreter with it.
        try:
            await trio.sleep(_PREPARE_DELAY)
            if generation.prepare_abort.is_set():
                return
            await trio.to_thread.run_sync(
                index.prepare,
                generation.prepare_abort,
                abandon_on_cancel=True,
                limiter=self._scan_limiter,
            )
        except RankAbortedError:
            pass  # invalidated or disposed meanwhile
        except Exception as exc:
            _LOG.warning(
                "file-reference-local: preparing the index of %s failed", index.root, exc_info=exc
            )
        finally:
            generation.prepare_abort.set()  # a cancelled (abandoned) thread stops as well
