"""A load-generator process: ``python -m bench._load_worker JOB_JSON``.

Runs one :class:`~bench._load_jobs.Job` against one server (agent-actors or a peer), then prints
its samples as one JSON line after :data:`~bench._load_jobs.RESULT_PREFIX`. The handshake with
the parent is described in :mod:`bench._load_jobs`. Any failure exits non-zero with the reason on
stderr; the parent reports it for that phase.
"""

from __future__ import annotations

import json
import sys

from bench._load_jobs import RESULT_PREFIX, Job, Samples, wait_for_go

__all__ = ["main", "run_job"]


def run_job(job: Job) -> Samples:
    """Run ``job`` with the driver of its stack."""
    if job.stack in ("ours", "oursAsync"):
        from bench._load_ours import drive

        return drive(job, wait_for_go)
    if job.workload != "closed" or job.calls != ("diagnostics/echo",):
        raise ValueError(f"peer {job.stack!r} only runs the echo workload")
    from bench.peers import load_peer

    samples: Samples = load_peer(job.stack).drive(job, wait_for_go)
    return samples


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m bench._load_worker JOB_JSON", file=sys.stderr)
        return 2
    job = Job.from_json(argv[0])
    samples = run_job(job)
    print(RESULT_PREFIX + json.dumps(samples.to_json()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
