"""``wire.use_io_thread_policy``: the I/O threads of the contexts a process uses, read back from
the kernel in a fresh process (the policy is process-wide and set before the first socket)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from wire import use_io_thread_policy

_PROBE = """
import os, sys, time, zmq
from wire import use_io_thread_policy
from wire._io_threads import new_context

use_io_thread_policy(sys.argv[1])
sockets = [zmq.Context.instance().socket(zmq.DEALER), new_context().socket(zmq.DEALER)]
for _ in range(200):  # a new thread names itself once it runs
    policies = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/comm") as comm:
            if comm.read().startswith("ZMQbg/IO"):
                policies.append(os.sched_getscheduler(int(task)))
    if len(policies) == 2:
        break
    time.sleep(0.01)
print(len(policies), sorted(set(policies)))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_BATCH is Linux's")
@pytest.mark.parametrize(
    ("policy", "expected"), [("batch", os.SCHED_BATCH), ("normal", os.SCHED_OTHER)]
)
def test_policy_reaches_the_io_threads_of_the_shared_and_new_contexts(
    policy: str, expected: int
) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE, policy], capture_output=True, text=True, check=True
    )
    assert probe.stdout.strip() == f"2 [{expected}]"  # two contexts, one I/O thread each


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="must be one of"):
        use_io_thread_policy("fifo")  # type: ignore[arg-type]


_FLOOD_PROBE = """
import os, sys, trio, zmq
from wire import use_io_thread_policy
from wire._io_threads import PREEMPT_LINGER, PreemptWhileFlooded

use_io_thread_policy(sys.argv[1])
socket = zmq.Context.instance().socket(zmq.DEALER)

def policies():
    found = set()
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/comm") as comm:
            if comm.read().startswith("ZMQbg/IO"):
                found.add(os.sched_getscheduler(int(task)))
    return sorted(found)

async def main():
    while not policies():  # a new thread names itself once it runs
        await trio.sleep(0.01)
    seen = [policies()]
    preemption = PreemptWhileFlooded()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(preemption.run)
        preemption.flooded()
        seen.append(policies())
        await trio.sleep(PREEMPT_LINGER / 2)
        preemption.flooded()  # the linger starts again
        await trio.sleep(PREEMPT_LINGER * 0.8)
        seen.append(policies())
        await trio.sleep(PREEMPT_LINGER * 0.7)
        seen.append(policies())
        nursery.cancel_scope.cancel()
    print(seen)

trio.run(main)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_BATCH is Linux's")
@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("batch", [os.SCHED_BATCH, os.SCHED_OTHER, os.SCHED_OTHER, os.SCHED_BATCH]),
        ("normal", [os.SCHED_OTHER] * 4),
    ],
)
def test_io_threads_preempt_during_a_flood_and_for_a_linger_after_it(
    policy: str, expected: list[int]
) -> None:
    """Under ``batch``, a flood lets the I/O threads preempt at once; they go back to ``batch``
    once no flood was seen for the linger, counted from the last one. Under ``normal`` nothing
    moves."""
    probe = subprocess.run(
        [sys.executable, "-c", _FLOOD_PROBE, policy], capture_output=True, text=True, check=True
    )
    assert probe.stdout.strip() == str([[p] for p in expected])
