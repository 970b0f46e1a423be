"""Candidates over the real DSH fixtures list every session upstream's listing lists (issue 21).

The 169 fixtures are laid out as a DSH root with two made-up logs beside them: one whose header
fails the listing's shape check (no ``delegationDepth``: upstream's listing skips it) and one
with a well-shaped version-1 header (upstream lists it and refuses it only when read). The root
is indexed into a projection cache, and the candidates the resolver serves from it (through
the candidate index and through the plain ``list_candidates``) are compared, whole and in
order, with an independent transcription of upstream's algorithm
(``tests/actors/session_references/_reference_listing.py``) over the raw logs.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from actors.session_log import log_path
from actors.session_references import (
    CandidateIndex,
    MentionReference,
    SessionReferenceConfig,
    decode_session_reference_uri,
    encode_session_reference_uri,
    parse_session_reference_text,
    remote_candidates,
)
from actors.store._indexing import index_sessions, render_summary
from actors.store._projection_cache import ProjectionCache
from tests.actors.session_references._reference_listing import (
    ListedSession,
    expected_candidates,
    list_sessions,
    read_listed,
)
from tests.actors.session_references.test_fixtures import upstream_results
from tests.conftest import FIXTURES

#: A made-up log whose header lacks ``delegationDepth`` (not listed upstream).
SHAPELESS_ID = "made-up-shapeless"
#: A made-up log with a version-1 header of today's shape (listed, refused when read).
FUTURE_ID = "made-up-future-version"
#: Newer than every fixture, so both would top the listing if listed.
NEWEST = 1_767_300_000_000

#: The queries of issue 21: empty, a cwd word, one letter, an upper-case id prefix, an id
#: substring (of a rejected fixture's id), and a query that matches nothing.
QUERIES = ["", "demo", "e", "SRC-6", "cb97bb", "no-such-session-anywhere"]


@attrs.frozen
class Agent:
    """The requesting agent, as discovery sees it."""

    session_id: str
    cwd: str | None


#: A fixture agent in /projects/demo (excluded from its own candidates), a host agent in
#: /projects/other, and one without a cwd.
AGENTS = [
    Agent("src-81c8263b2e", "/projects/demo"),
    Agent("host-agent", "/projects/other"),
    Agent("cwd-less-agent", None),
]


def made_up_logs(root: Path) -> dict[str, Path]:
    """Write the two made-up logs into ``root``; their paths by id."""
    records = {
        SHAPELESS_ID: {"type": "session", "version": 0, "id": SHAPELESS_ID,
                       "createdAt": NEWEST, "cwd": "/projects/demo"},
        FUTURE_ID: {"type": "session", "version": 1, "id": FUTURE_ID,
                    "createdAt": NEWEST + 1, "cwd": "/projects/demo", "delegationDepth": 0},
    }  # fmt: skip
    data = {"title": "never shown", "messageSeqs": [], "source": {"kind": "user"}}
    title = {"type": "session/title", "seq": 0, "time": NEWEST, "data": data}
    paths = {}
    for session_id, header in records.items():
        path = log_path(root, "/projects/demo", session_id, "none")
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(header) + "\n" + json.dumps(title) + "\n", "utf-8")
        paths[session_id] = path
    return paths


@attrs.frozen
class Served:
    """A DSH root over the fixtures, its index run, and upstream's listing of it."""

    root: Path
    placed: dict[str, Path]
    cache: ProjectionCache
    root_id: int
    summary_text: str
    reference: list[ListedSession]


def realize(root: Path, *, made_up: bool = True) -> tuple[dict[str, Path], list[ListedSession]]:
    """Lay the fixtures (and, with ``made_up``, the two made-up logs) out as a DSH root; return
    each log's path by fixture name (made-up logs: by id) and upstream's listing of the root."""
    if not FIXTURES.is_dir():
        pytest.skip(f"DSH fixtures not found at {FIXTURES}")
    results = upstream_results()
    placed: dict[str, Path] = {}
    listed = []
    for source in sorted(FIXTURES.glob("*.jsonl")):
        header = json.loads(source.read_bytes().split(b"\n", 1)[0])
        target = log_path(root, header.get("cwd"), header["id"], "none")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        placed[source.name] = target
        entry = read_listed(target, body_loads=results[source.name] is not None)
        assert entry is not None, source.name
        listed.append(entry)
    for session_id, path in made_up_logs(root).items() if made_up else ():
        placed[session_id] = path
        entry = read_listed(path, body_loads=False)
        if entry is not None:
            listed.append(entry)
    return placed, list_sessions(listed)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One indexed root for the whole module (the tests only read it)."""
    tmp_path = tmp_path_factory.mktemp("fixture-candidates")
    root = tmp_path / "dsh"
    placed, reference = realize(root)
    cache = ProjectionCache.open(tmp_path / "cache.sqlite3")
    try:
        summary = index_sessions(root, cache)
        yield Served(
            root=root.resolve(),
            placed=placed,
            cache=cache,
            root_id=cache.root_id(root, "none"),
            summary_text=render_summary(summary),
            reference=reference,
        )
    finally:
        cache.close()


def test_the_reference_lists_every_fixture_and_the_future_header(served: Served) -> None:
    """Upstream's listing holds all 169 fixtures and the version-1 log, not the shapeless one
    (a check of the reference itself: it must see what the spec says the listing sees)."""
    ids = {entry.session_id for entry in served.reference}
    assert len(ids) == 170
    assert FUTURE_ID in ids and SHAPELESS_ID not in ids
    by_label = [entry for entry in served.reference if entry.title is None]
    assert len(by_label) >= 11  # the ten fixtures upstream rejects, the future log, untitled


@pytest.mark.parametrize("limit", [50, 1000])
@pytest.mark.parametrize("agent", AGENTS, ids=lambda a: a.session_id)
@pytest.mark.parametrize("query", QUERIES)
def test_candidates_equal_upstreams_listing(
    served: Served, agent: Agent, query: str, limit: int
) -> None:
    """The remote candidates result (index and plain listing alike) is exactly upstream's, in
    order, for every query and requesting agent, with the configured page size."""
    config = SessionReferenceConfig.create(candidate_limit=limit)
    expected = expected_candidates(
        served.reference, agent_id=agent.session_id, agent_cwd=agent.cwd, query=query,
        limit=limit,
    )  # fmt: skip
    summaries = served.cache.summaries([served.root_id])
    indexed = CandidateIndex(summaries).remote_candidates(agent, query, config=config)
    assert indexed == expected
    assert [list(candidate) for candidate in indexed] == [list(c) for c in expected]  # key order
    assert remote_candidates(agent, summaries, query, config=config) == expected


def test_every_candidate_mention_round_trips(served: Served) -> None:
    """Every mention the candidates carry (the whole listing, for each requesting agent) parses
    back to its session id labelled with the display title, and its URI decodes to the id."""
    config = SessionReferenceConfig.create(candidate_limit=1000)
    index = CandidateIndex(served.cache.summaries([served.root_id]))
    for agent in AGENTS:
        candidates = index.remote_candidates(agent, "", config=config)
        assert len(candidates) == 170 - (agent.session_id == AGENTS[0].session_id)
        for candidate in candidates:
            session_id, label, mention = (
                candidate["sessionId"], candidate["displayTitle"], candidate["mention"]
            )  # fmt: skip
            parsed = parse_session_reference_text(f"see {mention}.")
            assert parsed.text == f"see @{label}."
            assert parsed.references == (MentionReference(session_id=session_id, label=label),)
            uri = mention[mention.rindex("](") + 2 : -1]
            assert decode_session_reference_uri(uri) == session_id
            assert encode_session_reference_uri(session_id) == uri


def test_queries_reach_the_sessions_whose_body_is_rejected(served: Served) -> None:
    """The first page of every non-empty matching query of issue 21 holds sessions whose body
    upstream's loader rejects, labelled by their id (so the comparison above covers them)."""
    rejected = {
        entry.session_id
        for name, path in served.placed.items()
        if name == FUTURE_ID or upstream_results().get(name, ()) is None
        for entry in [read_listed(path, body_loads=False)]
        if entry is not None
    }
    assert len(rejected) == 11
    agent = AGENTS[0]
    for query in QUERIES[:-1]:
        page = expected_candidates(
            served.reference, agent_id=agent.session_id, agent_cwd=agent.cwd, query=query
        )
        shown = [c for c in page if c["sessionId"] in rejected]
        assert shown, query
        assert all(c["label"] == c["displayTitle"] == c["sessionId"] for c in shown)


def test_index_lists_rejected_bodies_and_skips_shapeless_headers(served: Served) -> None:
    """Every log with a listable header has a cache row, marked with why its body did not load;
    the shapeless header has none; the summary reports all twelve rejections with reasons."""
    rows = {row.session_id: row for row in served.cache.list_page([served.root_id], limit=1000)}
    assert len(rows) == 170 and SHAPELESS_ID not in rows
    failed = {session_id: row.load_error for session_id, row in rows.items() if row.load_error}
    assert len(failed) == 11
    assert failed[FUTURE_ID] == (
        f'session "{FUTURE_ID}" uses log format v1, but this harness reads only v0: the log was '
        "written by a newer harness — upgrade the harness to open it"
    )
    assert failed["src-62cb97bbb6"] == (
        'stored session "src-62cb97bbb6" failed validation: Error: seed request/header at '
        "index 0 lacks provider/model"
    )
    assert all(rows[i].title is None and rows[i].last_seq is None for i in failed)
    text = served.summary_text
    assert ": 171 transcripts, 170 read, 0 unchanged, 12 rejected (11 listed by header)" in text
    shapeless = served.placed[SHAPELESS_ID]
    assert f"\n  rejected {shapeless}: corrupt session log: first line is not a session header" in (
        text
    )
    assert f"\n  rejected (listed by header) {served.placed[FUTURE_ID]}: session " in text
