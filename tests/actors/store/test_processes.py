"""The store across real processes: one writer per session, and acknowledged appends that
survive SIGKILL (issue 3, item 3)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from actors._store_services import build_session_services
from actors.session_log._reader import load_session
from actors.store._events import record_event, title_event
from tests.actors.store.test_session_store import header, turn
from wire import AgentBusyError

ROOT = Path(__file__).resolve().parents[3]

# Child: activate session "s1" of DATA and append turns through the store; print
# "ACK <last seq>" once each append call has returned (the acknowledgement). With HOLD,
# stop after one turn and wait (holding the write lock) until killed.
CHILD = """
import sys
root, data, durability, hold = sys.argv[1:]
sys.path[:0] = [root]
import trio
from pathlib import Path
from actors._store_services import build_session_services
from tests.actors.store.test_session_store import turn

async def main():
    services = build_session_services(Path(data), durability=durability, index_on_start=False)
    state = await services.directory.load("s1")
    number = 0
    while True:
        number += 1
        outcome = await state.append(turn(number))
        print("ACK", outcome.seqs[-1], flush=True)
        if hold == "1":
            await trio.sleep_forever()

trio.run(main)
"""


def spawn(data: Path, *, durability: str = "fsync", hold: bool = False) -> subprocess.Popen[bytes]:
    """Start the child writer process."""
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(ROOT), str(data), durability, str(int(hold))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def acks(child: subprocess.Popen[bytes]) -> Iterator[int]:
    """Yield the child's acknowledged last seqs as they arrive."""
    assert child.stdout is not None
    while True:
        line = child.stdout.readline()
        if not line:
            error = child.stderr.read().decode() if child.stderr else ""
            raise AssertionError(f"child exited early: {error}")
        if line.startswith(b"ACK"):
            yield int(line.split()[1])


def kill(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child and reap it."""
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    for stream in (child.stdout, child.stderr):
        if stream is not None:
            stream.close()
    assert child.returncode == -signal.SIGKILL


def expected(count: int) -> list[dict[str, Any]]:
    """The first ``count`` events the child appends (times are not compared)."""
    events: list[dict[str, Any]] = []
    number = 0
    while len(events) < count:
        number += 1
        for item in turn(number):
            events.append(record_event(item, len(events), 0))
    return events[:count]


def without_time(events: list[Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in event.items() if k != "time"} for event in events]


async def test_a_second_process_gets_agent_busy_until_the_writer_dies(tmp_path: Path) -> None:
    """While a child process holds the session, this process's append is agent-busy with the
    child's pid and changes nothing; once the child is SIGKILLed the lock is gone and this
    process continues the log after the child's events."""
    data = tmp_path / "data"
    services = build_session_services(data, index_on_start=False)
    await services.directory.create(header("s1"))
    child = spawn(data, hold=True)
    try:
        assert next(acks(child)) == 9
        state = await services.directory.load("s1")
        assert state is not None
        before = state.path.read_bytes()
        with pytest.raises(AgentBusyError) as caught:
            await state.append([title_event("mine")])
        assert caught.value.details["holderPid"] == child.pid
        assert f"process {child.pid}" in caught.value.message
        assert state.path.read_bytes() == before
    finally:
        kill(child)
    try:
        assert (await state.append([title_event("mine")])).seqs == (10,)
        loaded = load_session(state.path)
        assert without_time(list(loaded.events)[:10]) == without_time(expected(10))
        assert loaded.captured_through_seq == 10
    finally:
        await services.aclose()


@pytest.mark.parametrize("durability", ["fsync", "flush"])
async def test_acknowledged_appends_survive_sigkill(tmp_path: Path, durability: str) -> None:
    """A writer process killed at an arbitrary point during a stream of appends loses no
    acknowledged event; the next writer recovers per the crash rules and continues."""
    data = tmp_path / "data"
    services = build_session_services(data, index_on_start=False)
    await services.directory.create(header("s1"))
    await services.aclose()
    child = spawn(data, durability=durability)
    acknowledged = -1
    try:
        stream = acks(child)
        for _ in range(40):
            acknowledged = next(stream)
        await trio.sleep(0.003)  # let the kill land somewhere inside the next append
    finally:
        kill(child)
    path = next((data / "sessions").glob("*/s1/session.jsonl.zstd"))
    loaded = load_session(path)
    assert loaded.stored_count - 1 >= acknowledged
    stored = list(loaded.events)[: loaded.stored_count]
    assert without_time(stored) == without_time(expected(loaded.stored_count))
    resumed_services = build_session_services(data, index_on_start=False)
    try:
        state = await resumed_services.directory.load("s1")
        assert state is not None
        outcome = await state.append([title_event("after the crash")])
        assert outcome.seqs == (len(loaded.events),)
        reread = load_session(path)
        assert (reread.torn, reread.closers) == (None, ())
        assert json.dumps(list(reread.events)[:-1]) == json.dumps(list(loaded.events))
    finally:
        await resumed_services.aclose()
