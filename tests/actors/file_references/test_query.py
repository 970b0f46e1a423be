"""Candidate record, query grammar and lexical containment of fileReferences/list (spec §1.1,
§2.4, §4.3, §4.8)."""

from __future__ import annotations

import os

import attrs
import pytest

from actors.file_references._query import (
    DirectoryQuery,
    FileReferenceCandidate,
    GlobalQuery,
    ResolvedDirectory,
    absolute_root,
    normalise_query,
    parse_query,
    resolve_directory,
)

ROOT = "/abs/root"
EXCLUDED = (".git", "node_modules")


class TestFileCandidate:
    def test_to_wire_has_exactly_path_and_kind(self) -> None:
        """The wire form carries exactly the two upstream fields."""
        assert FileReferenceCandidate("src/a.ts", "file").to_wire() == {
            "path": "src/a.ts",
            "kind": "file",
        }
        assert FileReferenceCandidate("src", "directory").to_wire() == {
            "path": "src",
            "kind": "directory",
        }

    def test_kind_is_validated(self) -> None:
        """A kind other than file or directory is refused at construction."""
        with pytest.raises(ValueError, match="kind"):
            FileReferenceCandidate("x", "symlink")  # type: ignore[arg-type]

    def test_is_frozen_and_comparable(self) -> None:
        """Candidates are immutable values."""
        candidate = FileReferenceCandidate("a", "file")
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            candidate.path = "b"  # type: ignore[misc]
        assert candidate == FileReferenceCandidate("a", "file")
        assert candidate != FileReferenceCandidate("a", "directory")


class TestParseQuery:
    # Spec §2.4 table, row by row.
    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            ("", DirectoryQuery(directory="", fragment="")),
            ("src/", DirectoryQuery(directory="src/", fragment="")),
            ("src/ts", DirectoryQuery(directory="src/", fragment="ts")),
            ("docs/design n", DirectoryQuery(directory="docs/", fragment="design n")),
            ("src\\tu", DirectoryQuery(directory="src/", fragment="tu")),
            ("/abs/root/src/tui", DirectoryQuery(directory="/abs/root/src/", fragment="tui")),
            ("README", GlobalQuery(needle="README")),
            (".", GlobalQuery(needle=".")),
            ("..", GlobalQuery(needle="..")),
            (".hidden", GlobalQuery(needle=".hidden")),
            ("design n", GlobalQuery(needle="design n")),
        ],
    )
    def test_spec_table(self, query: str, expected: object) -> None:
        """Each row of the spec's mode table parses as stated."""
        assert parse_query(query) == expected

    def test_any_slash_forces_directory_mode(self) -> None:
        """'a "fuzzy path" query such as s/tui is not fuzzy over the tree' (spec §2.4)."""
        assert parse_query("s/tui") == DirectoryQuery(directory="s/", fragment="tui")

    def test_tilde_without_slash_is_a_global_needle(self) -> None:
        """'~' alone is matched like any other text, never expanded."""
        assert parse_query("~") == GlobalQuery(needle="~")

    def test_last_slash_splits(self) -> None:
        """The directory part runs up to and including the last slash."""
        assert parse_query("a//b/./c/d") == DirectoryQuery(directory="a//b/./c/", fragment="d")

    def test_backslashes_all_become_slashes(self) -> None:
        """'replace every backslash with a forward slash (on every OS)' (spec §2.4 step 3)."""
        assert normalise_query("a\\b\\\\c") == "a/b//c"
        assert parse_query("..\\..\\x") == DirectoryQuery(directory="../../", fragment="x")

    def test_quotes_and_spaces_are_literal(self) -> None:
        """There is no escape syntax: quotes and spaces are ordinary characters."""
        assert parse_query('"ab"') == GlobalQuery(needle='"ab"')
        assert parse_query(" ") == GlobalQuery(needle=" ")


class TestResolveDirectory:
    def test_empty_directory_is_the_root(self) -> None:
        """An empty directory part means the root itself."""
        assert resolve_directory(ROOT, "", EXCLUDED) == ResolvedDirectory(root=ROOT, segments=())

    @pytest.mark.parametrize(
        ("directory", "segments"),
        [
            ("src/", ("src",)),
            ("./", ()),
            ("./src/", ("src",)),
            ("src//", ("src",)),
            ("src/../docs/", ("docs",)),
            ("a/b/../c/./", ("a", "c")),
            ("/abs/root/src/", ("src",)),
            ("/abs/root/", ()),
            ("//abs/root/src/", ("src",)),
            ("~/", ("~",)),
            ("C:/x/", ("C:", "x")),
            ("..foo/", ("..foo",)),
            ("...//", ("...",)),
        ],
    )
    def test_inside_the_root(self, directory: str, segments: tuple[str, ...]) -> None:
        """Lexically contained parts resolve to their segments (spec §4.3 step 2, §4.8)."""
        assert resolve_directory(ROOT, directory, EXCLUDED) == ResolvedDirectory(
            root=ROOT, segments=segments
        )

    @pytest.mark.parametrize(
        "directory",
        [
            "../",
            "../../",
            "a/../../",
            "src/../../rootx/",
            "/",
            "/etc/",
            "/abs/",
            "/abs/rootx/",
            "/abs/root/../",
            "/abs/root/src/../../x/",
            "//",
            "//etc/",
            "./../",
        ],
    )
    def test_outside_the_root(self, directory: str) -> None:
        """A part that resolves outside the root is refused (spec §4.3 step 3, §4.8)."""
        assert resolve_directory(ROOT, directory, EXCLUDED) is None

    @pytest.mark.parametrize(
        "directory",
        ["node_modules/", "node_modules/pkg/", "src/.git/", "a/node_modules/../b/"],
    )
    def test_excluded_segment_refused(self, directory: str) -> None:
        """Any segment equal to an excluded basename empties the listing (spec §4.3 step 1)."""
        assert resolve_directory(ROOT, directory, EXCLUDED) is None

    def test_excluded_segment_in_absolute_prefix(self) -> None:
        """Segments of an absolute prefix count too: a root under node_modules (spec §9.7)."""
        root = "/work/node_modules/project"
        assert resolve_directory(root, f"{root}/src/", EXCLUDED) is None
        assert resolve_directory(root, "src/", EXCLUDED) == ResolvedDirectory(
            root=root, segments=("src",)
        )

    def test_exclusion_is_case_sensitive(self) -> None:
        """'exclusions compare case-sensitively' (spec §9.8)."""
        assert resolve_directory(ROOT, "Node_Modules/", EXCLUDED) is not None

    def test_dot_can_be_excluded(self) -> None:
        """Upstream does not reject '.' as an excluded name; it then empties './' queries."""
        assert resolve_directory(ROOT, "./src/", (".",)) is None


class TestAbsoluteRoot:
    def test_relative_root_is_made_absolute(self) -> None:
        """A relative root is resolved against the process cwd, lexically."""
        assert absolute_root("a/../b") == os.path.join(os.getcwd(), "b")

    def test_empty_root_means_process_cwd(self) -> None:
        """Upstream falls back to the host process cwd when the session recorded none."""
        assert absolute_root("") == os.getcwd()

    def test_double_slash_collapses(self) -> None:
        """A leading '//' is one root, as in Node's path.resolve."""
        assert absolute_root("//abs//root/") == "/abs/root"


def test_leaving_and_reentering_the_root_is_inside() -> None:
    """Resolution is lexical, so a part that climbs out and back in names the root."""
    assert resolve_directory(ROOT, "src/../../root/", EXCLUDED) == ResolvedDirectory(
        root=ROOT, segments=()
    )
