"""Score tiers, tie-breaks and the result cap of fileReferences/list (spec §3)."""

from __future__ import annotations

import random
import threading

import pytest

from actors.file_references._index import FileIndex
from actors.file_references._pool import RankAbortedError, RankPool
from actors.file_references._query import CandidateKind, FileReferenceCandidate
from actors.file_references._rank import (
    DIRECTORY_BONUS,
    prepare_needle,
    score,
    utf16_units,
)


def pool_of(paths: list[tuple[str, CandidateKind]]) -> RankPool:
    """A pool of (path, kind) pairs."""
    return RankPool(
        [path for path, kind in paths if kind == "directory"],
        [path for path, kind in paths if kind == "file"],
    )


def ranked(paths: list[tuple[str, CandidateKind]], query: str, limit: int = 20) -> list[str]:
    """Rank (path, kind) pairs the way directory mode does and return the paths."""
    pool = pool_of(paths)
    return [pool.candidate(row).path for _, row in pool.rank(prepare_needle(query), limit)]


class TestScoreTiers:
    # Spec §3.1: "The first rule that applies wins".
    @pytest.mark.parametrize(
        ("path", "kind", "query", "expected"),
        [
            ("src/index.ts", "file", "index.ts", 1000),
            ("src", "directory", "src", 1025),
            ("src/index.ts", "file", "ind", 900),
            ("lib/src", "directory", "sr", 925),
            ("src/my-index.ts", "file", "index", 700),
            ("docs", "directory", "oc", 725),
            ("src/tui.spec.ts", "file", "src/t", 500),
            ("src/tui", "directory", "src/", 525),
            ("src/tui.spec.ts", "file", "stui", 300 + 100 - 3),
            ("README.md", "file", "rdm", 300 + 100 - 2),
        ],
    )
    def test_tiers(self, path: str, kind: CandidateKind, query: str, expected: int) -> None:
        """Each tier scores as the spec's table says, with the directory bonus."""
        assert score(path, kind, query) == expected

    def test_no_match_is_dropped(self) -> None:
        """A needle that is not a subsequence drops the candidate."""
        assert score("src/index.ts", "file", "xyz") is None
        assert ranked([("src/index.ts", "file")], "xyz") == []

    def test_empty_needle_scores_zero(self) -> None:
        """'Empty needle ...: every candidate scores 0 and none is dropped.'"""
        assert score("anything", "file", "") == 0

    def test_case_insensitive(self) -> None:
        """'Lower-case both P and q ... no smart-case': TUI finds tui.spec.ts."""
        assert score("src/tui.spec.ts", "file", "TUI") == 900
        assert score("SRC/TUI.SPEC.TS", "file", "tui") == 900

    def test_gap_counts_skipped_characters_before_first_match(self) -> None:
        """'Skipped characters before the first match count too.'"""
        # "abcdef" with needle "df": d at 3, f at 5 -> (5 + 1) - 2 = 4.
        assert score("abcdef", "file", "df") == 300 + 100 - 4

    def test_gap_is_greedy_leftmost(self) -> None:
        """Each needle character takes its first occurrence after the previous match."""
        # Needle "xa" in "axb/zzab": x at 1, then the first "a" after it at 6 -> gap 7 - 2.
        assert score("axb/zzab", "file", "xa") == 300 + 100 - (6 + 1 - 2)

    def test_gap_allowance_floors_at_zero(self) -> None:
        """'300 + max(0, 100 − gap)': a long gap still matches at 300."""
        path = "a" + "x" * 200 + "b"
        assert score(path, "file", "ab") == 300
        assert score(path, "directory", "ab") == 300 + DIRECTORY_BONUS

    def test_best_subsequence_below_path_tier(self) -> None:
        """'the best subsequence score is 425, below the 500 tier'."""
        # Needle "ab" in "a/b": gap 1 -> 399 for a file; the most a subsequence can earn is a
        # directory with gap 0, which is impossible without being a substring.
        assert score("a/b", "directory", "ab") == 300 + 99 + DIRECTORY_BONUS
        assert ranked([("a/b", "directory"), ("x/ab-long-name", "file")], "ab") == [
            "x/ab-long-name",
            "a/b",
        ]

    def test_directory_never_jumps_a_tier(self) -> None:
        """'a directory in one tier (e.g. 725) never outranks a file in a higher tier (900)'."""
        assert ranked([("xsrc", "directory"), ("src.ts", "file")], "src") == ["src.ts", "xsrc"]

    def test_full_unicode_lowercasing(self) -> None:
        """Lower-casing is full Unicode lower-casing (İ lowers to i + combining dot)."""
        assert score("İx", "file", "i") == 900
        assert score("straße", "file", "STRASSE") is None  # lower-casing, not case folding


class TestOrdering:
    def test_directories_first_on_equal_score(self) -> None:
        """Directories before files when scores tie (the bonus makes them score higher)."""
        paths: list[tuple[str, CandidateKind]] = [("b-src.ts", "file"), ("a-src", "directory")]
        assert ranked(paths, "src") == ["a-src", "b-src.ts"]

    def test_shorter_path_first_with_needle(self) -> None:
        """'only when the needle is non-empty: shorter path first'."""
        paths: list[tuple[str, CandidateKind]] = [("aaa/x.ts", "file"), ("b/x.ts", "file")]
        assert ranked(paths, "x") == ["b/x.ts", "aaa/x.ts"]

    def test_no_length_tie_break_without_needle(self) -> None:
        """With an empty needle the order is kind, then path only."""
        paths: list[tuple[str, CandidateKind]] = [
            ("b", "file"),
            ("aaa", "file"),
            ("zz", "directory"),
        ]
        assert ranked(paths, "") == ["zz", "aaa", "b"]

    def test_code_unit_order_without_case_folding(self) -> None:
        """'plain code-unit comparison (no locale, no case folding — Z sorts before a)'."""
        paths: list[tuple[str, CandidateKind]] = [("ab", "file"), ("Zb", "file")]
        assert ranked(paths, "b") == ["Zb", "ab"]

    def test_worked_example_s(self) -> None:
        """Spec §3.4: 's' ranks src, docs, then files with 's' in the basename by length."""
        assert ranked(UPSTREAM_VISIBLE, "s") == [
            "src",
            "docs",
            "src/tui.spec.ts",
            "docs/design notes.md",
            "src/terminal-view.ts",
        ]

    def test_truncates_to_limit(self) -> None:
        """'Then keep the first maxResults.'"""
        paths: list[tuple[str, CandidateKind]] = [(f"f{i:02}", "file") for i in range(30)]
        assert ranked(paths, "f") == [f"f{i:02}" for i in range(20)]
        assert ranked(paths, "f", limit=3) == ["f00", "f01", "f02"]

    def test_scores_are_reported_with_rows(self) -> None:
        """Each ranked row carries its upstream score, best first."""
        paths: list[tuple[str, CandidateKind]] = [("src", "directory"), ("a/src.ts", "file")]
        pool = pool_of(paths)
        found = pool.rank(prepare_needle("src"), 20)
        assert [(value, pool.candidate(row).path) for value, row in found] == [
            (1025, "src"),
            (900, "a/src.ts"),
        ]

    def test_needle_with_nul_matches_nothing(self) -> None:
        """No path contains NUL, so a needle with one matches nothing (not even by tier 5)."""
        assert ranked([("a", "file")], "a\0") == []

    def test_set_abort_flag_stops_ranking(self) -> None:
        """A superseded caller's flag stops the ranking with RankAbortedError."""
        abort = threading.Event()
        abort.set()
        with pytest.raises(RankAbortedError):
            pool_of([("abc", "file")]).rank("ac", 20, abort)


class TestUtf16:
    def test_bmp_text_is_unchanged(self) -> None:
        """Text without astral characters is its own code-unit view."""
        assert utf16_units("héllo\uffff") == "héllo\uffff"

    def test_astral_becomes_surrogates(self) -> None:
        """An astral character counts as two code units, like in JavaScript."""
        assert utf16_units("a\U0001f600") == "a\ud83d\ude00"
        assert len(utf16_units("\U0001f600")) == 2

    def test_length_tie_break_counts_code_units(self) -> None:
        """'UTF-16 length of the returned path': an emoji is longer than two BMP letters."""
        paths: list[tuple[str, CandidateKind]] = [("x\U0001f600", "file"), ("xab", "file")]
        # Both score 900 and have 3 code units, so code-unit order decides: "a" < U+D83D.
        assert ranked(paths, "x") == ["xab", "x\U0001f600"]
        # With 4 units "xabc" is longer than "x😀" (3 units, 2 code points).
        paths = [("x\U0001f600", "file"), ("xabc", "file")]
        assert ranked(paths, "x") == ["x\U0001f600", "xabc"]

    def test_astral_sorts_before_high_bmp(self) -> None:
        """In code units a surrogate (U+D83D) sorts before U+FF01; in code points it is after."""
        paths: list[tuple[str, CandidateKind]] = [("\uff01", "file"), ("\U0001f600", "file")]
        assert ranked(paths, "") == ["\U0001f600", "\uff01"]

    def test_gap_counts_code_units(self) -> None:
        """Gaps are measured in UTF-16 code units: an emoji skipped costs 2."""
        assert score("a\U0001f600b", "file", "ab") == 300 + 100 - 2


UPSTREAM_VISIBLE: list[tuple[str, CandidateKind]] = [
    ("README.md", "file"),
    ("docs", "directory"),
    ("src", "directory"),
    ("docs/design notes.md", "file"),
    ("src/terminal-view.ts", "file"),
    ("src/tui.spec.ts", "file"),
]


def _reference(entries: list[tuple[str, bool]], query: str, limit: int) -> list[str]:
    """Upstream's algorithm, literally: score everything, sort everything, slice."""
    scored = []
    for path, is_directory in entries:
        kind: CandidateKind = "directory" if is_directory else "file"
        value = score(path, kind, query)
        if value is not None:
            scored.append((value, path, is_directory))
    needle = bool(query)

    def key(item: tuple[int, str, bool]) -> tuple[int, bool, int, str]:
        value, path, is_directory = item
        units = utf16_units(path)
        return (-value, not is_directory, len(units) if needle else 0, units)

    return [path for _, path, _ in sorted(scored, key=key)[:limit]]


def _random_paths(rng: random.Random, count: int, alphabet: str) -> list[tuple[str, bool]]:
    paths: dict[str, bool] = {}
    while len(paths) < count:
        depth = rng.randint(1, 4)
        segments = ["".join(rng.choices(alphabet, k=rng.randint(1, 6))) for _ in range(depth)]
        paths.setdefault("/".join(segments), rng.random() < 0.3)
    return sorted(paths.items())


ALPHABET = "abcdeSRC.-_ x\U0001f600éΣ"


def test_pool_ranking_equals_full_sort() -> None:
    """The pool's tiered ranking returns upstream's full-sort result for many random queries."""
    rng = random.Random(5)
    entries = _random_paths(rng, 600, ALPHABET)
    pool = RankPool(
        [path for path, is_directory in entries if is_directory],
        [path for path, is_directory in entries if not is_directory],
    )
    for _ in range(300):
        query = "".join(rng.choices("abcSRc.-x\U0001f600éσΣ ", k=rng.randint(0, 4)))
        limit = rng.choice([1, 5, 20, 1000])
        found = pool.rank(prepare_needle(query), limit)
        assert [pool.candidate(row).path for _, row in found] == _reference(
            entries, query, limit
        ), query
        for value, row in found:
            candidate = pool.candidate(row)
            assert value == score(candidate.path, candidate.kind, query), query


def test_low_tiers_are_ranked_exactly_in_dense_pools() -> None:
    """With few distinct letters most rows fall to the path and subsequence tiers."""
    rng = random.Random(11)
    entries = _random_paths(rng, 500, "ab/")
    entries = [(path, is_directory) for path, is_directory in entries if "" not in path.split("/")]
    pool = RankPool(
        [path for path, is_directory in entries if is_directory],
        [path for path, is_directory in entries if not is_directory],
    )
    for _ in range(200):
        query = "".join(rng.choices("ab", k=rng.randint(1, 7)))
        found = pool.rank(prepare_needle(query), 20)
        assert [pool.candidate(row).path for _, row in found] == _reference(entries, query, 20), (
            query
        )


def test_incremental_search_equals_fresh_search() -> None:
    """Narrowing from earlier keystrokes (and the caches) never changes a global result."""
    rng = random.Random(7)
    entries = _random_paths(rng, 800, ".abcSRCe-x")
    index = FileIndex.from_entries("/r", entries)
    for _ in range(60):
        word = "".join(rng.choices(".abcSRCe-x", k=rng.randint(1, 6)))
        for end in [*range(1, len(word) + 1), len(word) - 1, len(word)]:
            typed = word[: max(end, 1)]
            fresh = FileIndex.from_entries("/r", entries)
            assert index.search(typed, 20) == fresh.search(typed, 20), typed
            visible = [(p, d) for p, d in entries if not (p.startswith(".") or "/." in p)]
            expected = _reference(entries if typed.startswith(".") else visible, typed, 20)
            assert [c.path for c in index.search(typed, 20)] == expected, typed


def test_candidates_carry_kinds() -> None:
    """Rows turn into FileReferenceCandidate records with the right kind."""
    pool = RankPool(["a"], ["a/b"])
    assert [pool.candidate(row) for row in range(len(pool))] == [
        FileReferenceCandidate("a", "directory"),
        FileReferenceCandidate("a/b", "file"),
    ]


def test_typed_needles_equal_full_sort() -> None:
    """Typing, backspacing and retyping (narrowing by one unit at a time) keeps exact results."""
    rng = random.Random(13)
    entries = _random_paths(rng, 700, "abcdeSRC.-_x\U0001f600é")
    pool = RankPool(
        [path for path, is_directory in entries if is_directory],
        [path for path, is_directory in entries if not is_directory],
    )
    for _ in range(40):
        word = "".join(rng.choices("abcdecsr.x\U0001f600é", k=rng.randint(2, 7)))
        for typed in [*(word[:end] for end in range(1, len(word) + 1)), word[:-1], word]:
            found = pool.rank(prepare_needle(typed), 5)
            assert [pool.candidate(row).path for _, row in found] == _reference(
                entries, typed, 5
            ), typed
