"""Directory mode of fileReferences/list: one live directory listing (spec §3.3, §3.4, §4.3-4.8)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import actors.file_references._fs as fs
from actors.file_references._config import FileReferencesConfig
from actors.file_references._listing import list_directory
from actors.file_references._query import DirectoryQuery, FileReferenceCandidate, parse_query

DEFAULT = FileReferencesConfig()


def make_upstream_tree(base: Path, name: str = "root") -> Path:
    """Build the tree behind the spec's worked examples, with an outside directory beside it."""
    outside = base / "outside"
    outside.mkdir()
    (outside / "outside-secret.txt").write_text("secret")
    root = base / name
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


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_upstream_tree(tmp_path)


def listing(root: Path | str, query: str, config: FileReferencesConfig = DEFAULT) -> list[str]:
    parsed = parse_query(query)
    assert isinstance(parsed, DirectoryQuery), query
    return [candidate.path for candidate in list_directory(root, parsed, config)]


def test_root_listing(root: Path) -> None:
    """An empty query lists the cwd: directories first, no dot entries, links, or exclusions."""
    parsed = parse_query("")
    assert isinstance(parsed, DirectoryQuery)
    assert list_directory(root, parsed, DEFAULT) == [
        FileReferenceCandidate("docs", "directory"),
        FileReferenceCandidate("src", "directory"),
        FileReferenceCandidate("README.md", "file"),
    ]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("src/", ["src/terminal-view.ts", "src/tui.spec.ts"]),
        ("src/tu", ["src/tui.spec.ts"]),
        ("./src/", ["./src/terminal-view.ts", "./src/tui.spec.ts"]),
        ("src//", ["src//terminal-view.ts", "src//tui.spec.ts"]),
        ("src/../docs/", ["src/../docs/design notes.md"]),
        ("docs/design n", ["docs/design notes.md"]),
        ("src\\tu", ["src/tui.spec.ts"]),
        (".\\src\\", ["./src/terminal-view.ts", "./src/tui.spec.ts"]),
    ],
)
def test_typed_directory_part_is_echoed(root: Path, query: str, expected: list[str]) -> None:
    """'the directory part the user typed is echoed back verbatim (after backslash→slash)'."""
    assert listing(root, query) == expected


def test_directories_have_no_trailing_slash(root: Path) -> None:
    """'no trailing slash on directories (the slash is added later by the formatter)'."""
    assert listing(root, "./") == ["./docs", "./src", "./README.md"]


def test_absolute_query_inside_root_answers_absolute(tmp_path: Path) -> None:
    """An absolute directory part inside the cwd echoes absolute paths (pinned)."""
    root = make_upstream_tree(tmp_path, name="tu-root")
    assert listing(root, f"{root}/src/") == [
        f"{root}/src/terminal-view.ts",
        f"{root}/src/tui.spec.ts",
    ]
    # "an absolute query <root>/src/tui returns terminal-view.ts as well because t…u occurs in
    # the absolute root path and i in terminal (pinned — the upstream test expects both files)".
    assert listing(root, f"{root}/src/tui") == [
        f"{root}/src/tui.spec.ts",
        f"{root}/src/terminal-view.ts",
    ]


def test_fragment_matches_inside_directory_part(root: Path) -> None:
    """'src/src returns every entry of src/' (path-substring tier, spec §3.4)."""
    assert listing(root, "src/src") == ["src/tui.spec.ts", "src/terminal-view.ts"]


def test_dot_fragment_shows_dot_entries_and_matches_prefix(root: Path) -> None:
    """A fragment starting with '.' shows dot entries, scored against the whole path."""
    # "./docs" and "./src" contain "." in the typed prefix, so they match at the path tier
    # (525), shorter path first.
    assert listing(root, "./.") == ["./.hidden", "./README.md", "./src", "./docs"]


def test_hidden_directory_part_is_listed(root: Path) -> None:
    """'The directory part itself may be hidden (.hidden/ lists secret.txt) (pinned)'."""
    assert listing(root, ".hidden/") == [".hidden/secret.txt"]


def test_dot_entries_hidden_without_dot_fragment(tmp_path: Path) -> None:
    """Dot entries of a listed directory appear only for a fragment starting with '.'."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / ".env").write_text("")
    (tmp_path / "d" / "env.txt").write_text("")
    assert listing(tmp_path, "d/") == ["d/env.txt"]
    assert listing(tmp_path, "d/env") == ["d/env.txt"]
    assert listing(tmp_path, "d/.") == ["d/.env", "d/env.txt"]
    assert listing(tmp_path, "d/.e") == ["d/.env"]


@pytest.mark.parametrize(
    "query",
    ["node_modules/", "node_modules/pkg/", "node_modules/pkg/ind", "src/../node_modules/"],
)
def test_excluded_segments_are_empty(root: Path, query: str) -> None:
    """'node_modules/ and node_modules/pkg/ are empty' (spec §4.3 step 1)."""
    assert listing(root, query) == []


def test_excluded_names_apply_to_directories_only(tmp_path: Path) -> None:
    """'a file named node_modules is listed' (spec §4.5)."""
    (tmp_path / "node_modules").write_text("")
    (tmp_path / "a" / "node_modules").mkdir(parents=True)
    assert listing(tmp_path, "") == ["a", "node_modules"]
    assert listing(tmp_path, "a/") == []


def test_empty_exclusions_list_node_modules(root: Path) -> None:
    """With excludedDirectories [] nothing is excluded."""
    config = FileReferencesConfig(excluded_directories=())
    assert listing(root, "node_modules/pkg/", config) == ["node_modules/pkg/index.js"]
    assert "node_modules" in listing(root, "", config)


@pytest.mark.parametrize(
    "query",
    ["escape/", "escape/outs", "./escape/", "src/../escape/", "README.md/", "missing/", "~/"],
)
def test_links_files_and_missing_directories_are_empty(root: Path, query: str) -> None:
    """A path through a link, a file or a missing directory lists nothing (spec §4.3 step 4)."""
    assert listing(root, query) == []


def test_link_in_the_middle_of_the_path_is_refused(tmp_path: Path) -> None:
    """A link anywhere below the root, not just at the end, empties the listing."""
    (tmp_path / "real" / "inner").mkdir(parents=True)
    (tmp_path / "real" / "inner" / "file.txt").write_text("")
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    assert listing(tmp_path, "real/inner/") == ["real/inner/file.txt"]
    assert listing(tmp_path, "alias/inner/") == []


def test_symlinked_root_is_used_as_given(tmp_path: Path) -> None:
    """'The root itself is used as given (it may be, or lie under, a symlink)'."""
    real = make_upstream_tree(tmp_path)
    alias = tmp_path / "alias"
    alias.symlink_to(real, target_is_directory=True)
    assert listing(alias, "src/") == ["src/terminal-view.ts", "src/tui.spec.ts"]


@pytest.mark.parametrize("query", ["../", "../outside/", "/", "/etc/", "a/../../", "~/"])
def test_leaving_the_root_is_empty(root: Path, query: str) -> None:
    """Queries that resolve outside the cwd are empty (spec §4.8)."""
    assert listing(root, query) == []


def test_tilde_is_a_literal_directory(tmp_path: Path) -> None:
    """'no home expansion: treated as a child directory literally named ~' (pinned)."""
    (tmp_path / "~").mkdir()
    (tmp_path / "~" / "note.md").write_text("")
    assert listing(tmp_path, "~/") == ["~/note.md"]


def test_case_sensitive_on_linux(root: Path) -> None:
    """'SRC/' is resolved by the filesystem: empty on a case-sensitive volume."""
    if os.path.exists(root / "SRC"):
        pytest.skip("case-insensitive filesystem")
    assert listing(root, "SRC/") == []
    assert listing(root, "src/TUI") == ["src/tui.spec.ts"]


def test_listing_is_live(root: Path) -> None:
    """'every directory-mode call reads the disk again, so newly created files appear'."""
    assert listing(root, "docs/") == ["docs/design notes.md"]
    (root / "docs" / "new.md").write_text("")
    assert listing(root, "docs/") == ["docs/design notes.md", "docs/new.md"]


def test_special_files_are_not_listed(tmp_path: Path) -> None:
    """FIFOs and broken links are neither files nor directories: not listed."""
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "broken").symlink_to(tmp_path / "nowhere")
    (tmp_path / "plain.txt").write_text("")
    assert listing(tmp_path, "") == ["plain.txt"]


def test_non_utf8_names_are_skipped(tmp_path: Path) -> None:
    """A name that is not UTF-8 cannot be typed nor sent: it is skipped."""
    try:
        os.close(os.open(os.fsencode(tmp_path) + b"/bad\xff.txt", os.O_CREAT | os.O_WRONLY))
    except OSError:
        pytest.skip("filesystem refuses non-UTF-8 names")
    (tmp_path / "good.txt").write_text("")
    assert listing(tmp_path, "") == ["good.txt"]


def test_missing_root_is_empty(tmp_path: Path) -> None:
    """'A missing or unreadable root simply yields empty results'."""
    assert listing(tmp_path / "missing", "") == []
    assert listing(tmp_path / "missing", "src/") == []


def test_nul_in_query_is_empty(root: Path) -> None:
    """Invalid characters in a path are a filesystem error: empty, never a crash."""
    assert listing(root, "src\x00/") == []
    assert listing(root, "src/\x00") == []


def test_max_results_truncates(tmp_path: Path) -> None:
    """Listings are ranked and cut to maxResults."""
    for i in range(30):
        (tmp_path / f"f{i:02}.txt").write_text("")
    assert len(listing(tmp_path, "")) == 20
    assert listing(tmp_path, "", FileReferencesConfig(max_results=2)) == ["f00.txt", "f01.txt"]


def test_ignore_files_do_not_hide_explicit_listings(tmp_path: Path) -> None:
    """With respectIgnoreFiles a typed directory still lists ignored entries (reachability)."""
    (tmp_path / ".gitignore").write_text("*.log\nbuild/\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "a.log").write_text("")
    config = FileReferencesConfig(respect_ignore_files=True)
    assert listing(tmp_path, "", config) == ["build", "a.log"]


@pytest.mark.skipif(os.name != "posix", reason="permission bits")
def test_unreadable_directory_is_empty(tmp_path: Path) -> None:
    """A directory that cannot be read lists nothing, without raising."""
    if os.geteuid() == 0:
        pytest.skip("root reads every directory")
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "x").write_text("")
    (tmp_path / "locked").chmod(0)
    try:
        assert listing(tmp_path, "locked/") == []
    finally:
        (tmp_path / "locked").chmod(0o755)


def test_scandir_failure_is_empty(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error while reading the directory gives an empty list, never an exception."""

    def fail(*args: object) -> None:
        raise PermissionError("denied")

    monkeypatch.setattr(os, "scandir", fail)
    assert listing(root, "src/") == []


def test_path_fallback_matches_descriptor_walk(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lstat walk used where descriptors are unavailable gives the same answers."""
    queries = ["", "src/", "./src/", "escape/", "README.md/", ".hidden/", "../", "src/../docs/"]
    expected = {query: listing(root, query) for query in queries}
    monkeypatch.setattr(fs, "USE_DESCRIPTORS", False)
    assert {query: listing(root, query) for query in queries} == expected
