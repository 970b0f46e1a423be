"""Candidates, mentions and ``parseMentions`` over a real ``agent-actors serve --sessions``
process serving copies of all 169 DSH fixtures (issue 21).

The server indexes the copies at start. Its candidates must be upstream's listing exactly
(compared whole, in order, with the independent transcription in
``tests/actors/session_references/_reference_listing.py``), including the ten sessions whose
body upstream's loader rejects; a mention taken from them goes through ``parseMentions`` into
``prepare``, which reads the source, or fails with upstream's READ_FAILED for a rejected body.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.cli._demo import start_server_process
from tests._processes import reap
from tests.actors.session_references._reference_listing import ListedSession, expected_candidates
from tests.actors.store.test_fixture_candidates import QUERIES, realize
from wire import SessionReferenceError, open_client

#: Requesting agents (all loadable fixtures): one in /projects/demo, one in /projects/other,
#: one without a cwd.
AGENTS = {"src-81c8263b2e": "/projects/demo", "src-255832c0e0": "/projects/other",
          "src-46eba5801e": None}  # fmt: skip
#: A fixture upstream's loader rejects ("seed request/header at index 0 lacks provider/model").
REJECTED_ID = "src-912b40fc12"


@asynccontextmanager
async def served_fixtures(tmp: Path) -> AsyncIterator[tuple[Any, list[ListedSession], Path]]:
    """A server over copies of the fixtures, once its start-up index lists all of them; yields
    a client, upstream's listing of the copies, and the copies' root."""
    root = tmp / "dsh"
    _, reference = realize(root, made_up=False)
    process, [address] = await start_server_process(
        f"ipc://{tmp}/server.sock", tmp / "data", extra=["--sessions", str(root)]
    )
    try:
        async with open_client(address) as client:
            with trio.fail_after(30):
                while len((await client.call("sessions/list", {"limit": 1000}))["sessions"]) < 169:
                    await trio.sleep(0.05)
            yield client, reference, root.resolve()
    finally:
        await reap(process)


async def test_candidates_over_the_wire_are_upstreams_listing(tmp_path: Path) -> None:
    """For agents in each workspace and the queries of issue 21, the remote candidates equal
    upstream's first page exactly (elements, key order, order), rejected bodies included."""
    async with served_fixtures(tmp_path) as (client, reference, _):
        for agent, cwd in AGENTS.items():
            resolver = client.agent(agent).sessionReferenceResolver
            for query in QUERIES:
                expected = expected_candidates(
                    reference, agent_id=agent, agent_cwd=cwd, query=query
                )
                with trio.fail_after(20):
                    got = await resolver.candidates(query)
                assert got == expected, (agent, query)
                assert [list(c) for c in got] == [list(c) for c in expected]
        shown = await client.agent("src-81c8263b2e").sessionReferenceResolver.candidates("")
        assert REJECTED_ID in [c["sessionId"] for c in shown]


async def test_mentions_parse_into_prepare_ready_references(tmp_path: Path) -> None:
    """Every mention of the first page, joined into one text, comes back from parseMentions as
    ``@displayTitle`` and ``{sessionId, label}`` in mention order; passed on to prepare, a
    loadable source is read and a rejected body fails READ_FAILED in upstream's words."""
    agent = "src-81c8263b2e"
    async with served_fixtures(tmp_path) as (client, _, root):
        resolver = client.agent(agent).sessionReferenceResolver
        with trio.fail_after(30):
            page = await resolver.candidates("")
            text = "compare " + " and ".join(c["mention"] for c in page) + "."
            parsed = await resolver.parseMentions(text)
            assert parsed == {
                "text": "compare " + " and ".join("@" + c["displayTitle"] for c in page) + ".",
                "references": [
                    {"sessionId": c["sessionId"], "label": c["displayTitle"]} for c in page
                ],
            }
            by_id = {ref["sessionId"]: ref for ref in parsed["references"]}
            loadable = next(c for c in page if c["label"] != c["sessionId"])
            prepared = await resolver.prepare("see", [by_id[loadable["sessionId"]]])
            record = prepared["additionalContext"]["source"]["references"][0]
            assert (record["sessionId"], record["label"]) == (
                loadable["sessionId"], loadable["displayTitle"]
            )  # fmt: skip
            with pytest.raises(SessionReferenceError) as caught:
                await resolver.prepare("see", [by_id[REJECTED_ID]])
    path = root / "--projects-demo--" / REJECTED_ID / "session.jsonl"
    assert caught.value.code.value == "SESSION_REFERENCE_READ_FAILED"
    assert caught.value.message == (
        f'failed to read referenced session: stored session "{REJECTED_ID}" is corrupt: stored '
        f'session "{REJECTED_ID}" failed validation: Error: seed request/header at index 0 '
        f"lacks provider/model (raw log: {path})"
    )


async def test_parse_mentions_rejects_a_malformed_mention(tmp_path: Path) -> None:
    """A malformed mention fails the whole parse with INVALID_REFERENCE and upstream's message
    naming its URI; plain text comes back unchanged with no references, and a long text (past
    the inline limit) is parsed the same way."""
    async with served_fixtures(tmp_path) as (client, _, _root):
        resolver = client.agent("src-81c8263b2e").sessionReferenceResolver
        with trio.fail_after(20):
            assert await resolver.parseMentions("no mention here") == {
                "text": "no mention here",
                "references": [],
            }
            long = "x" * 40_000  # parsed in a worker thread
            assert await resolver.parseMentions(f"{long}@[s](dsh-session:InNvdXJjZSI)") == {
                "text": f"{long}@s",
                "references": [{"sessionId": "source", "label": "s"}],
            }
            with pytest.raises(SessionReferenceError) as caught:
                await resolver.parseMentions(
                    "@[ok](dsh-session:InNvdXJjZSI) then @[bad](dsh-session:IiJ)"
                )
            described = await client.call("system/describe")
    assert caught.value.code.value == "SESSION_REFERENCE_INVALID_REFERENCE"
    assert caught.value.message == 'invalid session reference URI "dsh-session:IiJ"'
    assert caught.value.details == {}
    endpoint = next(
        e for e in described["endpoints"] if e["name"] == "sessionReferenceResolver/parseMentions"
    )
    assert [p["name"] for p in endpoint["params"]] == ["agentId", "text"]
