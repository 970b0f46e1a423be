"""The calls the load benchmark makes against agent-actors, by endpoint name.

A workload names its calls; each name maps to a :class:`CallBuilder` that turns a
:class:`CallContext` (the agent, the query typed so far, a seeded random source) into wire
arguments. Plugging a real endpoint in is adding (or here: already having) its builder; a run
only uses a builder whose endpoint the server lists in ``system/describe`` and skips the
workload with a note otherwise.

- ``diagnostics/echoSync`` and ``diagnostics/echo``: the echo workloads (64 B and 64 KiB
  payloads), through a ``def`` handler (stack ``ours``) and an ``async def`` one (``oursAsync``).
- ``diagnostics/sleep``: the keystroke workload's stand-in handler, sleeping a short random time.
- ``fileReferences/list`` and ``sessionReferenceResolver/candidates``: the real keystroke
  completion calls, one of each per keystroke once the server serves them.
- ``sessionReferenceResolver/prepare``: the prepare workload, 1-3 references per call to the
  real session logs the server serves (``CallContext.sources``), or to other agents' sessions.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

__all__ = [
    "CALLS",
    "DEFAULT_COMPLETION",
    "REAL_COMPLETION",
    "CallBuilder",
    "CallContext",
    "Typing",
    "missing_endpoints",
]


@attrs.frozen(kw_only=True)
class CallContext:
    """What a builder may use to make one call's arguments."""

    agent_id: str
    #: Every agent of the run.
    agents: Sequence[str]
    #: Sessions ``prepare`` may reference (empty: the other agents of the run).
    sources: Sequence[str] = ()
    #: What the simulated user has typed of the current mention (keystroke workload).
    query: str = ""
    #: Unique per call; the stand-in handler records it so a cancel can be traced.
    label: str = ""
    payload: bytes = b""
    #: ``(low, high)`` seconds for the stand-in handler.
    handler_seconds: tuple[float, float] = (0.0, 0.0)
    rng: random.Random = attrs.field(factory=random.Random, eq=False)


@attrs.frozen(kw_only=True)
class CallBuilder:
    #: The endpoint called (``namespace/method``).
    endpoint: str
    build: Callable[[CallContext], dict[str, Any]]
    #: Whether the arguments change from call to call (otherwise built once per task).
    varies: bool = False
    #: How the report describes it.
    description: str = ""


def _echo(ctx: CallContext) -> dict[str, Any]:
    return {"agentId": ctx.agent_id, "payload": ctx.payload}


def _sleep(ctx: CallContext) -> dict[str, Any]:
    seconds = round(ctx.rng.uniform(*ctx.handler_seconds), 6)
    return {"agentId": ctx.agent_id, "seconds": seconds, "label": ctx.label}


def _file_references(ctx: CallContext) -> dict[str, Any]:
    return {"agentId": ctx.agent_id, "query": ctx.query}


def _candidates(ctx: CallContext) -> dict[str, Any]:
    return {"agentId": ctx.agent_id, "query": ctx.query}


def _prepare(ctx: CallContext) -> dict[str, Any]:
    pool = ctx.sources or ctx.agents
    others = [a for a in pool if a != ctx.agent_id] or [ctx.agent_id]
    chosen = ctx.rng.sample(others, k=min(len(others), ctx.rng.randint(1, 3)))
    mentions = " ".join(f"@[{a}](dsh-session:{a})" for a in chosen)
    return {
        "agentId": ctx.agent_id,
        "content": f"Compare what {mentions} found and summarise it.",
        "references": [{"sessionId": a, "label": a} for a in chosen],
    }


CALLS: Mapping[str, CallBuilder] = {
    "diagnostics/echo": CallBuilder(
        endpoint="diagnostics/echo",
        build=_echo,
        description="echo of the payload, async def handler (a task per call)",
    ),
    "diagnostics/echoSync": CallBuilder(
        endpoint="diagnostics/echoSync",
        build=_echo,
        description="echo of the payload, def handler (run inline when the agent is free)",
    ),
    "diagnostics/sleep": CallBuilder(
        endpoint="diagnostics/sleep",
        build=_sleep,
        varies=True,
        description="stand-in completion handler sleeping a short random time",
    ),
    "fileReferences/list": CallBuilder(
        endpoint="fileReferences/list",
        build=_file_references,
        varies=True,
        description="@-completion of paths in the agent's cwd",
    ),
    "sessionReferenceResolver/candidates": CallBuilder(
        endpoint="sessionReferenceResolver/candidates",
        build=_candidates,
        varies=True,
        description="@-completion of sessions the agent may mention",
    ),
    "sessionReferenceResolver/prepare": CallBuilder(
        endpoint="sessionReferenceResolver/prepare",
        build=_prepare,
        varies=True,
        description="freeze 1-3 referenced sessions into a context message",
    ),
}

#: What each keystroke sends until the reference endpoints are served.
DEFAULT_COMPLETION = ("diagnostics/sleep",)
#: What each keystroke sends once they are (issue 6, item 2).
REAL_COMPLETION = ("fileReferences/list", "sessionReferenceResolver/candidates")


def missing_endpoints(names: Sequence[str], served: Sequence[str]) -> list[str]:
    """The endpoints behind ``names`` that the server does not serve (unknown names included).

    Raises:
        KeyError: a name has no builder in :data:`CALLS`.
    """
    unknown = [n for n in names if n not in CALLS]
    if unknown:
        raise KeyError(f"no call builder for {', '.join(unknown)} (known: {', '.join(CALLS)})")
    return [CALLS[n].endpoint for n in names if CALLS[n].endpoint not in served]


_WORDS = (
    "actors/_system.py",
    "wire/_client.py",
    "docs/protocol.md",
    "release checklist",
    "refactor the mailbox",
    "README.md",
    "flaky cancellation test",
    "bench/load.py",
)


class Typing:
    """A simulated user typing mentions: each keystroke extends the query by one character,
    and after a whole word the next one starts from its first character."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._word = ""
        self._typed = 0

    def keystroke(self) -> str:
        """The query after the next keystroke."""
        if self._typed >= len(self._word):
            self._word = self._rng.choice(_WORDS)
            self._typed = 0
        self._typed += 1
        return self._word[: self._typed]
