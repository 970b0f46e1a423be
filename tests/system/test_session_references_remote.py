"""Session references over a real connection: the cancellation fence and the errors (issue 4,
items 4 and 5).

Two kinds of server are used, both reached over a real ZeroMQ ``ipc://`` connection:

- a real ``agent-actors serve`` process, serving copied DSH fixtures read-only from
  ``--sessions`` with a 400-byte per-source budget from ``--config`` (so sources spill), for
  everything that can be driven deterministically from outside;
- the same runtime (``open_runtime`` + ``wire.Server``) inside the test process, where a step
  has to be held open deterministically (the budget lookup, a spill save, the window after the
  saves, the window after ``prepare`` returned); those gates are injected with ``monkeypatch``.

The wire is watched with a bare pyzmq DEALER speaking docs/protocol.md by hand: hello, the
call, then a cancel frame; its terminal frame is read as it arrives.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import attrs
import msgpack
import pytest
import trio
import zmq

import actors._reference_services as reference_services
import actors._serve as serve_module
import actors.session_references._prepare as prepare_module
from actors._config import Config
from actors._serve import open_runtime
from actors.cli._demo import start_server_process
from actors.cli._main import main as cli_main
from actors.session_log._layout import log_path
from actors.session_references import (
    LocalSpillStore,
    SaveTextSpill,
    SessionReferenceConfig,
    SpillRef,
    prepare,
    resolve_reference_budget,
)
from tests._processes import reap
from wire import ErrorCode, Server, SessionReferenceError, open_client

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "dsh-sessions"
#: A long fixture (4 projected messages, 2098 events) that a 400-byte budget truncates.
LONG = "apps__web__tests__snapshots__goal-multi-turn-actions__session.jsonl"
#: A fixture upstream's own loader rejects (request/header without provider/model).
REJECTED = "packages__test-support__acp-snapshot__tests__fixtures__suite__pin-turn__session.jsonl"
CANCELLED_MESSAGE = "session reference preparation was cancelled"
SPILL_NAME = r"[0-9a-f]{12}-session-reference-\d\.txt"


# -- a bare DEALER ---------------------------------------------------------------------------


class RawPeer:
    """A DEALER that speaks protocol v1 by hand; one owner task moves its frames."""

    def __init__(self, address: str) -> None:
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.connect(address)
        self._outbox: list[dict[str, Any]] = []
        #: Every frame received except pings, in order.
        self.frames: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        self._outbox.append(message)

    async def run(self) -> None:
        """Send queued frames, answer pings, keep the rest; poll every 2 ms."""
        try:
            while True:
                while self._outbox:
                    self._socket.send(msgpack.packb(self._outbox.pop(0)))
                while True:
                    try:
                        frame = msgpack.unpackb(self._socket.recv(zmq.NOBLOCK), raw=False)
                    except zmq.Again:
                        break
                    if frame.get("type") == "ping":
                        self._outbox.append({"type": "pong"})
                    else:
                        self.frames.append(frame)
                await trio.sleep(0.002)
        finally:
            self._socket.close(linger=0)
            self._context.term()

    async def hello(self) -> None:
        self.send({"type": "hello", "versions": [1], "name": "raw-dealer"})
        await self.wait_for(lambda f: f["type"] == "welcome")

    async def wait_for(self, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        with trio.fail_after(20):
            while True:
                for frame in self.frames:
                    if match(frame):
                        return frame
                await trio.sleep(0.002)

    async def terminal(self, call_id: int) -> dict[str, Any]:
        """The call's terminal frame, after checking that no second one follows."""
        frame = await self.wait_for(
            lambda f: f.get("id") == call_id and f["type"] in ("result", "error")
        )
        await trio.sleep(0.2)
        terminals = [f for f in self.frames if f.get("id") == call_id]
        assert terminals == [frame]
        return frame


@asynccontextmanager
async def raw_peer(address: str) -> AsyncIterator[RawPeer]:
    peer = RawPeer(address)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(peer.run)
        await peer.hello()
        yield peer
        peer.send({"type": "bye"})
        await trio.sleep(0.01)
        nursery.cancel_scope.cancel()


def prepare_call(call_id: int, agent: str, references: list[Any]) -> dict[str, Any]:
    return {
        "type": "call",
        "id": call_id,
        "endpoint": "sessionReferenceResolver/prepare",
        "args": {"agentId": agent, "content": "see the source", "references": references},
    }


def cancel_frame(call_id: int) -> dict[str, Any]:
    return {"type": "cancel", "id": call_id, "reason": "caller"}


def assert_reference_cancelled(frame: dict[str, Any]) -> None:
    assert frame == {
        "type": "error",
        "id": frame["id"],
        "code": "SESSION_REFERENCE_CANCELLED",
        "message": CANCELLED_MESSAGE,
        "details": {},
    }


def spill_files(data: Path) -> list[Path]:
    return sorted(p for p in (data / "spill").rglob("*") if p.is_file())


async def wait_stats(client: Any, predicate: Callable[[dict[str, Any]], bool]) -> None:
    """Poll ``system/stats`` (whose own call counts as running) until ``predicate`` holds."""
    with trio.fail_after(20):
        while not predicate(await client.call("system/stats")):
            await trio.sleep(0.005)


# -- a real server process over copied fixtures ----------------------------------------------


def place(root: Path, name: str) -> tuple[str, Path]:
    """Copy one fixture into a DSH layout under ``root`` (tmp only); return its id and path."""
    if not FIXTURES.is_dir():
        pytest.skip(f"DSH fixtures not found at {FIXTURES}")
    header = json.loads((FIXTURES / name).read_bytes().split(b"\n", 1)[0])
    target = log_path(root, header.get("cwd"), header["id"], "none")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / name, target)
    return str(header["id"]), target.resolve()


@asynccontextmanager
async def served(
    tmp: Path, resolver: str, names: list[str]
) -> AsyncIterator[tuple[str, list[str]]]:
    """``agent-actors serve --sessions <copies> --config <[sessionReferenceResolver]>``."""
    root = tmp / "dsh"
    root.mkdir(parents=True, exist_ok=True)
    ids = [place(root, name)[0] for name in names]
    config = tmp / "server.toml"
    config.write_text(f"[sessionReferenceResolver]\n{resolver}\n")
    process, [address] = await start_server_process(
        f"ipc://{tmp}/server.sock",
        tmp / "data",
        extra=["--sessions", str(root), "--config", str(config)],
    )
    try:
        yield address, ids
    finally:
        await reap(process)


async def block_mailbox(client: Any, agent: str, nursery: trio.Nursery) -> trio.CancelScope:
    """Hold ``agent``'s mailbox: a running reader (a sleep) with a writer queued behind it, so
    any later call to it, even a read-only one, waits (first come, first served). Cancel the
    returned scope to let it go."""

    async def hold(task_status: Any) -> None:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as inner:
                inner.start_soon(client.agent(agent).diagnostics.sleep, 60.0)
                # One poller at a time: its own call counts as running.
                await wait_stats(client, lambda s: s["calls"]["running"] == 2)
                inner.start_soon(client.agent(agent).diagnostics.note, "queued writer")
                await wait_stats(client, lambda s: s["calls"]["queued"] == 1)
                task_status.started(scope)

    scope: trio.CancelScope = await nursery.start(hold)
    return scope


async def test_cancel_during_reads_over_the_wire(tmp_path: Path) -> None:
    """A cancel while the source read waits answers SESSION_REFERENCE_CANCELLED on the wire
    and leaves no spill, while the same call uncancelled spills the truncated source."""
    async with served(tmp_path, "maxReferenceBytes = 400", [LONG]) as (address, [source]):
        async with open_client(address) as client, trio.open_nursery() as nursery:
            me = (await client.call("agents/create", {"cwd": "/projects/demo"}))["agentId"]
            blocker = await block_mailbox(client, source, nursery)
            async with raw_peer(address) as peer:
                peer.send(prepare_call(1, me, [{"sessionId": source}]))
                # Once the call is running (sleep, stats and prepare), its handler runs without
                # a schedule point up to the source's mailbox, so one more round trip later the
                # read is queued behind the writer and cannot finish.
                await wait_stats(client, lambda s: s["calls"]["running"] == 3)
                await client.call("system/stats")
                peer.send(cancel_frame(1))
                assert_reference_cancelled(await peer.terminal(1))
            assert spill_files(tmp_path / "data") == []
            blocker.cancel()
            with trio.fail_after(20):
                prepared = await client.agent(me).sessionReferenceResolver.prepare(
                    "see", [{"sessionId": source}]
                )
        text = prepared["additionalContext"]["content"][0]["text"]
        notices = json.loads(text.rsplit("\n", 1)[1])
        assert [n["fullSnapshot"]["status"] for n in notices] == ["saved"]
        assert spill_files(tmp_path / "data") == [Path(notices[0]["fullSnapshot"]["locator"])]


async def test_cancel_while_queued_is_the_wire_cancel(tmp_path: Path) -> None:
    """A cancel before the call reached the resolver (still queued for the target agent) is
    the protocol's own ``cancelled`` with state queued: the handler never ran, nothing spills."""
    async with served(tmp_path, "maxReferenceBytes = 400", [LONG]) as (address, [source]):
        async with open_client(address) as client, trio.open_nursery() as nursery:
            me = (await client.call("agents/create", {"cwd": "/projects/demo"}))["agentId"]
            blocker = await block_mailbox(client, me, nursery)
            async with raw_peer(address) as peer:
                peer.send(prepare_call(1, me, [{"sessionId": source}]))
                await wait_stats(client, lambda s: s["calls"]["queued"] == 2)
                peer.send(cancel_frame(1))
                frame = await peer.terminal(1)
            blocker.cancel()
        assert frame["code"] == "cancelled"
        assert frame["details"] == {"state": "queued", "reason": "caller"}
        assert spill_files(tmp_path / "data") == []


# -- the runtime in this process, gated --------------------------------------------------------


@attrs.define
class Gate:
    """Holds one step open until the test releases it."""

    entered: trio.Event = attrs.Factory(trio.Event)
    release: trio.Event = attrs.Factory(trio.Event)

    async def hold(self, *, shield: bool) -> None:
        # Shielded, the step ignores the cancel until released, as a worker thread that is
        # not abandoned does (LocalSpillStore writes in one); unshielded, the cancel ends it.
        self.entered.set()
        with trio.CancelScope(shield=shield):
            await self.release.wait()


LONG_TEXT = "the captured answer is forty-two; " * 60


async def make_source(client: Any, number: int) -> str:
    """A session in /projects/other with two long direct user messages."""
    agent = (await client.call("agents/create", {"cwd": "/projects/other"}))["agentId"]
    events = [
        {
            "type": "user/message",
            "data": {
                "id": f"m{number}-{k}",
                "role": "user",
                "content": [{"type": "text", "text": f"{k}: {LONG_TEXT}"}],
                "source": {"kind": "user"},
            },
            "surfaceOp": "append",
        }
        for k in range(2)
    ]
    await client.call("sessions/append", {"agentId": agent, "events": events})
    return str(agent)


Scenario = Callable[[Any, RawPeer, str, list[str]], Awaitable[dict[str, Any]]]


async def in_process(tmp_path: Path, sources: int, scenario: Scenario) -> dict[str, Any]:
    """Run ``scenario(client, peer, me, sources)`` against an in-process server with a
    400-byte budget; return the terminal frame it reports."""
    config = Config(session_references=SessionReferenceConfig.create(max_reference_bytes=400))
    async with open_runtime(config, tmp_path / "data") as runtime:
        server = Server(runtime.system.registry, limits=config.wire)
        async with trio.open_nursery() as nursery:
            [address] = await nursery.start(server.run, [f"ipc://{tmp_path}/in.sock"])
            async with open_client(address) as client, raw_peer(address) as peer:
                me = (await client.call("agents/create", {"cwd": "/projects/demo"}))["agentId"]
                ids = [await make_source(client, n) for n in range(sources)]
                with trio.fail_after(30):
                    frame = await scenario(client, peer, me, ids)
            await server.aclose()
    return frame


async def cancel_when(client: Any, peer: RawPeer, release: Callable[[], None]) -> dict[str, Any]:
    """Cancel call 1, whose handler is held at a gate; ``release`` the gate once the server has
    applied the cancel (the call is cancelling-running); return the terminal frame."""
    peer.send(cancel_frame(1))
    await wait_stats(client, lambda s: s["calls"]["cancelling-running"] == 1)
    release()
    return await peer.terminal(1)


async def test_cancel_during_budget_lookup(tmp_path: Path, monkeypatch: Any) -> None:
    """Before reads (the budget step): the wire answers SESSION_REFERENCE_CANCELLED."""
    gate = Gate()
    real = resolve_reference_budget

    async def gated(config: Any, lookup: Any) -> int:
        await gate.hold(shield=False)
        return await real(config, lookup)

    monkeypatch.setattr(prepare_module, "resolve_reference_budget", gated)

    async def scenario(client: Any, peer: RawPeer, me: str, ids: list[str]) -> dict[str, Any]:
        peer.send(prepare_call(1, me, [{"sessionId": ids[0]}]))
        await gate.entered.wait()
        peer.send(cancel_frame(1))
        return await peer.terminal(1)

    assert_reference_cancelled(await in_process(tmp_path, 1, scenario))
    assert spill_files(tmp_path / "data") == []


class GatedSpillStore(LocalSpillStore):
    """The real local store; the worker thread writing the second source's transcript first
    waits at a gate, so a cancel can land while that save is in progress."""

    entered: ClassVar[threading.Event]
    release: ClassVar[threading.Event]
    saved: ClassVar[list[SpillRef]]

    def _write(self, request: SaveTextSpill) -> SpillRef:
        if request.suggested_name == "session-reference-2.txt":
            self.entered.set()
            self.release.wait(30)
        ref = super()._write(request)
        self.saved.append(ref)
        return ref


async def test_cancel_during_spill_saves_removes_every_file(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """During saves (one done, one being written): SESSION_REFERENCE_CANCELLED, and both
    transcripts that reached the disk are removed."""
    monkeypatch.setattr(GatedSpillStore, "entered", threading.Event(), raising=False)
    monkeypatch.setattr(GatedSpillStore, "release", threading.Event(), raising=False)
    monkeypatch.setattr(GatedSpillStore, "saved", [], raising=False)
    monkeypatch.setattr(serve_module, "LocalSpillStore", GatedSpillStore)

    async def scenario(client: Any, peer: RawPeer, me: str, ids: list[str]) -> dict[str, Any]:
        peer.send(prepare_call(1, me, [{"sessionId": i} for i in ids]))
        await trio.to_thread.run_sync(GatedSpillStore.entered.wait, 20)
        while not GatedSpillStore.saved:  # the first source's save runs alongside
            await trio.sleep(0.005)
        return await cancel_when(client, peer, GatedSpillStore.release.set)

    assert_reference_cancelled(await in_process(tmp_path, 2, scenario))
    assert len(GatedSpillStore.saved) == 2
    assert spill_files(tmp_path / "data") == []


async def test_cancel_after_spill_saves_completed_removes_the_file(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """After the save completed, before the last check: SESSION_REFERENCE_CANCELLED, no file."""
    gate = Gate()
    seen: list[Path] = []
    real = prepare_module.prepare_omissions

    async def gated(store: Any, owner: str, rendered: Any, saved: list[SpillRef]) -> Any:
        notices = await real(store, owner, rendered, saved)
        seen.extend(Path(ref.locator) for ref in saved)
        await gate.hold(shield=True)
        return notices

    monkeypatch.setattr(prepare_module, "prepare_omissions", gated)

    async def scenario(client: Any, peer: RawPeer, me: str, ids: list[str]) -> dict[str, Any]:
        peer.send(prepare_call(1, me, [{"sessionId": ids[0]}]))
        await gate.entered.wait()
        assert [path.exists() for path in seen] == [True]
        return await cancel_when(client, peer, gate.release.set)

    assert_reference_cancelled(await in_process(tmp_path, 1, scenario))
    assert spill_files(tmp_path / "data") == []


def gate_the_reply(monkeypatch: Any) -> Gate:
    """Hold the window after ``prepare`` returned (spill saved, message built) and before the
    handler returns its reply."""
    gate = Gate()
    real = prepare

    async def gated(*args: Any, **kwargs: Any) -> Any:
        prepared = await real(*args, **kwargs)
        await gate.hold(shield=True)
        return prepared

    monkeypatch.setattr(reference_services, "prepare", gated)
    return gate


async def test_cancel_before_the_reply_removes_the_file(tmp_path: Path, monkeypatch: Any) -> None:
    """After prepare returned but before the reply: nothing is published and no spill remains."""
    gate = gate_the_reply(monkeypatch)

    async def scenario(client: Any, peer: RawPeer, me: str, ids: list[str]) -> dict[str, Any]:
        peer.send(prepare_call(1, me, [{"sessionId": ids[0]}]))
        await gate.entered.wait()
        assert len(spill_files(tmp_path / "data")) == 1
        return await cancel_when(client, peer, gate.release.set)

    frame = await in_process(tmp_path, 1, scenario)
    assert frame["type"] == "error"
    assert spill_files(tmp_path / "data") == []


async def test_cancel_before_the_reply_is_session_reference_cancelled(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """After prepare returned but before the reply, the code is SESSION_REFERENCE_CANCELLED."""
    gate = gate_the_reply(monkeypatch)

    async def scenario(client: Any, peer: RawPeer, me: str, ids: list[str]) -> dict[str, Any]:
        peer.send(prepare_call(1, me, [{"sessionId": ids[0]}]))
        await gate.entered.wait()
        return await cancel_when(client, peer, gate.release.set)

    assert_reference_cancelled(await in_process(tmp_path, 1, scenario))


async def test_other_calls_are_served_while_prepare_renders(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """While prepare's projection and retention run (held in their worker thread), a cheap
    call to another agent and one to the preparing agent itself are answered; the prepare then
    completes normally."""
    in_thread = threading.Event()
    release = threading.Event()
    released: list[bool] = []
    real = prepare_module.render_sources

    def held(*args: Any) -> Any:
        in_thread.set()
        # Bounded, so a regression (rendering on the event loop, which then cannot serve the
        # calls that release it) fails instead of hanging.
        released.append(release.wait(10))
        return real(*args)

    monkeypatch.setattr(prepare_module, "render_sources", held)

    async def scenario(client: Any, peer: RawPeer, me: str, ids: list[str]) -> dict[str, Any]:
        peer.send(prepare_call(1, me, [{"sessionId": ids[0]}]))
        await trio.to_thread.run_sync(in_thread.wait, 20)
        with trio.fail_after(5):
            assert await client.call("diagnostics/echoRaw", {"payload": "ping"}) == "ping"
            assert await client.agent(ids[0]).diagnostics.echo("source") == "source"
            assert await client.agent(me).diagnostics.echo("me") == "me"
        release.set()
        return await peer.terminal(1)

    frame = await in_process(tmp_path, 1, scenario)
    assert released == [True]
    assert frame["type"] == "result"
    assert frame["value"]["additionalContext"]["source"]["references"][0]["truncated"] is True


async def test_automatic_budget_follows_the_recorded_model_route(tmp_path: Path) -> None:
    """Without maxReferenceBytes the per-source budget is 64 KiB until the agent records a
    route with a context window, then max(65536, floor(window x 4 x fraction)); a route of
    unknown capacity is 64 KiB again."""
    async with served(tmp_path, "referenceContextFraction = 0.5", []) as (address, _):
        async with open_client(address) as client:
            source = (await client.call("agents/create", {"cwd": "/projects/other"}))["agentId"]
            text = "forty-two " * 10_000  # 100 000 bytes: more than 64 KiB, less than 200 000
            event = {
                "type": "user/message",
                "data": {
                    "id": "m1",
                    "role": "user",
                    "content": [{"type": "text", "text": text}],
                    "source": {"kind": "user"},
                },
                "surfaceOp": "append",
            }
            await client.call("sessions/append", {"agentId": source, "events": [event]})
            me = (await client.call("agents/create", {"cwd": "/projects/demo"}))["agentId"]
            resolver = client.agent(me).sessionReferenceResolver
            sessions = client.agent(me).sessions

            async def truncated() -> bool:
                with trio.fail_after(20):
                    prepared = await resolver.prepare("see", [{"sessionId": source}])
                record = prepared["additionalContext"]["source"]["references"][0]
                return bool(record["truncated"])

            assert await truncated()
            await sessions.setModelRoute("p", "m", 100_000)  # budget 200 000 bytes
            assert not await truncated()
            await sessions.setModelRoute("p", "m", None)  # capacity unknown: 64 KiB
            assert await truncated()


# -- errors over the wire --------------------------------------------------------------------


async def expect_error(client: Any, peer: RawPeer, call_id: int, me: str, refs: list[Any]) -> Any:
    """The same failing call through the typed client and as a raw frame; returns the
    client's exception after checking that the frame carries the same code and message."""
    with pytest.raises(SessionReferenceError) as caught:
        await client.agent(me).sessionReferenceResolver.prepare("see", refs)
    peer.send(prepare_call(call_id, me, refs))
    frame = await peer.terminal(call_id)
    error = caught.value
    assert frame == {
        "type": "error",
        "id": call_id,
        "code": error.code.value,
        "message": error.message,
        "details": {},
    }
    return error


async def test_reference_errors_arrive_with_code_and_upstream_message(tmp_path: Path) -> None:
    """SELF_REFERENCE, TOO_MANY, INVALID_REFERENCE and READ_FAILED (a fixture upstream
    rejects, in the query layer's corrupt-session wording) keep code and exact message."""
    _, path = place(tmp_path / "dsh", REJECTED)
    async with served(tmp_path, "maxReferenceBytes = 400", [LONG, REJECTED]) as (address, ids):
        source, rejected = ids
        async with open_client(address) as client, raw_peer(address) as peer:
            me = (await client.call("agents/create", {"cwd": "/projects/demo"}))["agentId"]
            fields = "session reference must contain a string sessionId and optional string label"
            cases: list[tuple[list[Any], str, str]] = [
                ([{"sessionId": source}, {"sessionId": me}, {"sessionId": source}],
                 "SELF_REFERENCE", f"session {json.dumps(me)} cannot reference itself"),
                ([{"sessionId": f"s{n}"} for n in range(4)],
                 "TOO_MANY", "a message may reference at most 3 sessions"),
                ([{"sessionId": source}, 5],
                 "INVALID_REFERENCE", "session reference must be an object"),
                ([{"sessionId": 5}], "INVALID_REFERENCE", fields),
                ([{"sessionId": source, "label": None}], "INVALID_REFERENCE", fields),
                ([{"sessionId": rejected}],
                 "READ_FAILED",
                 f'failed to read referenced session: stored session "{rejected}" is corrupt: '
                 f'stored session "{rejected}" failed validation: Error: seed request/header '
                 f"at index 0 lacks provider/model (raw log: {path})"),
            ]  # fmt: skip
            for number, (refs, code, message) in enumerate(cases, start=1):
                error = await expect_error(client, peer, number, me, refs)
                assert (error.code.value, error.message) == (f"SESSION_REFERENCE_{code}", message)
        assert spill_files(tmp_path / "data") == []


async def test_configured_limits_shape_the_errors(tmp_path: Path) -> None:
    """With maxReferences = 2 and maxReferenceBytes = 100 the remote caller gets TOO_MANY for
    three sources and BUDGET_EXCEEDED for a source whose fixed fields alone exceed 100 bytes."""
    resolver = "maxReferences = 2\nmaxReferenceBytes = 100"
    async with served(tmp_path, resolver, [LONG]) as (address, [source]):
        async with open_client(address) as client, raw_peer(address) as peer:
            me = (await client.call("agents/create", {"cwd": "/projects/demo"}))["agentId"]
            many = await expect_error(client, peer, 1, me, [{"sessionId": s} for s in "abc"])
            big = await expect_error(client, peer, 2, me, [{"sessionId": source}])
    assert (many.code.value, many.message) == (
        "SESSION_REFERENCE_TOO_MANY",
        "a message may reference at most 2 sessions",
    )
    assert (big.code.value, big.message) == (
        "SESSION_REFERENCE_BUDGET_EXCEEDED",
        "referenced session snapshot cannot fit the configured byte budget",
    )


async def test_missing_source_read_failed_message_is_upstreams(tmp_path: Path) -> None:
    """A missing source: READ_FAILED 'failed to read referenced session: session "missing" not
    found', exactly as upstream words it."""
    async with served(tmp_path, "maxReferenceBytes = 400", [LONG]) as (address, _):
        async with open_client(address) as client:
            me = (await client.call("agents/create", {"cwd": "/projects/demo"}))["agentId"]
            with pytest.raises(SessionReferenceError) as caught:
                await client.agent(me).sessionReferenceResolver.prepare(
                    "see", [{"sessionId": "missing"}]
                )
    assert caught.value.code.value == "SESSION_REFERENCE_READ_FAILED"
    assert caught.value.message == (
        'failed to read referenced session: session "missing" not found'
    )


def test_wire_knows_exactly_the_seven_codes() -> None:
    """The wire's SESSION_REFERENCE_* codes are exactly upstream's seven."""
    codes = {code.value for code in ErrorCode if code.value.startswith("SESSION_REFERENCE_")}
    assert codes == {
        f"SESSION_REFERENCE_{name}"
        for name in (
            "INVALID_CONFIG",
            "INVALID_REFERENCE",
            "SELF_REFERENCE",
            "TOO_MANY",
            "READ_FAILED",
            "BUDGET_EXCEEDED",
            "CANCELLED",
        )
    }


INVALID_CONFIGS = [
    ("maxReferences = 0", "session-reference: maxReferences must be a positive safe integer"),
    ("maxReferences = 4", "session-reference: maxReferences must not exceed 3"),
    ("candidateLimit = 1.5", "session-reference: candidateLimit must be a positive safe integer"),
    (
        "maxReferenceBytes = 0",
        "session-reference: maxReferenceBytes must be a positive safe integer",
    ),
    (
        "referenceContextFraction = 1.5",
        "session-reference: referenceContextFraction must be between zero and one",
    ),
    # The integer keys are checked before the ceiling of 3 (upstream's constructor order).
    (
        "maxReferences = 4\ncandidateLimit = 0",
        "session-reference: candidateLimit must be a positive safe integer",
    ),
]  # fmt: skip


def serve_args(tmp_path: Path, table: str) -> list[str]:
    config = tmp_path / "bad.toml"
    config.write_text(f"[sessionReferenceResolver]\n{table}\n")
    return ["serve", "--endpoint", f"ipc://{tmp_path}/s.sock", "--data", str(tmp_path / "data"),
            "--config", str(config)]  # fmt: skip


def test_invalid_config_stops_the_server_process(tmp_path: Path) -> None:
    """A real ``agent-actors serve`` with an invalid value exits 2 before serving, printing
    upstream's message."""
    result = subprocess.run(
        [sys.executable, "-m", "actors", *serve_args(tmp_path, "maxReferences = 4")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"agent-actors: {tmp_path / 'bad.toml'}: SESSION_REFERENCE_INVALID_CONFIG: "
        "session-reference: maxReferences must not exceed 3\n"
    )


@pytest.mark.parametrize(("table", "message"), INVALID_CONFIGS)
def test_invalid_config_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str, message: str
) -> None:
    """Each invalid [sessionReferenceResolver] value stops ``serve`` (the CLI entry point, in
    this process) with upstream's message, the first failing key in upstream's order."""
    assert cli_main(serve_args(tmp_path, table)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"agent-actors: {tmp_path / 'bad.toml'}: SESSION_REFERENCE_INVALID_CONFIG: {message}\n"
    )


def test_invalid_config_names_the_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The start-up failure names SESSION_REFERENCE_INVALID_CONFIG."""
    assert cli_main(serve_args(tmp_path, "maxReferences = 4")) == 2
    assert "SESSION_REFERENCE_INVALID_CONFIG" in capsys.readouterr().err
