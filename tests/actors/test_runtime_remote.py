"""@Remote declarations: endpoint names, lookups, wire names, describe, proxies."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio

from actors import ActorSystem, InMemoryAgentDirectory, Remote, RemoteService
from actors._agents import Agent
from wire import ArgumentsInvalidError, ResultInvalidError, Server, open_client


@attrs.frozen(kw_only=True)
class Candidate:
    session_id: str
    display_title: str | None = None


class SessionReferenceResolver(RemoteService, key="sessionReferenceResolver"):
    @Remote("candidates")
    async def remote_export_candidates(self, agent: Agent, query: str = "") -> list[Candidate]:
        """Other sessions the agent may mention."""
        return [Candidate(session_id=f"{agent.id}:{query}", display_title=None)]

    @Remote
    async def plain(self, count: int, flags: list[str] | None = None) -> dict[str, Any]:
        return {"count": count, "flags": flags}

    @Remote(mutates=True)
    async def rename(self, agent: Agent, title: str) -> str:
        return title

    @Remote("lies")
    async def lies(self) -> int:
        return "not an int"  # type: ignore[return-value]

    async def not_remote(self) -> None:
        """Undecorated methods are not endpoints."""


class Renamed(RemoteService, key="serviceKey", namespace="wireName"):
    @Remote
    async def ping(self) -> str:
        return "pong"


def specs() -> dict[str, Any]:
    return {s.name: s for s in SessionReferenceResolver.__remote_endpoints__}


def test_alias_and_namespace() -> None:
    """@Remote("alias") names the endpoint; the service key is the default namespace."""
    assert sorted(specs()) == [
        "sessionReferenceResolver/candidates",
        "sessionReferenceResolver/lies",
        "sessionReferenceResolver/plain",
        "sessionReferenceResolver/rename",
    ]
    assert [s.name for s in Renamed.__remote_endpoints__] == ["wireName/ping"]


def test_agent_parameter_is_a_lookup_named_agent_id() -> None:
    """A parameter named agent travels as agentId and is marked as a lookup."""
    agent, query = specs()["sessionReferenceResolver/candidates"].params
    assert (agent.wire_name, agent.lookup, agent.required) == ("agentId", "agent", True)
    assert (query.wire_name, query.required, query.default) == ("query", False, "")


def test_mutates_flag_and_doc() -> None:
    """mutates=True is recorded; the first docstring paragraph becomes the endpoint doc."""
    assert specs()["sessionReferenceResolver/rename"].mutates
    assert not specs()["sessionReferenceResolver/candidates"].mutates
    assert specs()["sessionReferenceResolver/candidates"].doc == (
        "Other sessions the agent may mention."
    )


def test_generators_are_refused() -> None:
    """@Remote on a generator (sync or async) is a declaration error."""
    with pytest.raises(TypeError, match=r"must be a plain or async function, not a generator$"):

        class Bad(RemoteService):
            @Remote
            def numbers(self) -> Any:
                yield 1


def test_unannotated_parameters_are_refused() -> None:
    """Every wire parameter needs an annotation to be validated against."""
    with pytest.raises(TypeError, match=r"needs a type annotation$"):

        class Bad(RemoteService):
            @Remote
            async def loose(self, value):  # type: ignore[no-untyped-def]
                pass


async def test_over_the_wire(nursery: trio.Nursery) -> None:
    """Proxies from the class and from the agent handle reach the endpoints; arguments are
    checked on the server, results on the client, and describe lists it all."""
    directory = InMemoryAgentDirectory()
    directory.create("s-1")
    system = ActorSystem(directory, [SessionReferenceResolver()])
    server = Server(system.registry)
    [address] = await nursery.start(server.run, "tcp://127.0.0.1:0")
    with trio.fail_after(10):
        async with open_client(address) as client:
            typed = client.remote(SessionReferenceResolver)
            assert await typed.candidates("s-1", "q") == [
                Candidate(session_id="s-1:q", display_title=None)
            ]
            by_agent = client.agent("s-1")
            assert await by_agent.remote(SessionReferenceResolver).candidates("z") == [
                Candidate(session_id="s-1:z")
            ]
            dynamic = await by_agent.sessionReferenceResolver.candidates(query="w")
            assert dynamic == [Candidate(session_id="s-1:w")]  # spec learned from remote()
            raw = await client.call(
                "sessionReferenceResolver/candidates", {"agentId": "s-1", "query": "w"}
            )
            assert raw == [{"sessionId": "s-1:w"}]  # nil optional fields are omitted
            assert await typed.plain(2) == {"count": 2, "flags": None}
            with pytest.raises(ArgumentsInvalidError, match=r"plain: count: expected an integer"):
                await client.call("sessionReferenceResolver/plain", {"count": "2"})
            with pytest.raises(ArgumentsInvalidError, match=r"unknown argument\(s\) 'extra'"):
                await client.call("sessionReferenceResolver/plain", {"count": 1, "extra": 1})
            with pytest.raises(ArgumentsInvalidError, match=r"missing argument 'agentId'"):
                await client.call("sessionReferenceResolver/candidates", {"query": "x"})
            with pytest.raises(ResultInvalidError):
                await typed.lies()
            described = await client.call("system/describe")
            candidates = next(
                e for e in described["endpoints"] if e["name"].endswith("/candidates")
            )
            assert candidates["params"] == [
                {"name": "agentId", "type": "string", "required": True, "lookup": "agent"},
                {"name": "query", "type": "string", "required": False},
            ]
            assert candidates["result"] == "array<Candidate>"
            assert described["types"]["Candidate"] == {
                "sessionId": "string",
                "displayTitle": "string | nil",
            }
    await server.aclose()
