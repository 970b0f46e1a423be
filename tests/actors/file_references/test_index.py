"""The breadth-first tree index behind global queries (spec §4.2, §4.4-4.7) and the opt-in
ignore-file rules."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

import actors.file_references._fs as fs
import actors.file_references._index as index_module
from actors.file_references._config import FileReferencesConfig
from actors.file_references._index import FileIndexStatistics, ScanAbortedError, build_index

DEFAULT = FileReferencesConfig()


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


def walk(root: Path | str, config: FileReferencesConfig = DEFAULT) -> list[str]:
    """Indexed paths in walk order, directories marked with a trailing slash."""
    entries = build_index(root, config).entries()
    return [path + ("/" if is_directory else "") for path, is_directory in entries]


def make_packages(root: Path, packages: int, files: int) -> None:
    """The spec's synthetic wide tree: pkgN/src/lib/*.ts."""
    for p in range(packages):
        lib = root / f"pkg{p}" / "src" / "lib"
        lib.mkdir(parents=True)
        for f in range(files):
            (lib / f"f{f}.ts").write_text("")


class TestWalk:
    def test_breadth_first_sorted_by_name(self, tmp_path: Path) -> None:
        """Entries come level by level, each directory in code-unit name order."""
        root = make_upstream_tree(tmp_path)
        assert walk(root) == [
            ".hidden/",
            "README.md",
            "docs/",
            "src/",
            ".hidden/secret.txt",
            "docs/design notes.md",
            "src/terminal-view.ts",
            "src/tui.spec.ts",
        ]

    def test_links_are_never_indexed_nor_followed(self, tmp_path: Path) -> None:
        """'symbolic links to files or directories, broken links ... is ignored'."""
        root = make_upstream_tree(tmp_path)
        (root / "broken").symlink_to(root / "nowhere")
        os.mkfifo(root / "pipe")
        paths = walk(root)
        assert not any(
            name in path for path in paths for name in ("linked", "escape", "outside", "broken")
        )
        assert "pipe" not in paths

    def test_code_unit_order_puts_uppercase_first(self, tmp_path: Path) -> None:
        """Names sort by code unit: 'Z' before 'a', '_' between them."""
        for name in ("a", "Z", "_", "B"):
            (tmp_path / name).write_text("")
        assert walk(tmp_path) == ["B", "Z", "_", "a"]

    def test_excluded_directories_anywhere(self, tmp_path: Path) -> None:
        """Excluded basenames are skipped at any depth; a file with that name is kept."""
        (tmp_path / "a" / "node_modules" / "x").mkdir(parents=True)
        (tmp_path / "a" / ".git").mkdir()
        (tmp_path / "b").mkdir()
        (tmp_path / "b" / "node_modules").write_text("")
        assert walk(tmp_path) == ["a/", "b/", "b/node_modules"]

    def test_empty_exclusions_index_git(self, tmp_path: Path) -> None:
        """With excludedDirectories [] '.git is indexed, though still hidden by the dot rule'."""
        (tmp_path / ".git").mkdir()
        (tmp_path / ".git" / "HEAD").write_text("")
        config = FileReferencesConfig(excluded_directories=())
        assert walk(tmp_path, config) == [".git/", ".git/HEAD"]
        index = build_index(tmp_path, config)
        assert index.search("HEAD", 20) == []
        assert [c.path for c in index.search(".git", 20)] == [".git", ".git/HEAD"]

    def test_missing_root_gives_empty_index(self, tmp_path: Path) -> None:
        """A missing root yields an empty index, not an error."""
        index = build_index(tmp_path / "missing", DEFAULT)
        assert len(index) == 0
        assert index.search("a", 20) == []

    def test_root_may_be_a_link(self, tmp_path: Path) -> None:
        """The root is used as given, even through a symbolic link."""
        root = make_upstream_tree(tmp_path)
        alias = tmp_path / "alias"
        alias.symlink_to(root, target_is_directory=True)
        assert walk(alias) == walk(root)

    def test_non_utf8_names_are_skipped(self, tmp_path: Path) -> None:
        """A name that is not UTF-8 is not indexed."""
        try:
            os.close(os.open(os.fsencode(tmp_path) + b"/bad\xff", os.O_CREAT | os.O_WRONLY))
        except OSError:
            pytest.skip("filesystem refuses non-UTF-8 names")
        (tmp_path / "good").write_text("")
        assert walk(tmp_path) == ["good"]

    def test_unreadable_subtree_is_skipped(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """'An unreadable or vanished directory contributes nothing; the scan continues.'"""
        for name in ("a", "b", "c"):
            (tmp_path / name).mkdir()
            (tmp_path / name / "f").write_text("")
        real_open = fs.open_subdirectory

        def deny_b(
            root: str, relative: str, identity: fs.Identity | None
        ) -> fs.DirectoryHandle | None:
            return None if relative == "b" else real_open(root, relative, identity)

        monkeypatch.setattr(index_module, "open_subdirectory", deny_b)
        assert walk(tmp_path) == ["a/", "b/", "c/", "a/f", "c/f"]

    def test_hidden_paths_found_only_by_dot_queries(self, tmp_path: Path) -> None:
        """'@workflow will not find .github/workflows/x.yml' but a query starting with '.' does."""
        (tmp_path / ".github" / "workflows").mkdir(parents=True)
        (tmp_path / ".github" / "workflows" / "x.yml").write_text("")
        index = build_index(tmp_path, DEFAULT)
        assert index.search("workflow", 20) == []
        assert [c.path for c in index.search(".workflow", 2)] == [
            ".github/workflows",
            ".github/workflows/x.yml",
        ]
        assert [c.path for c in index.search(".gith", 20)] == [
            ".github",
            ".github/workflows",
            ".github/workflows/x.yml",
        ]
        assert ".github/workflows/x.yml" in [c.path for c in index.search(".yml", 20)]


class TestEntryCap:
    def test_cap_cuts_breadth_first_in_name_order(self, tmp_path: Path) -> None:
        """The cap keeps all directories and the files of the first packages in name order."""
        make_packages(tmp_path, packages=20, files=5)
        config = FileReferencesConfig(max_entries=60 + 7 * 5)
        index = build_index(tmp_path, config)
        files = [path for path, is_directory in index.entries() if not is_directory]
        packages = sorted({path.split("/")[0] for path in files})
        # "pkg0, pkg1, pkg10, pkg100, …": code-unit order, not numeric.
        assert packages == ["pkg0", "pkg1", "pkg10", "pkg11", "pkg12", "pkg13", "pkg14"]
        assert len(index) == 95
        assert index.statistics() == FileIndexStatistics(
            entries=95, directories=60, truncated=True, entry_cap=95
        )
        assert not any(path.startswith(("pkg2/", "pkg9/")) for path in files)

    def test_cap_stops_mid_directory(self, tmp_path: Path) -> None:
        """'Stop as soon as the index holds maxEntries items, even in the middle of a directory.'"""
        make_packages(tmp_path, packages=3, files=5)
        index = build_index(tmp_path, FileReferencesConfig(max_entries=9 + 2))
        kept = [path for path, _ in index.entries()[9:]]
        assert kept == ["pkg0/src/lib/f0.ts", "pkg0/src/lib/f1.ts"]
        assert index.truncated

    def test_exact_fit_is_not_truncated(self, tmp_path: Path) -> None:
        """A tree with exactly maxEntries entries is complete, so it is not reported as cut."""
        make_packages(tmp_path, packages=2, files=2)
        index = build_index(tmp_path, FileReferencesConfig(max_entries=10))
        assert len(index) == 10
        assert not index.truncated
        assert build_index(tmp_path, FileReferencesConfig(max_entries=9)).truncated

    def test_hidden_entries_count_links_do_not(self, tmp_path: Path) -> None:
        """'Hidden entries count toward the cap; excluded directories and ignored types do not.'"""
        (tmp_path / ".a").write_text("")
        (tmp_path / "link").symlink_to(tmp_path / ".a")
        (tmp_path / "node_modules").mkdir()
        (tmp_path / "z").write_text("")
        assert walk(tmp_path, FileReferencesConfig(max_entries=1)) == [".a"]
        assert walk(tmp_path, FileReferencesConfig(max_entries=2)) == [".a", "z"]

    def test_unlimited_entries_lifts_the_cap(self, tmp_path: Path) -> None:
        """unlimitedEntries indexes the whole tree regardless of maxEntries."""
        make_packages(tmp_path, packages=4, files=5)
        config = FileReferencesConfig(max_entries=1, unlimited_entries=True)
        index = build_index(tmp_path, config)
        assert index.statistics() == FileIndexStatistics(
            entries=32, directories=12, truncated=False, entry_cap=None
        )


class TestAbortAndRaces:
    def test_abort_flag_stops_the_walk(self, tmp_path: Path) -> None:
        """A set abort flag stops the walk before the next directory."""
        make_packages(tmp_path, packages=2, files=1)
        abort = threading.Event()
        abort.set()
        with pytest.raises(ScanAbortedError, match="invalidated"):
            build_index(tmp_path, DEFAULT, abort)

    @pytest.mark.parametrize("use_descriptors", [True, False], ids=["descriptors", "lstat"])
    def test_directory_swapped_for_link_after_listing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_descriptors: bool
    ) -> None:
        """A directory replaced by a link to outside between listing and reading is skipped."""
        root = tmp_path / "root"
        (root / "a" / "b").mkdir(parents=True)
        (root / "a" / "b" / "inside.txt").write_text("")
        outside = tmp_path / "outside"
        (outside / "b").mkdir(parents=True)
        (outside / "b" / "outside-secret.txt").write_text("")
        monkeypatch.setattr(fs, "USE_DESCRIPTORS", use_descriptors)
        real_read = fs.read_entries
        swapped = False

        def read_then_swap(
            handle: fs.DirectoryHandle, *, identities: bool = False, device: int | None = None
        ) -> list[fs.ListedEntry]:
            nonlocal swapped
            listed = real_read(handle, identities=identities, device=device)
            if not swapped and any(name == "b" for name, _, _ in listed):
                # "a" was just listed and "a/b" queued: swap "a" for a link to outside.
                swapped = True
                (root / "a").rename(tmp_path / "moved")
                (root / "a").symlink_to(outside, target_is_directory=True)
            return listed

        monkeypatch.setattr(index_module, "read_entries", read_then_swap)
        paths = walk(root)
        assert swapped
        assert paths == ["a/", "a/b/"]
        assert not any("secret" in path for path in paths)

    @pytest.mark.parametrize("use_descriptors", [True, False], ids=["descriptors", "lstat"])
    def test_final_component_swapped_for_link(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_descriptors: bool
    ) -> None:
        """A queued directory that became a link is not followed."""
        root = tmp_path / "root"
        (root / "d").mkdir(parents=True)
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "outside-secret.txt").write_text("")
        monkeypatch.setattr(fs, "USE_DESCRIPTORS", use_descriptors)
        real_read = fs.read_entries
        swapped = False

        def read_then_swap(
            handle: fs.DirectoryHandle, *, identities: bool = False, device: int | None = None
        ) -> list[fs.ListedEntry]:
            nonlocal swapped
            listed = real_read(handle, identities=identities, device=device)
            if not swapped:
                swapped = True
                (root / "d").rmdir()
                (root / "d").symlink_to(outside, target_is_directory=True)
            return listed

        monkeypatch.setattr(index_module, "read_entries", read_then_swap)
        assert walk(root) == ["d/"]

    def test_path_fallback_matches_descriptor_walk(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The lstat-based fallback walk indexes the same entries."""
        root = make_upstream_tree(tmp_path)
        expected = walk(root)
        monkeypatch.setattr(fs, "USE_DESCRIPTORS", False)
        assert walk(root) == expected


IGNORING = FileReferencesConfig(respect_ignore_files=True)


class TestIgnoreFiles:
    def test_off_by_default(self, tmp_path: Path) -> None:
        """Upstream honours no ignore files, so by default everything is indexed."""
        (tmp_path / ".gitignore").write_text("*.log\n")
        (tmp_path / "a.log").write_text("")
        assert walk(tmp_path) == [".gitignore", "a.log"]

    def test_patterns_negation_and_directories(self, tmp_path: Path) -> None:
        """Globs, '!' negation and 'dir/' patterns behave as in git; ignored dirs are pruned."""
        (tmp_path / ".gitignore").write_text("*.log\n!keep.log\nbuild/\n/top.txt\n")
        for name in ("a.log", "keep.log", "top.txt", "src/top.txt", "build/out.js", "src/b.ts"):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text("")
        assert walk(tmp_path, IGNORING) == [
            ".gitignore",
            "keep.log",
            "src/",
            "src/b.ts",
            "src/top.txt",
        ]

    def test_deeper_file_overrides(self, tmp_path: Path) -> None:
        """A nested .gitignore's match wins over its parent's for paths below it."""
        (tmp_path / ".gitignore").write_text("*.gen\n")
        (tmp_path / "sub").mkdir()
        (tmp_path / "sub" / ".gitignore").write_text("!wanted.gen\n")
        for name in ("x.gen", "sub/x.gen", "sub/wanted.gen"):
            (tmp_path / name).write_text("")
        assert walk(tmp_path, IGNORING) == [
            ".gitignore",
            "sub/",
            "sub/.gitignore",
            "sub/wanted.gen",
        ]

    def test_nested_patterns_are_relative_to_their_directory(self, tmp_path: Path) -> None:
        """An anchored pattern in sub/.gitignore applies to sub's own children only."""
        (tmp_path / "sub" / "sub").mkdir(parents=True)
        (tmp_path / "sub" / ".gitignore").write_text("/sub/\n")
        (tmp_path / "sub" / "sub" / "x").write_text("")
        (tmp_path / "sub2").mkdir()
        assert walk(tmp_path, IGNORING) == ["sub/", "sub2/", "sub/.gitignore"]

    def test_ignore_overrides_gitignore(self, tmp_path: Path) -> None:
        """Within one directory '.ignore' has precedence over '.gitignore'."""
        (tmp_path / ".gitignore").write_text("notes/\n")
        (tmp_path / ".ignore").write_text("!notes/\n")
        (tmp_path / "notes").mkdir()
        (tmp_path / "notes" / "plan.md").write_text("")
        assert walk(tmp_path, IGNORING) == [".gitignore", ".ignore", "notes/", "notes/plan.md"]

    def test_ignored_directory_cannot_be_reincluded(self, tmp_path: Path) -> None:
        """'It is not possible to re-include a file if a parent directory of that file is
        excluded' (git): the directory is pruned whole."""
        (tmp_path / ".gitignore").write_text("dist/\n!dist/keep.js\n")
        (tmp_path / "dist").mkdir()
        (tmp_path / "dist" / "keep.js").write_text("")
        assert walk(tmp_path, IGNORING) == [".gitignore"]

    def test_ancestor_rules_inside_a_git_work_tree(self, tmp_path: Path) -> None:
        """With the cwd below a repository root, the ancestors' rules and info/exclude apply."""
        (tmp_path / ".git" / "info").mkdir(parents=True)
        (tmp_path / ".git" / "info" / "exclude").write_text("*.tmp\n")
        (tmp_path / ".gitignore").write_text("pkg/generated/\n/pkg/top-only.txt\n*.o\n")
        cwd = tmp_path / "pkg"
        (cwd / "generated").mkdir(parents=True)
        (cwd / "generated" / "x.ts").write_text("")
        for name in ("a.tmp", "b.o", "top-only.txt", "main.c"):
            (cwd / name).write_text("")
        assert walk(cwd, IGNORING) == ["main.c"]

    def test_no_ancestor_rules_outside_a_work_tree(self, tmp_path: Path) -> None:
        """Without a '.git' above it, a parent's .gitignore does not apply to the cwd."""
        (tmp_path / ".gitignore").write_text("*.o\n")
        cwd = tmp_path / "pkg"
        cwd.mkdir()
        (cwd / "b.o").write_text("")
        if any((parent / ".git").exists() for parent in tmp_path.parents):
            pytest.skip("the temporary directory lies inside a git work tree")
        assert walk(cwd, IGNORING) == ["b.o"]

    def test_ignored_entries_do_not_count_toward_the_cap(self, tmp_path: Path) -> None:
        """Pruned entries leave room under maxEntries for the rest."""
        (tmp_path / ".gitignore").write_text("a*\n")
        for name in ("a1", "a2", "a3", "b", "c"):
            (tmp_path / name).write_text("")
        config = FileReferencesConfig(respect_ignore_files=True, max_entries=3)
        index = build_index(tmp_path, config)
        assert [path for path, _ in index.entries()] == [".gitignore", "b", "c"]
        assert not index.truncated

    def test_linked_ignore_file_is_not_read(self, tmp_path: Path) -> None:
        """An ignore file that is a link is not followed (it could point anywhere)."""
        (tmp_path / "rules").write_text("*.log\n")
        (tmp_path / ".gitignore").symlink_to(tmp_path / "rules")
        (tmp_path / "a.log").write_text("")
        assert walk(tmp_path, IGNORING) == ["a.log", "rules"]
