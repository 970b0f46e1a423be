"""The per-directory path tier and the bit-set subsequence tier give upstream's exact ranking."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import actors.file_references._bits as bits_module
import actors.file_references._groups as groups_module
from actors.file_references._bits import BitMatcher
from actors.file_references._index import FileIndex
from actors.file_references._pool import RankAbortedError, RankPool
from actors.file_references._query import CandidateKind
from actors.file_references._rank import prepare_needle, score, utf16_units
from actors.file_references._service import FileReferenceService


def reference(entries: list[tuple[str, bool]], query: str, limit: int) -> list[str]:
    """Upstream's global mode, literally: hide dot paths, score everything, sort, slice."""
    if not query.startswith("."):
        entries = [(p, d) for p, d in entries if not (p.startswith(".") or "/." in p)]
    scored = []
    for path, is_directory in entries:
        kind: CandidateKind = "directory" if is_directory else "file"
        value = score(path, kind, query)
        if value is not None:
            units = utf16_units(path)
            scored.append(((-value, not is_directory, len(units), units), path))
    return [path for _, path in sorted(scored)[:limit]]


def tree(
    rng: random.Random, files: int, alphabet: str, *, depth: int = 5
) -> list[tuple[str, bool]]:
    """A random tree: every directory on a file's path is an entry too (as the walk gives)."""
    entries: dict[str, bool] = {}
    directories = [""]
    while sum(1 for d in entries.values() if not d) < files:
        parent = rng.choice(directories)
        name = "".join(rng.choices(alphabet, k=rng.randint(1, 7)))
        path = f"{parent}/{name}" if parent else name
        if path in entries:
            continue
        is_directory = parent.count("/") < depth and rng.random() < 0.25
        entries[path] = is_directory
        if is_directory:
            directories.append(path)
    return sorted(entries.items())


def typing(word: str) -> Iterator[str]:
    """Type a word, backspace twice, retype, as a user does."""
    yield from (word[:end] for end in range(1, len(word) + 1))
    yield from (word[:end] for end in range(len(word) - 1, max(len(word) - 3, 0), -1))
    yield word


@pytest.fixture
def bit_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Use the bit-set matcher for pools of any size."""
    monkeypatch.setattr(groups_module, "BIT_MATCHER_ROWS", 1)


@pytest.fixture
def chain_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Use the per-row chain engine for pools of any size."""
    monkeypatch.setattr(groups_module, "BIT_MATCHER_ROWS", 10**9)


@pytest.mark.usefixtures("bit_engine")
@pytest.mark.parametrize("direct", [2000, 0])
def test_bit_engine_equals_reference_while_typing(
    monkeypatch: pytest.MonkeyPatch, direct: int
) -> None:
    """Typing, backspacing and retyping over random trees gives the full sort's answers
    (hits ranked all at once, and band by band)."""
    monkeypatch.setattr(bits_module, "_DIRECT", direct)
    rng = random.Random(51 + direct)
    for alphabet in ("abcdes.-_x", "ab", "srcindex._"):
        entries = tree(rng, 250, alphabet)
        index = FileIndex.from_entries("/r", entries)
        index.prepare()
        for _ in range(15):
            word = "".join(rng.choices(alphabet, k=rng.randint(2, 8)))
            for typed in typing(word):
                limit = rng.choice([1, 5, 20, 20, 200])
                found = [c.path for c in index.search(typed, limit)]
                assert found == reference(entries, typed, limit), (alphabet, typed, limit)


@pytest.mark.usefixtures("chain_engine")
def test_chain_engine_equals_reference_while_typing() -> None:
    """The per-row engine (small and non-ASCII pools) gives the same answers, astral too."""
    rng = random.Random(52)
    for alphabet in ("abcdes.-_x", "aéΣσ\U0001f600b."):
        entries = tree(rng, 250, alphabet)
        index = FileIndex.from_entries("/r", entries)
        for _ in range(15):
            word = "".join(rng.choices(alphabet.lower(), k=rng.randint(2, 6)))
            for typed in typing(word):
                found = [c.path for c in index.search(typed, 20)]
                assert found == reference(entries, typed, 20), (alphabet, typed)


@pytest.mark.usefixtures("bit_engine")
def test_non_ascii_pool_falls_back_to_the_chain_engine() -> None:
    """A pool with a non-ASCII path has no bit matcher and still ranks exactly."""
    entries = [("src", True), ("src/Ünïcode.py", False), ("src/plain.py", False)]
    pool = RankPool(["src"], ["src/Ünïcode.py", "src/plain.py"])
    assert pool._parent_groups().bit_matcher() is None
    index = FileIndex.from_entries("/r", entries)
    for query in ("sp", "scpy", "snpy", "üpy"):
        assert [c.path for c in index.search(query, 20)] == reference(entries, query, 20)


@pytest.mark.usefixtures("bit_engine")
def test_long_paths_cap_the_deficit_exactly() -> None:
    """Paths far longer than the offset bands (past 253 and 4096 units) rank exactly."""
    deep = "/".join(["segment"] * 700)
    entries = [
        (deep, True),
        (f"{deep}/xa.txt", False),
        (f"{deep}/ya", False),
        ("x", True),
        ("x/ya", False),
        ("short-xy-a", False),
    ]
    index = FileIndex.from_entries("/r", entries)
    index.prepare()
    for query in ("xa", "ya", "xya", "sa", "segx", "segmentsegment"):
        assert [c.path for c in index.search(query, 20)] == reference(entries, query, 20), query


@pytest.mark.usefixtures("bit_engine")
def test_directory_holding_the_needle_ranks_all_its_children() -> None:
    """When a directory's path holds the whole needle, its children tie on that end and are
    ordered by kind, length and code units."""
    entries = [("abc", True), ("abc/z", True), ("abc/yy", False), ("abc/b", False), ("q", False)]
    entries += [(f"abc/f{i:02}", False) for i in range(30)]
    index = FileIndex.from_entries("/r", entries)
    for limit in (1, 3, 20, 40):
        assert [c.path for c in index.search("ac", limit)] == reference(entries, "ac", limit)


@pytest.mark.usefixtures("bit_engine")
def test_dot_queries_merge_hidden_and_visible_pools() -> None:
    """A dot query ranks hidden paths too, matched by the same engine."""
    rng = random.Random(53)
    entries = tree(rng, 300, "abc.g")
    index = FileIndex.from_entries("/r", entries)
    for word in (".gi", ".a.b", "..c", ".cg"):
        for typed in typing(word):
            assert [c.path for c in index.search(typed, 20)] == reference(entries, typed, 20)


def test_prepare_stops_when_aborted() -> None:
    """A set abort flag stops the preparation (the index was invalidated meanwhile)."""
    matcher = BitMatcher(["", "a"], [(0, 1), (2,)], [("a", "b"), ("c",)], 1, 3)
    abort = threading.Event()
    abort.set()
    with pytest.raises(RankAbortedError):
        matcher.prepare(abort)


def test_matcher_hits_mark_where_each_scan_ended() -> None:
    """A hit in a directory's path stands for its children; a basename hit for one child."""
    # Text: \0 "" \1 ab \1 x \0 a \1 b \0   (root children ab, x; directory "a" child b).
    matcher = BitMatcher(["", "a"], [(0, 1), (2,)], [("ab", "x"), ("b",)], 0, 3)
    # "ab" (gap 0) scores 400; "a/b" ends at 3, gap 1: 399.
    assert matcher.subsequence("ab", 20, set()) == [(400, 0), (399, 2)]
    assert matcher.subsequence("ab", 20, {0}) == [(399, 2)]
    assert matcher.subsequence("xb", 20, set()) == []


@pytest.mark.usefixtures("bit_engine")
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 10**6),
    words=st.lists(st.text("abcs._-x", min_size=1, max_size=6), min_size=1, max_size=4),
)
def test_hypothesis_typing_sequences_equal_reference(seed: int, words: list[str]) -> None:
    """For random trees and typed words, the fast ranking equals the literal reference."""
    rng = random.Random(seed)
    entries = tree(rng, rng.randint(5, 120), "abcs._-x", depth=3)
    index = FileIndex.from_entries("/r", entries)
    if seed % 2:
        index.prepare()
    for word in words:
        for typed in typing(word):
            assert [c.path for c in index.search(typed, 20)] == reference(entries, typed, 20)


def small_tree(base: Path) -> Path:
    """A few nested files (enough for a subsequence query)."""
    root = base / "root"
    for directory in ("src/core", "docs"):
        (root / directory).mkdir(parents=True)
    for name in ("src/core/reader.py", "src/core/writer.py", "docs/guide.md", "README.md"):
        (root / name).write_text("", encoding="utf-8")
    return root


@pytest.mark.usefixtures("bit_engine")
async def test_service_prepares_an_index_after_its_scan(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """After the first global query the service builds the ranking's bit sets in the
    background, and answers stay exact."""
    root = small_tree(tmp_path)
    service = FileReferenceService()
    await nursery.start(service.run)
    with trio.fail_after(10):
        assert [c.path for c in await service.list("a", root, "r")][:1] == ["README.md"]
        search = service._searches["a"]
        assert search.generation is not None
        index = search.generation.outcome()
        while index.visible._groups is None or index.visible._groups._bits is None:
            await trio.sleep(0.01)
        found = [c.path for c in await service.list("a", root, "scrp")]
    entries = index.entries()
    assert found == reference(entries, "scrp", 20) == ["src/core/reader.py", "src/core/writer.py"]


async def test_dispose_stops_the_preparation(nursery: trio.Nursery, tmp_path: Path) -> None:
    """Disposing an agent sets its preparation's abort flag."""
    root = small_tree(tmp_path)
    service = FileReferenceService()
    await nursery.start(service.run)
    with trio.fail_after(10):
        await service.list("a", root, "r")
        search = service._searches["a"]
        assert search.generation is not None
        generation = search.generation
        service.dispose("a")
    assert generation.prepare_abort.is_set()


@pytest.mark.usefixtures("bit_engine")
def test_names_with_the_layout_separator_use_the_chain_engine() -> None:
    """A name containing U+0001 (the bit layout's separator) keeps the pool on the per-row
    engine, still exact."""
    entries = [("a", True), ("a/x\x01b", False), ("a/xb", False)]
    pool = RankPool(["a"], ["a/x\x01b", "a/xb"])
    assert pool._parent_groups().bit_matcher() is None
    index = FileIndex.from_entries("/r", entries)
    assert [c.path for c in index.search("ab", 20)] == reference(entries, "ab", 20)


def test_needles_with_a_slash_rank_against_whole_paths() -> None:
    """A needle with "/" (never a global query) still gets the path and subsequence tiers."""
    rng = random.Random(54)
    entries = tree(rng, 200, "ab/c")
    entries = [(p, d) for p, d in entries if not p.startswith(".") and "/." not in p]
    pool = RankPool([p for p, d in entries if d], [p for p, d in entries if not d])
    for query in ("a/b", "b/", "/a", "a/c/b", "c/"):
        found = [pool.candidate(row).path for _, row in pool.rank(prepare_needle(query), 20)]
        assert found == reference(entries, query, 20), query


def test_cached_search_answers_only_repeated_queries() -> None:
    """search_cached returns None for a new query and the kept answer for a repeated one."""
    rng = random.Random(55)
    entries = tree(rng, 200, "abc.")
    index = FileIndex.from_entries("/r", entries)
    for query in ("ab", ".a", "abc"):
        assert index.search_cached(query, 20) is None
        answer = index.search(query, 20)
        assert index.search_cached(query, 20) == answer
        assert index.search_cached(query, 5) is None
