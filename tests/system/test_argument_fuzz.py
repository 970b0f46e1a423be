"""Every msgpack type as every argument of every endpoint, against a real server process.

A bare DEALER speaks docs/protocol.md by hand, so that it can send what no well-behaved client
would: extension types, timestamps, float 32, strings that are not UTF-8, maps with integer
keys. Each value is spliced as raw msgpack into a call whose other arguments are valid, so it
reaches as far into the server as it can. Whatever the value, the answer is a result or a typed
error other than ``internal``, the server's stderr holds no traceback, and it serves on.
"""

from __future__ import annotations

import math
import os
import random
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import trio
import zmq

from actors._serve import READY_LINE
from tests._processes import reap
from wire import ArgumentsInvalidError, ErrorCode, WireError, open_client

#: Every call carries this deadline: a valid but huge sleep must not hold the sweep up.
DEADLINE_MS = 1500
#: Calls in flight at once (well under the server's ``maxInFlight``).
WINDOW = 24


def packed(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def float32(value: float) -> bytes:
    return b"\xca" + struct.pack(">f", value)


def nested(depth: int) -> bytes:
    """An array nested ``depth`` levels deep around an integer."""
    return b"\x91" * depth + b"\x01"


#: Longer than a file name may be.
LONG_NAME = packed("n" * 300)

#: One sample of each msgpack family and its edges, as raw msgpack (label → bytes).
SAMPLES: dict[str, bytes] = {
    "nil": packed(None),
    "true": packed(True),
    "false": packed(False),
    "int 0": packed(0),
    "int 1": packed(1),
    "int -1": packed(-1),
    "negative fixint -32": packed(-32),
    "int 8 -33": packed(-33),
    "uint 8 255": packed(255),
    "uint 16 65535": packed(65535),
    "uint 32 2**32-1": packed(2**32 - 1),
    "int 32 -2**31": packed(-(2**31)),
    "uint 64 2**63": packed(2**63),
    "uint 64 max": packed(2**64 - 1),
    "int 64 min": packed(-(2**63)),
    "float 64 0.5": packed(0.5),
    "float 64 -0.0": packed(-0.0),
    "float 64 -1.5": packed(-1.5),
    "float 64 NaN": packed(math.nan),
    "float 64 inf": packed(math.inf),
    "float 64 -inf": packed(-math.inf),
    "float 64 max": packed(sys.float_info.max),
    "float 32 1.5": float32(1.5),
    "float 32 NaN": float32(math.nan),
    "float 32 -inf": float32(-math.inf),
    "str empty": packed(""),
    "str ascii": packed("fuzz"),
    "str NUL": packed("a\x00b"),
    "str dot-dot": packed("../../etc"),
    "str absolute": packed("/tmp"),
    "str unicode": packed("\u00e9\U0001f642\u202e"),
    "str 300 chars": LONG_NAME,
    "str invalid UTF-8": b"\xa2\xff\xfe",
    "bin empty": packed(b""),
    "bin bytes": packed(b"\x00\xff"),
    "array empty": packed([]),
    "array mixed": packed([1, "a", None, 2.5, b"b", {"k": []}]),
    "array nested 40": nested(40),
    "map empty": packed({}),
    "map string keys": packed({"type": "x", "data": {"a": [1]}, "op": "replace"}),
    "map int key": b"\x81\x01\x02",
    "map nil key": b"\x81\xc0\x02",
    "map bin key": packed({b"k": 1}),
    "ext 1": packed(msgpack.ExtType(1, b"x")),
    "ext -2 (reserved)": b"\xd4\xfe\x00",
    "timestamp 32": packed(msgpack.Timestamp(1, 0)),
    "timestamp 96": packed(msgpack.Timestamp(-1, 5)),
    "ext -1 bad length": b"\xd5\xff\x00\x00",
    "nested ext": packed({"a": [msgpack.ExtType(7, b"")]}),
    "nested timestamp": packed([{"when": msgpack.Timestamp(2**34, 1)}]),
}


def random_value(rng: random.Random, depth: int = 0) -> bytes:
    """A random msgpack value: a sample, or an array or map of random values."""
    roll = rng.random()
    if depth < 6 and roll < 0.15:
        items = [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
        return bytes([0x90 | len(items)]) + b"".join(items)
    if depth < 6 and roll < 0.3:
        entries = rng.randrange(4)
        keys = [packed(rng.choice(["type", "data", "path", "op", "k"])) for _ in range(entries)]
        body = b"".join(k + random_value(rng, depth + 1) for k in keys)
        return bytes([0x80 | entries]) + body
    if roll < 0.4:
        return packed(rng.choice([rng.getrandbits(64) - 2**63, rng.getrandbits(64)]))
    if roll < 0.5:
        return struct.pack(">Bd", 0xCB, struct.unpack(">d", rng.randbytes(8))[0])
    if roll < 0.55:
        return packed(rng.randbytes(rng.randrange(8)).decode("latin-1"))
    return rng.choice(list(SAMPLES.values()))


#: Valid values of required arguments, so a fuzzed argument is checked as far as it gets.
BASELINE: dict[tuple[str, str], Any] = {
    ("diagnostics/publish", "path"): "fuzz/published",
    ("diagnostics/publish", "marker"): "fuzz/marker",
    ("sessions/append", "events"): [{"type": "fuzz/event", "data": {}, "ignorable": True}],
    ("sessionReferenceResolver/prepare", "content"): "hello",
    ("sessionReferenceResolver/prepare", "references"): [],
}
BY_TYPE: dict[str, Any] = {
    "string": "x",
    "number": 0,
    "integer": 1,
    "boolean": False,
    "any": None,
    "array<any>": [],
}


def raw_map(entries: dict[str, bytes]) -> bytes:
    """A map of string keys whose values are raw msgpack."""
    assert len(entries) < 16
    return bytes([0x80 | len(entries)]) + b"".join(packed(k) + v for k, v in entries.items())


def call_frame(call_id: int, endpoint: str, args: dict[str, bytes]) -> bytes:
    """A call whose ``args`` values are raw msgpack; ``id`` first, so a reply can name it."""
    head = packed({"type": "call", "id": call_id, "endpoint": endpoint, "deadlineMs": DEADLINE_MS})
    # Re-open the envelope map for one more entry: ``args``.
    assert head[0] == 0x84
    return bytes([0x85]) + head[1:] + packed("args") + raw_map(args)


def records(source_id: str) -> dict[tuple[str, str], tuple[dict[str, Any], bool]]:
    """Valid elements of record-like arguments, whose every field is fuzzed too, and whether
    the argument is an array of them."""
    return {
        ("sessions/append", "events"): (
            {
                "type": "fuzz/event",
                "data": {},
                "surfaceOp": None,
                "sourceEventSeqs": None,
                "ignorable": True,
            },
            True,
        ),
        ("sessions/list", "after"): ({"createdAt": 0, "sessionId": source_id}, False),
        ("sessionReferenceResolver/prepare", "references"): (
            {"sessionId": source_id, "label": "source"},
            True,
        ),
    }


def cases(
    described: dict[str, Any], agent_id: str, source_id: str, values: dict[str, bytes]
) -> Iterator[tuple[str, str, str, dict[str, bytes]]]:
    """``(endpoint, argument, label, args)`` for every value as every argument, and as every
    field of the record-like arguments of :func:`records`."""
    nested_cases = records(source_id)
    for endpoint in described["endpoints"]:
        name = endpoint["name"]
        base: dict[str, bytes] = {}
        for param in endpoint["params"]:
            if param.get("lookup") == "agent":
                base[param["name"]] = packed(agent_id)
            elif param["required"]:
                key = (name, param["name"])
                valid = BASELINE[key] if key in BASELINE else BY_TYPE[param["type"]]
                base[param["name"]] = packed(valid)
        for param in endpoint["params"]:
            for label, value in values.items():
                yield name, param["name"], label, {**base, param["name"]: value}
            if (name, param["name"]) not in nested_cases:
                continue
            element, in_array = nested_cases[name, param["name"]]
            for field in element:
                for label, value in values.items():
                    raw = raw_map({**{k: packed(v) for k, v in element.items()}, field: value})
                    argument = f"{param['name']}{'[0]' if in_array else ''}.{field}"
                    raw = b"\x91" + raw if in_array else raw
                    yield name, argument, label, {**base, param["name"]: raw}


def exchange(address: str, frames: list[bytes]) -> dict[int, dict[str, Any]]:
    """Send ``frames`` (call ids 1..n) at most WINDOW at a time; every reply by call id.

    Blocking pyzmq, run from a worker thread; connection-level errors are kept under id -1.
    """
    context: zmq.Context[Any] = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(address)
    replies: dict[int, dict[str, Any]] = {}
    connection_errors: list[dict[str, Any]] = []

    def receive() -> None:
        if not sock.poll(DEADLINE_MS + 10_000):
            raise TimeoutError(f"no reply within {DEADLINE_MS / 1000 + 10} s")
        reply = msgpack.unpackb(sock.recv(), raw=False)
        if reply["type"] == "ping":
            sock.send(packed({"type": "pong"}))
        elif reply.get("id") is None:
            connection_errors.append(reply)
        else:
            replies[reply["id"]] = reply

    try:
        sock.send(packed({"type": "hello", "versions": [1], "name": "fuzz"}))
        if not sock.poll(10_000):
            raise TimeoutError("no welcome")
        welcome = msgpack.unpackb(sock.recv(), raw=False)
        assert welcome["type"] == "welcome", welcome
        sent = 0
        while len(replies) < len(frames):
            while sent < len(frames) and sent - len(replies) < WINDOW:
                sock.send(frames[sent])
                sent += 1
            receive()
    finally:
        sock.close(linger=0)
        context.term()
    if connection_errors:
        replies[-1] = {"errors": connection_errors}
    return replies


async def describe(address: str, project: Path) -> tuple[dict[str, Any], str, str]:
    """The server's ``system/describe``, and two fresh agents: the target and a source."""
    async with open_client(address) as client:
        described = await client.call("system/describe")
        agent = await client.call("agents/create", {"title": "fuzz", "cwd": str(project)})
        source = await client.call("agents/create", {"title": "source", "cwd": str(project)})
    return described, agent["agentId"], source["agentId"]


async def sweep(tmp_path: Path, values: dict[str, bytes]) -> None:
    """Start a server, send every value as every argument, check answers, stderr and life."""
    data = tmp_path / "data"
    # The agents' cwd, for fileReferences/list: small, so that indexing it costs nothing.
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print()\n")
    stderr_path = tmp_path / "server.stderr"
    address = f"ipc://{tmp_path}/fuzz.sock"
    with stderr_path.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "actors", "serve", "--endpoint", address, "--data", str(data)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            cwd=tmp_path,
        )
    try:
        assert process.stdout is not None
        ready = b""
        with trio.fail_after(30):
            while b"\n" not in ready:
                chunk = await process.stdout.receive_some(4096)
                assert chunk, "the server exited before it was ready"
                ready += chunk
        assert ready.startswith(READY_LINE.encode()), ready
        with trio.fail_after(30):
            described, agent_id, source_id = await describe(address, project)
        plan = list(cases(described, agent_id, source_id, values))
        frames = [call_frame(i, e, args) for i, (e, _, _, args) in enumerate(plan, start=1)]
        with trio.fail_after(60 + len(frames) / 20):
            replies = await trio.to_thread.run_sync(exchange, address, frames)
        assert -1 not in replies, f"connection-level errors: {replies[-1]}"
        failures = [
            f"{endpoint} {argument}={label}: {reply['code']}: {reply.get('message')}"
            for (endpoint, argument, label, _), reply in zip(
                plan, (replies[i] for i in range(1, len(plan) + 1)), strict=True
            )
            if reply["type"] == "error" and reply["code"] == "internal"
        ]
        assert not failures, "\n".join(failures)
        # Every extension type is refused at the frame, never echoed back.
        for (_, _, label, _), i in zip(plan, range(1, len(plan) + 1), strict=True):
            if label.startswith(("ext", "timestamp", "nested ext", "nested timestamp")):
                assert replies[i]["code"] == "bad-request", (label, replies[i])
        with trio.fail_after(30):
            again, _, _ = await describe(address, project)
        assert again == described
        assert process.returncode is None
    finally:
        await reap(process)
    log = stderr_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-5000:]


async def test_every_msgpack_type_as_every_argument(tmp_path: Path) -> None:
    """No msgpack value as any argument of any endpoint gets `internal`, a traceback or a dead
    server; extension types and timestamps are refused as `bad-request`."""
    await sweep(tmp_path, SAMPLES)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
async def test_random_values_as_every_argument(tmp_path: Path, seed: int) -> None:
    """Random nested values (arrays and maps of every type) as every argument answer no
    `internal` and leave no traceback."""
    rng = random.Random(seed)
    await sweep(tmp_path, {f"random {seed}.{i}": random_value(rng) for i in range(150)})


async def test_sleep_refuses_negative_and_non_finite_seconds(
    server_process: tuple[trio.Process, str],
) -> None:
    """diagnostics/sleep answers arguments-invalid naming `seconds` and its rule for -1, NaN
    and ±inf, never runs the handler, and describe lists the rule as data."""
    _, address = server_process
    messages = {}
    with trio.fail_after(30):
        async with open_client(address) as client:
            agent = (await client.call("agents/create", {}))["agentId"]
            for seconds in (-1, math.nan, math.inf, -math.inf):
                with pytest.raises(ArgumentsInvalidError) as info:
                    await client.call(
                        "diagnostics/sleep", {"agentId": agent, "seconds": seconds, "label": "bad"}
                    )
                assert info.value.details == {"path": "seconds"}
                messages[seconds] = info.value.message
            assert await client.call("diagnostics/sleep", {"agentId": agent, "seconds": 0}) == 0
            endings = await client.call("diagnostics/endings")
            described = await client.call("system/describe")
    rule = "diagnostics/sleep: seconds: must be a finite number >= 0, got"
    assert list(messages.values()) == [f"{rule} -1.0", f"{rule} nan", f"{rule} inf", f"{rule} -inf"]
    assert [e["call"] for e in endings] == ["sleep"]
    (sleep,) = [e for e in described["endpoints"] if e["name"] == "diagnostics/sleep"]
    (param,) = [p for p in sleep["params"] if p["name"] == "seconds"]
    assert param == {
        "name": "seconds",
        "type": "number",
        "required": True,
        "constraints": {"min": 0, "finite": True},
    }


async def test_publish_refuses_names_the_file_system_cannot_take(
    server_process: tuple[trio.Process, str],
) -> None:
    """diagnostics/publish answers arguments-invalid, naming the argument, for a name with a
    NUL, one too long for a file name, and a path that collides with the marker's directory."""
    _, address = server_process
    bad = [
        ("path", {"path": "a\x00b", "marker": "m1"}),
        ("marker", {"path": "p2", "marker": "n" * 300}),
        ("path", {"path": "dir", "marker": "dir/marker"}),
        ("marker", {"path": "p3", "marker": "file/m3"}),
    ]
    with trio.fail_after(30):
        async with open_client(address) as client:
            agent = (await client.call("agents/create", {}))["agentId"]
            base = {"agentId": agent, "workSeconds": 0, "holdSeconds": 0}
            # ``file`` is a file before the last case asks for it to be a directory.
            await client.call("diagnostics/publish", {**base, "path": "file", "marker": "m0"})
            for argument, names in bad:
                with pytest.raises(ArgumentsInvalidError) as info:
                    await client.call("diagnostics/publish", {**base, **names})
                assert info.value.details == {"path": argument}, names
                assert info.value.message.startswith(f"diagnostics/publish: {argument}: ")
            assert (await client.call("system/describe"))["endpoints"]


async def test_session_id_too_long_for_a_file_name(
    server_process: tuple[trio.Process, str],
) -> None:
    """A session id whose path segment cannot be a file name is arguments-invalid on create,
    and looking it up afterwards is session-not-found."""
    _, address = server_process
    long_id = "n" * 300
    codes = []
    with trio.fail_after(30):
        async with open_client(address) as client:
            for endpoint, args in [
                ("sessions/create", {"sessionId": long_id}),
                ("sessions/info", {"agentId": long_id}),
            ]:
                try:
                    await client.call(endpoint, args)
                except WireError as exc:
                    codes.append(exc.code)
    assert codes == [ErrorCode.ARGUMENTS_INVALID, ErrorCode.SESSION_NOT_FOUND]
