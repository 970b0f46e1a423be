"""FileReferenceService: per-agent index lifecycle, sharing, cancellation and invalidation
(spec §1.4, §4.10, §6.3, §6.4)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

import actors.file_references._service as service_module
from actors.file_references._config import FileReferencesConfig
from actors.file_references._index import FileIndex, FileIndexStatistics, build_index
from actors.file_references._query import DirectoryQuery, FileReferenceCandidate
from actors.file_references._rank import RankAbortedError
from actors.file_references._service import (
    TOOL_RESULT_EVENT,
    FileIndexFailedError,
    FileIndexInvalidatedError,
    FileReferenceService,
    FileReferenceStatistics,
)


def make_upstream_tree(base: Path) -> Path:
    """Build the tree behind the spec's worked examples, with an outside directory beside it."""
    outside = base / "outside"
    outside.mkdir()
    (outside / "outside-secret.txt").write_text("secret")
    root = base / "root"
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / ".hidden").mkdir()
    (root / "node_modules" / "pkg").mkdir(parents=True)
    (root / "README.md").write_text("# readme")
    (root / "src" / "tui.spec.ts").write_text("")
    (root / "src" / "terminal-view.ts").write_text("")
    (root / "docs" / "design notes.md").write_text("")
    (root / ".hidden" / "secret.txt").write_text("")
    (root / "node_modules" / "pkg" / "index.js").write_text("")
    (root / "linked-test.ts").symlink_to(root / "src" / "tui.spec.ts")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    return root


class GatedBuild:
    """A build_index stand-in that counts calls and waits for its gate before scanning."""

    def __init__(self) -> None:
        self.calls = 0
        self.gate = threading.Event()
        self.started = threading.Event()
        self.fail_next: Exception | None = None

    def __call__(
        self, root: str, config: FileReferencesConfig, abort: threading.Event | None = None
    ) -> FileIndex:
        self.calls += 1
        self.started.set()
        self.gate.wait(timeout=30)
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        return build_index(root, config, abort)

    async def wait_started(self) -> None:
        await trio.to_thread.run_sync(self.started.wait, 30)
        self.started.clear()


@pytest.fixture
def gated(monkeypatch: pytest.MonkeyPatch) -> Iterator[GatedBuild]:
    build = GatedBuild()
    monkeypatch.setattr(service_module, "build_index", build)
    try:
        yield build
    finally:
        build.gate.set()  # never leave a worker thread parked


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_upstream_tree(tmp_path)


@pytest.fixture
async def service(nursery: trio.Nursery) -> FileReferenceService:
    svc = FileReferenceService()
    await nursery.start(svc.run)
    return svc


def paths(candidates: list[FileReferenceCandidate]) -> list[str]:
    return [candidate.path for candidate in candidates]


class TestUpstreamExamples:
    # Spec §3.4 "Worked examples on the upstream fixture ... with maxResults 20".
    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            (
                "s",
                ["src", "docs", "src/tui.spec.ts", "docs/design notes.md", "src/terminal-view.ts"],
            ),
            (
                ".",
                [
                    ".hidden",
                    "README.md",
                    "src/tui.spec.ts",
                    ".hidden/secret.txt",
                    "docs/design notes.md",
                    "src/terminal-view.ts",
                ],
            ),
            ("..", ["src/tui.spec.ts", ".hidden/secret.txt"]),
            ("src", ["src", "src/tui.spec.ts", "src/terminal-view.ts"]),
            ("node_modules", []),
            ("index", []),
            ("linked", []),
            ("escape", []),
            ("TUI", ["src/tui.spec.ts"]),
            ("design n", ["docs/design notes.md"]),
            ("secret", []),
        ],
    )
    async def test_global(
        self, service: FileReferenceService, root: Path, query: str, expected: list[str]
    ) -> None:
        """Global queries give the spec's worked results."""
        with trio.fail_after(10):
            assert paths(await service.list("agent", root, query)) == expected

    async def test_kinds(self, service: FileReferenceService, root: Path) -> None:
        """Candidates carry their kind; directories have no trailing slash."""
        with trio.fail_after(10):
            assert await service.list("agent", root, "src") == [
                FileReferenceCandidate("src", "directory"),
                FileReferenceCandidate("src/tui.spec.ts", "file"),
                FileReferenceCandidate("src/terminal-view.ts", "file"),
            ]

    async def test_directory_mode(self, service: FileReferenceService, root: Path) -> None:
        """Directory queries list live, with the typed prefix echoed."""
        with trio.fail_after(10):
            assert paths(await service.list("agent", root, "./src/")) == [
                "./src/terminal-view.ts",
                "./src/tui.spec.ts",
            ]
            assert paths(await service.list("agent", str(root), "src\\tu")) == ["src/tui.spec.ts"]

    async def test_max_results(self, nursery: trio.Nursery, tmp_path: Path) -> None:
        """maxResults caps both modes."""
        for i in range(5):
            (tmp_path / f"file{i}").write_text("")
        svc = FileReferenceService(FileReferencesConfig(max_results=2))
        await nursery.start(svc.run)
        with trio.fail_after(10):
            assert paths(await svc.list("a", tmp_path, "file")) == ["file0", "file1"]
            assert paths(await svc.list("a", tmp_path, "")) == ["file0", "file1"]


class TestIndexLifecycle:
    async def test_concurrent_callers_share_one_scan(
        self, service: FileReferenceService, root: Path, gated: GatedBuild
    ) -> None:
        """'shared by every concurrent and later global query until invalidated'."""
        results: dict[str, list[str]] = {}

        async def ask(query: str) -> None:
            results[query] = paths(await service.list("agent", root, query))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for query in ("s", "src", "TUI"):
                    nursery.start_soon(ask, query)
                await gated.wait_started()
                await trio.testing.wait_all_tasks_blocked()
                assert service.statistics() == FileReferenceStatistics(
                    agents=1, scans_running=1, waiting_callers=3, truncated_indexes=0
                )
                gated.gate.set()
            await service.list("agent", root, "docs")
        assert gated.calls == 1
        assert results["TUI"] == ["src/tui.spec.ts"]
        assert results["src"] == ["src", "src/tui.spec.ts", "src/terminal-view.ts"]

    async def test_index_is_stale_until_invalidated(
        self, service: FileReferenceService, root: Path
    ) -> None:
        """'a new file is not found until invalidate()' (pinned); listings are live meanwhile."""
        with trio.fail_after(10):
            assert await service.list("agent", root, "fresh") == []
            (root / "docs" / "fresh.md").write_text("")
            assert await service.list("agent", root, "fresh") == []
            assert paths(await service.list("agent", root, "docs/fre")) == ["docs/fresh.md"]
            service.invalidate("agent")
            assert paths(await service.list("agent", root, "fresh")) == ["docs/fresh.md"]

    async def test_directory_mode_never_scans(
        self, service: FileReferenceService, root: Path, gated: GatedBuild
    ) -> None:
        """'Directory-mode queries never touch the cached index'."""
        with trio.fail_after(10):
            for query in ("", "src/", "./", "docs/d"):
                await service.list("agent", root, query)
        assert gated.calls == 0
        assert service.index_statistics("agent") is None

    async def test_agents_have_separate_indexes(
        self, service: FileReferenceService, tmp_path: Path
    ) -> None:
        """One index per agent key, each bounded by its own cwd."""
        (tmp_path / "one").mkdir()
        (tmp_path / "one" / "alpha.txt").write_text("")
        (tmp_path / "two").mkdir()
        (tmp_path / "two" / "alpha-two.txt").write_text("")
        with trio.fail_after(10):
            assert paths(await service.list("a", tmp_path / "one", "alpha")) == ["alpha.txt"]
            assert paths(await service.list("b", tmp_path / "two", "alpha")) == ["alpha-two.txt"]
        assert service.statistics().agents == 2

    async def test_new_cwd_for_a_key_starts_a_new_search(
        self, service: FileReferenceService, tmp_path: Path
    ) -> None:
        """A different cwd for a known key replaces its search instead of serving stale paths."""
        (tmp_path / "one").mkdir()
        (tmp_path / "one" / "alpha.txt").write_text("")
        (tmp_path / "two").mkdir()
        (tmp_path / "two" / "alpha-two.txt").write_text("")
        with trio.fail_after(10):
            assert paths(await service.list("a", tmp_path / "one", "alpha")) == ["alpha.txt"]
            assert paths(await service.list("a", tmp_path / "two", "alpha")) == ["alpha-two.txt"]
        assert service.statistics().agents == 1

    async def test_statistics_report_the_cap(
        self, nursery: trio.Nursery, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """When the entry cap cuts the index, statistics and the log say so, the log once per
        directory; builds and entries held are counted (``serve --metrics``)."""
        for i in range(5):
            (tmp_path / f"f{i}").write_text("")
        svc = FileReferenceService(FileReferencesConfig(max_entries=3))
        await nursery.start(svc.run)
        with trio.fail_after(10):
            assert paths(await svc.list("a", tmp_path, "f")) == ["f0", "f1", "f2"]
        assert "stopped at maxEntries=3" in caplog.text
        assert "unlimitedEntries" in caplog.text
        assert svc.index_statistics("a") == FileIndexStatistics(
            entries=3, directories=0, truncated=True, entry_cap=3
        )
        assert svc.statistics().truncated_indexes == 1
        assert svc.index_statistics("unknown") is None
        # A second agent in the same directory hits the same cap: said once, not again.
        with trio.fail_after(10):
            await svc.list("b", tmp_path, "f")
        assert caplog.text.count("stopped at maxEntries=3") == 1
        assert svc.statistics().builds == 2
        assert svc.statistics().entries == 6

    async def test_large_index_ranks_in_a_thread(
        self, service: FileReferenceService, root: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Ranking off the event loop (big unlimited indexes) gives the same answers."""
        with trio.fail_after(10):
            inline = paths(await service.list("agent", root, "s"))
            monkeypatch.setattr(service_module, "_INLINE_RANK_LIMIT", 0)
            assert paths(await service.list("agent", root, "s")) == inline

    async def test_cancelled_caller_stops_its_ranking_thread(
        self, service: FileReferenceService, root: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A caller cancelled (superseded) while its ranking runs in a thread leaves at once,
        and the abandoned thread sees its abort flag instead of finishing unread work."""
        monkeypatch.setattr(service_module, "_INLINE_RANK_LIMIT", 0)
        with trio.fail_after(10):
            await service.list("agent", root, "s")  # builds the index
        started = threading.Event()
        stopped = threading.Event()

        def slow_search(
            index: FileIndex, needle: str, limit: int, abort: threading.Event | None = None
        ) -> list[FileReferenceCandidate]:
            started.set()
            if abort is not None and abort.wait(10):
                stopped.set()
            raise RankAbortedError("stopped")

        monkeypatch.setattr(FileIndex, "search", slow_search)
        scope = trio.CancelScope()

        async def keystroke() -> None:
            with scope:
                await service.list("agent", root, "t")

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(keystroke)
                await trio.to_thread.run_sync(started.wait, 10)
                scope.cancel()
            await trio.to_thread.run_sync(stopped.wait, 10)
        assert scope.cancelled_caught
        assert stopped.is_set()

    async def test_filesystem_errors_give_empty_lists(
        self, service: FileReferenceService, tmp_path: Path
    ) -> None:
        """A missing cwd answers every query with an empty list."""
        with trio.fail_after(10):
            for query in ("", "a", "src/", "../", "\x00"):
                assert await service.list("agent", tmp_path / "missing", query) == []


class TestCancellation:
    async def test_pre_cancelled_call_raises_before_anything(
        self, service: FileReferenceService, root: Path
    ) -> None:
        """'If the caller's signal is already aborted, reject' — before any work."""
        with trio.CancelScope() as scope:
            scope.cancel()
            await service.list("agent", root, "s")
        assert scope.cancelled_caught
        assert service.statistics().agents == 0

    async def test_cancelled_waiter_leaves_scan_running(
        self, service: FileReferenceService, root: Path, gated: GatedBuild
    ) -> None:
        """A cancelled caller gets Cancelled; the shared scan goes on and serves the others."""
        outcome: list[str] = []
        others: list[list[str]] = []
        waiter_scope = trio.CancelScope()

        async def cancelled_caller() -> None:
            with waiter_scope:
                await service.list("agent", root, "s")
                outcome.append("returned")
            outcome.append("cancelled" if waiter_scope.cancelled_caught else "left")

        async def other_caller() -> None:
            others.append(paths(await service.list("agent", root, "src")))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancelled_caller)
                nursery.start_soon(other_caller)
                await gated.wait_started()
                await trio.testing.wait_all_tasks_blocked()
                waiter_scope.cancel()
                await trio.testing.wait_all_tasks_blocked()
                assert outcome == ["cancelled"]
                stats = service.statistics()
                assert (stats.scans_running, stats.waiting_callers) == (1, 1)
                gated.gate.set()
            # "the finished index is kept for later queries"
            assert paths(await service.list("agent", root, "docs")) == [
                "docs",
                "docs/design notes.md",
            ]
        assert others == [["src", "src/tui.spec.ts", "src/terminal-view.ts"]]
        assert gated.calls == 1

    async def test_scan_survives_all_waiters_leaving(
        self, service: FileReferenceService, root: Path, gated: GatedBuild
    ) -> None:
        """'Scan keeps running after every waiter left (the work is kept for the next query)'."""
        with trio.fail_after(10):
            with trio.move_on_after(0.05):
                await service.list("agent", root, "s")
            gated.gate.set()
            assert paths(await service.list("agent", root, "src"))[0] == "src"
        assert gated.calls == 1

    async def test_cancelled_directory_listing(
        self, service: FileReferenceService, root: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A directory listing stuck on a slow disk is abandoned at once on cancel."""
        release = threading.Event()
        entered = threading.Event()

        def slow_listing(
            root: str, query: DirectoryQuery, config: FileReferencesConfig
        ) -> list[FileReferenceCandidate]:
            entered.set()
            release.wait(timeout=30)
            return []

        monkeypatch.setattr(service_module, "list_directory", slow_listing)
        try:
            with trio.fail_after(10):
                with trio.CancelScope() as scope:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(service.list, "agent", root, "src/")
                        await trio.to_thread.run_sync(entered.wait, 10)
                        scope.cancel()
                assert scope.cancelled_caught
        finally:
            release.set()


class TestInvalidation:
    async def test_invalidate_during_scan_rejects_waiters(
        self, service: FileReferenceService, root: Path, gated: GatedBuild
    ) -> None:
        """'Any caller still waiting on the aborted scan is rejected with ... "file search index
        invalidated" (not transparently retried)'; the next query scans afresh."""
        errors: list[str] = []

        async def caller(query: str) -> None:
            try:
                await service.list("agent", root, query)
            except FileIndexInvalidatedError as error:
                errors.append(str(error))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(caller, "s")
                nursery.start_soon(caller, "src")
                await gated.wait_started()
                await trio.testing.wait_all_tasks_blocked()
                service.invalidate("agent")
            assert errors == ["file search index invalidated"] * 2
            assert service.statistics().waiting_callers == 0
            gated.gate.set()
            assert paths(await service.list("agent", root, "TUI")) == ["src/tui.spec.ts"]
        assert gated.calls == 2

    async def test_invalidate_unknown_or_idle_agent_is_a_no_op(
        self, service: FileReferenceService, root: Path
    ) -> None:
        """Invalidating an agent without an index does nothing."""
        service.invalidate("nobody")
        with trio.fail_after(10):
            await service.list("agent", root, "")  # a search without an index
        service.invalidate("agent")
        assert service.statistics().agents == 1

    async def test_dispose_drops_the_agent(
        self, service: FileReferenceService, root: Path, gated: GatedBuild
    ) -> None:
        """dispose rejects pending waiters, forgets the agent, and a later list starts afresh."""
        errors: list[BaseException] = []

        async def caller() -> None:
            try:
                await service.list("agent", root, "s")
            except FileIndexInvalidatedError as error:
                errors.append(error)

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(caller)
                await gated.wait_started()
                await trio.testing.wait_all_tasks_blocked()
                service.dispose("agent")
            assert len(errors) == 1
            assert service.statistics().agents == 0
            gated.gate.set()
            assert paths(await service.list("agent", root, "TUI")) == ["src/tui.spec.ts"]
        service.dispose("agent")
        service.dispose("agent")  # idempotent
        assert service.statistics().agents == 0

    async def test_failed_scan_rejects_then_retries(
        self, service: FileReferenceService, root: Path, gated: GatedBuild
    ) -> None:
        """An unexpected scan failure rejects its waiters; the next query scans again."""
        gated.fail_next = RuntimeError("disk on fire")
        gated.gate.set()
        with trio.fail_after(10):
            with pytest.raises(FileIndexFailedError, match="disk on fire") as caught:
                await service.list("agent", root, "s")
            assert isinstance(caught.value.__cause__, RuntimeError)
            assert paths(await service.list("agent", root, "TUI")) == ["src/tui.spec.ts"]
        assert gated.calls == 2


class TestServiceLifecycle:
    async def test_global_query_needs_run(self, root: Path) -> None:
        """Global queries need the service's nursery; directory queries do not."""
        svc = FileReferenceService()
        with trio.fail_after(10):
            assert paths(await svc.list("agent", root, "src/")) == [
                "src/terminal-view.ts",
                "src/tui.spec.ts",
            ]
            with pytest.raises(RuntimeError, match=r"run\(\) must be running"):
                await svc.list("agent", root, "src")

    async def test_run_only_once(self, service: FileReferenceService) -> None:
        """A service cannot be run twice."""
        with pytest.raises(RuntimeError, match="only be started once"):
            await service.run()

    async def test_shutdown_rejects_waiters_and_empties_later_calls(
        self, root: Path, gated: GatedBuild
    ) -> None:
        """Stopping the service rejects pending waiters; later calls return empty lists."""
        svc = FileReferenceService()
        errors: list[str] = []
        run_scope = trio.CancelScope()

        async def run_service(*, task_status: trio.TaskStatus[None]) -> None:
            with run_scope:
                await svc.run(task_status=task_status)

        async def caller() -> None:
            try:
                await svc.list("agent", root, "s")
            except FileIndexInvalidatedError as error:
                errors.append(str(error))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await nursery.start(run_service)
                nursery.start_soon(caller)
                await gated.wait_started()
                await trio.testing.wait_all_tasks_blocked()
                run_scope.cancel()
            assert errors == ["file search index invalidated"]
            assert svc.statistics().agents == 0
            assert await svc.list("agent", root, "s") == []
            assert await svc.list("agent", root, "") == []
            with trio.CancelScope() as scope:
                scope.cancel()
                await svc.list("agent", root, "")
            assert scope.cancelled_caught  # cancellation is checked even after shutdown
        with pytest.raises(RuntimeError, match="only be started once"):
            await svc.run()

    def test_config_property(self) -> None:
        """The service exposes the configuration in force."""
        config = FileReferencesConfig(max_results=3)
        assert FileReferenceService(config).config is config
        assert FileReferenceService().config == FileReferencesConfig()


FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "dsh-sessions"


async def test_real_session_events_invalidate_only_on_tool_results(
    service: FileReferenceService, root: Path
) -> None:
    """Replaying a recorded DSH session, only its tool/result records drop the index."""
    if not FIXTURES.is_dir():
        pytest.skip(f"DSH fixtures not found at {FIXTURES}")
    log = FIXTURES / "examples__acp-agent__tests__snapshots__cancel-tool-calls__session.jsonl"
    if not log.is_file():
        pytest.skip(f"DSH fixture {log.name} not found")
    types = [json.loads(line)["type"] for line in log.read_text().splitlines() if line.strip()]
    assert TOOL_RESULT_EVENT in types
    with trio.fail_after(10):
        await service.list("agent", root, "s")
        for event_type in types:
            was_indexed = service.index_statistics("agent") is not None
            service.on_session_event("agent", event_type)
            if event_type == TOOL_RESULT_EVENT:
                assert service.index_statistics("agent") is None
                await service.list("agent", root, "s")  # rebuild for the next tool result
            else:
                assert (service.index_statistics("agent") is not None) == was_indexed
