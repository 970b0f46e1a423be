"""Every limit of docs/protocol.md § 11 at its edge: the limit passes, limit + 1 gets the
documented error, and the server keeps serving (issue 9, item 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack
import pytest
import trio
from hypothesis import example, given
from hypothesis import strategies as st

from actors._config import Config, ConfigError, load_config
from tests.security._helpers import RawPeer, runtime_server
from wire import (
    ArgumentsInvalidError,
    Endpoint,
    EndpointSpec,
    ErrorCode,
    OverloadedError,
    Param,
    Registry,
    Server,
    ServerLimits,
    SessionReferenceError,
    open_client,
)
from wire._codec import decode
from wire._limits import (
    ArgumentLimits,
    _first_exceeded,
    _within,
    check_arguments,
    salvage_call_id,
)
from wire._messages import Call
from wire._server_events import Send
from wire._server_protocol import ServerProtocol


def _registry(started: list[int] | None = None) -> Registry:
    async def echo(ctx: Any, args: dict[str, Any]) -> Any:
        return args["value"]

    async def hold(ctx: Any, args: dict[str, Any]) -> None:
        if started is not None:
            started.append(ctx.call_id)
        await trio.sleep_forever()

    value = Param(name="value", wire_name="value")
    return Registry(
        [
            Endpoint(spec=EndpointSpec(name="t/echo", params=(value,)), handler=echo),
            Endpoint(spec=EndpointSpec(name="t/hold"), handler=hold),
        ]
    )


async def _serve(nursery: trio.Nursery, limits: ServerLimits, **kw: Any) -> tuple[Server, str]:
    server = Server(_registry(**kw), limits=limits)
    [bound] = await nursery.start(server.run, "tcp://127.0.0.1:0")
    return server, bound


def _nested(depth: int) -> Any:
    """A value that makes ``args`` exactly ``depth`` levels deep when passed as ``value``."""
    value: Any = 1
    for _ in range(depth - 1):
        value = [value]
    return value


# -- frame size --------------------------------------------------------------------------------


def _call_frame(size: int, call_id: int = 7) -> bytes:
    """A call frame of exactly ``size`` bytes."""
    base = len(
        msgpack.packb({"type": "call", "id": call_id, "endpoint": "t/echo", "args": {"value": ""}})
    )
    for pad in range(max(size - base - 4, 0), size):
        frame: bytes = msgpack.packb(
            {"type": "call", "id": call_id, "endpoint": "t/echo", "args": {"value": "x" * pad}}
        )
        if len(frame) == size:
            return frame
    raise AssertionError(f"cannot build a frame of {size} bytes")


def test_frame_at_the_limit_decodes_and_one_byte_more_is_too_large() -> None:
    """maxFrameBytes passes; maxFrameBytes + 1 is too-large for the call it names."""
    limit = 4096
    assert isinstance(decode(_call_frame(limit), max_frame_bytes=limit), Call)
    server = ServerProtocol(ServerLimits(max_frame_bytes=limit))
    server.receive(b"p", msgpack.packb({"type": "hello", "versions": [1]}), 0.0)
    [event] = server.receive(b"p", _call_frame(limit + 1, call_id=9), 0.0)
    assert isinstance(event, Send)
    reply = msgpack.unpackb(event.frame)
    assert (reply["id"], reply["code"], reply["details"]) == (9, "too-large", {"limit": limit})


async def test_rejected_frames_name_their_call_over_tcp(nursery: trio.Nursery) -> None:
    """An oversized or undecodable call over a real connection gets an error for its id (the
    caller does not hang), and the server keeps serving that connection."""
    with trio.fail_after(15):
        _, bound = await _serve(nursery, ServerLimits(max_frame_bytes=4096))
        peer = RawPeer(bound)
        try:
            await peer.greet()
            peer.send(_call_frame(4097, call_id=7))
            oversized = await peer.receive()
            assert (oversized["id"], oversized["code"]) == (7, "too-large")
            bad_utf8 = msgpack.packb(
                {"type": "call", "id": 8, "endpoint": "t/echo", "args": {"value": "\x00"}}
            ).replace(b"\xa1\x00", b"\xa1\xff")
            peer.send(bad_utf8)
            undecodable = await peer.receive()
            assert (undecodable["id"], undecodable["code"]) == (8, "bad-request")
            assert undecodable["message"].startswith("undecodable frame")
            int_key = msgpack.packb(
                {"type": "call", "id": 9, "endpoint": "t/echo", "args": {"value": {1: 2}}},
                strict_types=False,
            )
            peer.send(int_key)
            assert (await peer.receive())["id"] == 9
            peer.send({"type": "call", "id": 10, "endpoint": "t/echo", "args": {"value": "ok"}})
            assert await peer.receive() == {"type": "result", "id": 10, "value": "ok"}
        finally:
            peer.close()


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (msgpack.packb({"type": "call", "id": 5, "args": {"x": 1}}), 5),
        (msgpack.packb({"args": {"x": 1}, "id": 6}), 6),
        (msgpack.packb({"id": -1}), None),
        (msgpack.packb({"id": 2**53}), None),
        (msgpack.packb({"id": "5"}), None),
        (msgpack.packb({"id": True}), None),
        (msgpack.packb([1, 2]), None),
        (b"", None),
        (b"\xc1", None),
        (msgpack.packb({"type": "call", "id": 3})[:-1], None),
    ],
    ids=[
        "first",
        "after-args",
        "negative",
        "too-big",
        "string",
        "bool",
        "array",
        "empty",
        "garbage",
        "cut-id",
    ],
)
def test_salvage_call_id(frame: bytes, expected: int | None) -> None:
    """The id is read when it is a valid call id and readable; never an exception."""
    assert salvage_call_id(frame) == expected


# -- nesting depth and collection lengths ----------------------------------------------------


def test_check_arguments_depth_edge() -> None:
    """``args`` nested exactly max_depth levels passes; one more level is reported."""
    limits = ArgumentLimits(max_depth=5, max_items=10)
    assert check_arguments({"value": _nested(5)}, limits) is None
    exceeded = check_arguments({"value": _nested(6)}, limits)
    assert exceeded is not None
    assert (exceeded.limit, exceeded.path) == (5, "value[0][0][0][0]")
    assert exceeded.problem == "nested deeper than 5 levels"


def test_check_arguments_items_edge() -> None:
    """Arrays and maps of max_items pass; max_items + 1 is reported where it is."""
    limits = ArgumentLimits(max_depth=5, max_items=3)
    assert check_arguments({"a": [1, 2, 3], "m": {"x": 1, "y": 2, "z": 3}}, limits) is None
    exceeded = check_arguments({"a": [1, 2], "m": {"k": [1, 2, 3, 4]}}, limits)
    assert exceeded is not None and (exceeded.path, exceeded.limit) == ("m.k", 3)
    assert check_arguments({"a": 1, "b": 2, "c": 3, "d": 4}, limits) is not None


_ARG_VALUES = st.recursive(
    st.none() | st.integers(0, 9) | st.text(max_size=2),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=2), children, max_size=4)
    ),
    max_leaves=30,
)


@given(
    args=st.dictionaries(st.text(max_size=2), _ARG_VALUES, max_size=5),
    max_depth=st.integers(0, 5),
    max_items=st.integers(0, 5),
)
@example(args={"a": [[1]], "b": {"c": [1, 2, 3]}}, max_depth=3, max_items=2)
def test_check_arguments_quick_walk_agrees_with_the_located_one(
    args: dict[str, Any], max_depth: int, max_items: int
) -> None:
    """The walk without paths passes exactly the arguments the walk that names the place
    passes; whatever breaks a limit is reported as that walk reports it."""
    limits = ArgumentLimits(max_depth=max_depth, max_items=max_items)
    located = _first_exceeded(args, limits)
    assert _within(args, max_depth, max_items) is (located is None)
    assert check_arguments(args, limits) == located


def test_check_arguments_is_not_recursive() -> None:
    """A 100000-level value is refused without touching Python's recursion limit."""
    assert check_arguments({"v": _nested(100_000)}, ArgumentLimits()) is not None


async def test_depth_and_items_limits_over_the_wire(nursery: trio.Nursery) -> None:
    """Depth and length at the limit are served; limit + 1 is arguments-invalid with
    ``details.limit``, and the server serves on."""
    with trio.fail_after(15):
        limits = ServerLimits(max_arg_depth=4, max_arg_items=100)
        _, bound = await _serve(nursery, limits)
        async with open_client(bound) as client:
            assert await client.call("t/echo", {"value": _nested(4)}) == _nested(4)
            with pytest.raises(ArgumentsInvalidError, match="nested deeper than 4") as deep:
                await client.call("t/echo", {"value": _nested(5)})
            assert deep.value.details == {"path": "value[0][0][0]", "limit": 4}
            assert await client.call("t/echo", {"value": list(range(100))}) == list(range(100))
            with pytest.raises(ArgumentsInvalidError, match="101 elements") as long:
                await client.call("t/echo", {"value": list(range(101))})
            assert long.value.details == {"path": "value", "limit": 100}
            wide = {str(i): i for i in range(101)}
            with pytest.raises(ArgumentsInvalidError):
                await client.call("t/echo", {"value": wide})
            assert await client.call("t/echo", {"value": "still serving"}) == "still serving"


# -- concurrency ---------------------------------------------------------------------------------


async def test_in_flight_per_client_edge(nursery: trio.Nursery) -> None:
    """maxInFlight calls of one client run; the next one is overloaded, not queued."""
    with trio.fail_after(15):
        started: list[int] = []
        _, bound = await _serve(nursery, ServerLimits(max_in_flight=3), started=started)
        async with open_client(bound) as client, trio.open_nursery() as calls:
            for _ in range(3):
                calls.start_soon(client.call, "t/hold")
            while len(started) < 3:
                await trio.sleep(0.01)
            with pytest.raises(OverloadedError) as excinfo:
                await client.call("t/hold")
            assert excinfo.value.details == {"limit": 3}
            calls.cancel_scope.cancel()


async def test_in_flight_per_server_edge(nursery: trio.Nursery) -> None:
    """maxInFlightTotal calls across clients run; the next one, from any client, is
    overloaded even though that client is under its own limit."""
    with trio.fail_after(15):
        started: list[int] = []
        limits = ServerLimits(max_in_flight=3, max_in_flight_total=4)
        _, bound = await _serve(nursery, limits, started=started)
        async with (
            open_client(bound) as first,
            open_client(bound) as second,
            trio.open_nursery() as calls,
        ):
            for _ in range(3):
                calls.start_soon(first.call, "t/hold")
            calls.start_soon(second.call, "t/hold")
            while len(started) < 4:
                await trio.sleep(0.01)
            with pytest.raises(OverloadedError):
                await second.call("t/hold")
            calls.cancel_scope.cancel()


# -- query length and references per prepare (the full runtime) ------------------------------


async def test_query_length_edge(tmp_path: Path) -> None:
    """A query of maxQueryLength characters is served by both completion endpoints; one
    character more is arguments-invalid with ``details.limit``."""
    with trio.fail_after(30):
        config = Config(max_query_length=8)
        async with runtime_server(tmp_path / "data", config) as bound:
            async with open_client(bound) as client:
                agent = await client.call("agents/create", {"cwd": str(tmp_path)})
                args = {"agentId": agent["agentId"]}
                for endpoint in ("sessionReferenceResolver/candidates", "fileReferences/list"):
                    assert isinstance(await client.call(endpoint, {**args, "query": "é" * 8}), list)
                    with pytest.raises(ArgumentsInvalidError, match="9 characters") as exc:
                        await client.call(endpoint, {**args, "query": "é" * 9})
                    assert exc.value.details == {"path": "query", "limit": 8}


async def test_references_per_prepare_edge(tmp_path: Path) -> None:
    """maxReferences distinct sessions are prepared; one more is SESSION_REFERENCE_TOO_MANY."""
    with trio.fail_after(30):
        config = load_config(
            _write(tmp_path / "c.toml", "[sessionReferenceResolver]\nmaxReferences = 2\n")
        )
        async with runtime_server(tmp_path / "data", config) as bound:
            async with open_client(bound) as client:
                ids = [
                    (await client.call("agents/create", {"title": f"s{i}"}))["agentId"]
                    for i in range(4)
                ]
                target, sources = ids[0], ids[1:]
                refs = [{"sessionId": s} for s in sources]
                prepared = await client.call(
                    "sessionReferenceResolver/prepare",
                    {"agentId": target, "content": "hi", "references": refs[:2]},
                )
                assert prepared["content"] == "hi"
                with pytest.raises(SessionReferenceError) as exc:
                    await client.call(
                        "sessionReferenceResolver/prepare",
                        {"agentId": target, "content": "hi", "references": refs},
                    )
                assert exc.value.code == ErrorCode.SESSION_REFERENCE_TOO_MANY


# -- configuration -------------------------------------------------------------------------------


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_limits_are_configurable(tmp_path: Path) -> None:
    """Every limit is a [wire] key and reaches the server's limits."""
    config = load_config(
        _write(
            tmp_path / "c.toml",
            "[wire]\nmaxFrameBytes = 1000\nmaxInFlight = 2\nmaxInFlightTotal = 3\n"
            "maxArgDepth = 4\nmaxArgItems = 5\nmaxQueryLength = 6\n",
        )
    )
    assert (config.wire.max_frame_bytes, config.wire.max_in_flight) == (1000, 2)
    assert (config.wire.max_in_flight_total, config.wire.max_arg_depth) == (3, 4)
    assert (config.wire.max_arg_items, config.max_query_length) == (5, 6)


@pytest.mark.parametrize("key", ["maxArgDepth", "maxArgItems", "maxQueryLength"])
@pytest.mark.parametrize("value", ["0", "-1", "1.5", "true", '"8"'])
def test_limit_keys_reject_bad_values(tmp_path: Path, key: str, value: str) -> None:
    """A limit must be a positive integer; anything else stops the start and names the key."""
    with pytest.raises(ConfigError, match=key):
        load_config(_write(tmp_path / "c.toml", f"[wire]\n{key} = {value}\n"))


def test_query_limit_keeps_every_endpoint_field() -> None:
    """Wrapping an endpoint for the query limit keeps its inline fast path and arrival hook."""
    from actors._query_limits import limit_queries

    async def complete(context: Any, args: dict[str, Any]) -> Any:
        return args

    def inline(context: Any, args: dict[str, Any]) -> Any:
        return args

    def arrival(args: dict[str, Any]) -> Any:
        return None

    query = Param(name="query", wire_name="query", annotation=str)
    spec = EndpointSpec(name="completion/list", params=(query,))
    registry = Registry()
    registry.add(Endpoint(spec=spec, handler=complete, run_inline=inline, on_arrival=arrival))
    (limited,) = list(limit_queries(registry, 8))
    assert (limited.run_inline, limited.on_arrival) == (inline, arrival)
    assert limited.bind({"query": "x" * 8}) == {"query": "x" * 8}
    with pytest.raises(ArgumentsInvalidError):
        limited.bind({"query": "x" * 9})
