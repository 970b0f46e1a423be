"""Services every server carries: agent creation and diagnostics.

``agents/create`` makes a titled session in one call. ``diagnostics/*`` is what the demo, the
tests and the benchmarks call: an echo through the whole stack, a sleep that records how it
ended, a publication that a cancel must stop, and a state-changing append. The record of how
calls ended is what lets a client see that the server observed a cancel.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import trio

from actors._agents import Agent
from actors._remote import Remote, RemoteService
from wire import ArgumentsInvalidError, NonNegativeFloat

__all__ = ["AgentInfo", "Agents", "Diagnostics", "HandlerEnding"]


@attrs.frozen(kw_only=True)
class AgentInfo:
    agent_id: str
    cwd: str | None = None
    title: str | None = None


#: Calls an endpoint in this process as a remote caller would (``actors._serve.call_local``).
LocalCall = Callable[[str, dict[str, Any]], Awaitable[Any]]


class Agents(RemoteService, key="agents"):
    """Convenience over ``sessions/*``: create an agent (a new session, titled) in one call."""

    def __init__(self, call_local: LocalCall) -> None:
        self._call = call_local

    @Remote
    async def create(
        self,
        agent_id: str | None = None,
        cwd: str | None = None,
        title: str | None = None,
        idempotency_key: str | None = None,
    ) -> AgentInfo:
        """Create a session (id ``agentId`` if given) and set its title; return the agent.

        With ``idempotencyKey`` both steps carry it (``sessions/create``, then
        ``sessions/setTitle`` on the new session), so a retry after any failure finishes
        what the first call left undone and repeats nothing."""
        key = {"idempotencyKey": idempotency_key} if idempotency_key is not None else {}
        created = await self._call("sessions/create", {"sessionId": agent_id, "cwd": cwd, **key})
        if title is not None:
            # The session exists now: a cancel from here on could only answer `cancelled` for a
            # call that took effect, so the title is written whatever the caller does.
            with trio.CancelScope(shield=True):
                await self._call(
                    "sessions/setTitle", {"agentId": created.session_id, "title": title, **key}
                )
        return AgentInfo(agent_id=created.session_id, cwd=created.cwd, title=title)


@attrs.frozen(kw_only=True)
class HandlerEnding:
    """How one diagnostics handler ended, as the server saw it."""

    call: str
    #: ``completed`` or ``cancelled``.
    outcome: str
    #: Seconds the handler ran.
    elapsed: float
    #: ``time.monotonic()`` when the handler ended: one clock for every process of a host, so
    #: a client can measure cancel-to-quiescence latency against its own reading.
    ended_at: float


#: Errors of a file name the caller chose: one that names a directory or a file where the other
#: is needed (``path`` inside ``marker``, or an earlier call's), or that is too long.
_NAME_ERRNOS = frozenset((errno.EEXIST, errno.EISDIR, errno.ENOTDIR, errno.ENAMETOOLONG))


@contextlib.contextmanager
def _name_errors(argument: str, name: str) -> Iterator[None]:
    """Turn a write failure caused by the caller's file name into ``arguments-invalid``."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in _NAME_ERRNOS:
            raise
        raise ArgumentsInvalidError(
            f"diagnostics/publish: {argument}: cannot write {name!r} in the server's "
            f"diagnostics directory: {exc.strerror}",
            details={"path": argument},
        ) from None


class Diagnostics(RemoteService, key="diagnostics"):
    """Calls for demos, tests and benchmarks.

    ``publish_dir`` is the only place ``publish`` writes: any peer may call it, so the names it
    is given are confined there (the server's ``<data>/diagnostics``), never paths of the host.
    """

    def __init__(self, *, publish_dir: Path, history: int = 1000) -> None:
        self._publish_dir = publish_dir
        self._endings: collections.deque[HandlerEnding] = collections.deque(maxlen=history)

    @Remote
    async def echo(self, agent: Agent, payload: Any = None) -> Any:
        """Return ``payload`` unchanged, through agent activation and the mailbox."""
        return payload

    @Remote("echoSync")
    def echo_sync(self, agent: Agent, payload: Any = None) -> Any:
        """Return ``payload`` unchanged, from a plain ``def`` handler: the server runs it inline
        when the agent is active and its mailbox turn is free."""
        return payload

    @Remote("echoRaw")
    async def echo_raw(self, payload: Any = None) -> Any:
        """Return ``payload`` unchanged, without an agent."""
        return payload

    @Remote
    async def sleep(self, agent: Agent, seconds: NonNegativeFloat, label: str = "") -> float:
        """Sleep, then return ``seconds``; the server records whether it was cancelled."""
        started = trio.current_time()
        outcome = "cancelled"
        try:
            await trio.sleep(seconds)
            outcome = "completed"
            return seconds
        finally:
            self._endings.append(
                HandlerEnding(
                    call=label or "sleep",
                    outcome=outcome,
                    elapsed=round(trio.current_time() - started, 6),
                    ended_at=time.monotonic(),
                )
            )

    @Remote
    async def publish(
        self,
        agent: Agent,
        path: str,
        marker: str,
        work_seconds: NonNegativeFloat,
        hold_seconds: NonNegativeFloat,
    ) -> str:
        """Work for ``workSeconds``, write ``marker`` (the work is done), wait
        ``holdSeconds`` (the window between finishing the work and replying), then write
        ``path`` (the publication) and return its full path.

        ``path`` and ``marker`` are names inside the server's diagnostics directory
        (``<data>/diagnostics``); one that is absolute, leads out of it, or cannot be written
        there (a NUL, too long, a file where a directory is needed or the reverse) is
        ``arguments-invalid``. A cancel that lands at any point before the publication leaves
        ``path`` unwritten.
        """
        published = self._confined("path", path)
        done = self._confined("marker", marker)
        await trio.sleep(work_seconds)
        with _name_errors("marker", marker):
            await trio.Path(done).parent.mkdir(parents=True, exist_ok=True)
            await trio.Path(done).write_text("work done\n")
        await trio.sleep(hold_seconds)
        # Nothing below awaits, so once the last checkpoint passed without a cancel the
        # publication and the reply happen together; a cancel before it stops both.
        with _name_errors("path", path):
            published.parent.mkdir(parents=True, exist_ok=True)
            published.write_text("published\n")
        return str(published)

    def _confined(self, argument: str, name: str) -> Path:
        """``name`` resolved inside the diagnostics directory.

        Raises:
            ArgumentsInvalidError: ``name`` is empty, holds a NUL, is absolute, or resolves
                outside it (``..`` or a symlink).
        """
        root = self._publish_dir.resolve()
        if "\x00" in name:
            raise ArgumentsInvalidError(
                f"diagnostics/publish: {argument}: a file name cannot hold a NUL character",
                details={"path": argument},
            )
        target = (root / name).resolve()
        if (
            not name
            or Path(name).is_absolute()
            or target == root
            or not target.is_relative_to(root)
        ):
            raise ArgumentsInvalidError(
                f"diagnostics/publish: {argument}: {name!r} is not a name inside the server's "
                "diagnostics directory",
                details={"path": argument},
            )
        return target

    @Remote(mutates=True)
    async def note(self, agent: Agent, text: str) -> int:
        """Append ``text`` to the agent's notes (a state-changing call); return the count."""
        await trio.lowlevel.checkpoint()
        agent.state.notes.append(text)
        return len(agent.state.notes)

    @Remote
    async def notes(self, agent: Agent) -> list[str]:
        """The agent's notes, in the order they were appended."""
        await trio.lowlevel.checkpoint()
        return list(agent.state.notes)

    @Remote
    async def endings(self) -> list[HandlerEnding]:
        """How the latest ``sleep`` handlers ended, oldest first."""
        await trio.lowlevel.checkpoint()
        return list(self._endings)
