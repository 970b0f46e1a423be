"""A client that re-sends hello while waiting for welcome, with calls pipelined between the two
hellos (docs/protocol.md §4.1): no call is lost without a terminal frame."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zmq

from actors._serve import READY_LINE


def _pack(message: dict[str, Any]) -> bytes:
    return msgpack.packb(message, use_bin_type=True)


def _echo(call_id: int) -> bytes:
    args = {"payload": f"call {call_id}"}
    return _pack({"type": "call", "id": call_id, "endpoint": "diagnostics/echoRaw", "args": args})


@pytest.fixture
def dealer() -> Iterator[zmq.Socket[bytes]]:
    context = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        yield sock
    finally:
        sock.close()
        context.term()


def _serve(endpoint: str, data: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "actors", "serve", "--endpoint", endpoint, "--data", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _stop(server: subprocess.Popen[str]) -> None:
    server.terminate()
    server.wait(timeout=30)
    if server.stdout is not None:
        server.stdout.close()


def _read(sock: zmq.Socket[bytes], ids: set[int], seconds: float) -> list[dict[str, Any]]:
    """Every frame for ``seconds`` (pings answered), stopping early once each of ``ids`` has a
    terminal frame and a welcome came."""
    frames: list[dict[str, Any]] = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if not sock.poll(100):
            continue
        message = msgpack.unpackb(sock.recv())
        if message["type"] == "ping":
            sock.send(_pack({"type": "pong"}))
            continue
        frames.append(message)
        ended = {f.get("id") for f in frames if f["type"] in ("result", "error")}
        if ids <= ended and any(f["type"] == "welcome" for f in frames):
            time.sleep(0.3)  # a second terminal frame would come by now
            while sock.poll(0):
                late = msgpack.unpackb(sock.recv())
                if late["type"] != "ping":
                    frames.append(late)
            break
    return frames


def _terminal(frames: list[dict[str, Any]], call_id: int) -> list[dict[str, Any]]:
    return [f for f in frames if f["type"] in ("result", "error") and f.get("id") == call_id]


def _assert_one_answer_each(frames: list[dict[str, Any]], ids: list[int]) -> None:
    assert any(f["type"] == "welcome" for f in frames), frames
    for call_id in ids:
        [answer] = _terminal(frames, call_id)
        if answer["type"] == "error":
            assert (answer["code"], answer["details"]) == ("peer-lost", {"reason": "re-hello"})


def test_calls_between_two_hellos_sent_before_the_server_starts(
    tmp_path: Path, dealer: zmq.Socket[bytes]
) -> None:
    """A client started before its server sends hello, a call, and (after a second) hello
    again; the server reads all three at once: the call gets exactly one terminal frame (its
    result, or peer-lost naming the re-hello), and a welcome arrives."""
    endpoint = f"ipc://{tmp_path}/s.sock"
    dealer.connect(endpoint)
    dealer.send(_pack({"type": "hello", "versions": [1]}))
    dealer.send(_echo(1))
    time.sleep(1.0)
    dealer.send(_pack({"type": "hello", "versions": [1]}))
    server = _serve(endpoint, tmp_path / "data")
    try:
        frames = _read(dealer, {1}, seconds=30)
        _assert_one_answer_each(frames, [1])
    finally:
        _stop(server)


def test_calls_between_two_hellos_on_a_running_server(
    tmp_path: Path, dealer: zmq.Socket[bytes]
) -> None:
    """hello, two calls and hello again, back to back on a running server: each call gets
    exactly one terminal frame, and the welcomes are not discarded."""
    endpoint = f"ipc://{tmp_path}/s.sock"
    server = _serve(endpoint, tmp_path / "data")
    try:
        assert server.stdout is not None
        assert server.stdout.readline().startswith(READY_LINE)
        dealer.connect(endpoint)
        dealer.send(_pack({"type": "hello", "versions": [1]}))
        dealer.send(_echo(1))
        dealer.send(_echo(2))
        dealer.send(_pack({"type": "hello", "versions": [1]}))
        frames = _read(dealer, {1, 2}, seconds=30)
        _assert_one_answer_each(frames, [1, 2])
    finally:
        _stop(server)
