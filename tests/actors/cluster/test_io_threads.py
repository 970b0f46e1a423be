"""``serve --workers N --io-threads``: how the supervisor's and workers' ZeroMQ I/O threads are
scheduled (wire/_io_threads.py). Read back from the kernel, per thread."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.actors.cluster._cluster import running_cluster

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="SCHED_BATCH and /proc are Linux's"
)


def _io_thread_policies(pid: int) -> list[int]:
    """The scheduling policy of each ZeroMQ I/O thread of ``pid``."""
    policies = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/comm") as comm:
            if comm.read().startswith("ZMQbg/IO"):
                policies.append(os.sched_getscheduler(int(task)))
    return policies


@pytest.mark.parametrize(
    ("flag", "policy"),
    [([], os.SCHED_BATCH), (["--io-threads", "normal"], os.SCHED_OTHER)],
    ids=["default-batch", "normal"],
)
async def test_io_threads_of_supervisor_and_workers_follow_the_flag(
    tmp_path: Path, flag: list[str], policy: int
) -> None:
    async with running_cluster(tmp_path, workers=2, extra=flag) as cluster:
        pids = [cluster.process.pid, *cluster.worker_pids().values()]
        assert len(pids) == 3
        for pid in pids:
            policies = _io_thread_policies(pid)
            assert policies, f"process {pid} has no ZeroMQ I/O thread"
            assert set(policies) == {policy}, (pid, policies)
            # Only the I/O threads: the event loop keeps the default policy.
            assert os.sched_getscheduler(pid) == os.SCHED_OTHER
