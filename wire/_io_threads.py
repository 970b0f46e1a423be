"""How this process's ZeroMQ I/O threads are scheduled (Linux).

libzmq moves every message through an I/O thread of its context, and that thread sleeps between
messages: it is woken for nearly every call a busy server answers. Under the default policy a
woken thread preempts whatever runs on its core, so where more busy processes than cores share
a host (the workers of ``serve --workers N`` and the clients beside them), a worker's event loop
is cut short every few calls, for a few µs of work, and pays in cache and switches for it.
``SCHED_BATCH`` (sched(7)) changes only that: a batch thread takes a free core at once and gets
its fair share of a busy one, but waits for the running thread's time slice instead of cutting
it short. On an idle host nothing changes; on a saturated one throughput rises, and a frame can
wait up to a time slice (a few ms) for its I/O thread, when it would queue anyway.
"""

from __future__ import annotations

import os
from typing import Any, Literal

import zmq

__all__ = ["IO_THREAD_POLICIES", "IoThreadPolicy", "new_context", "use_io_thread_policy"]

IoThreadPolicy = Literal["normal", "batch"]
IO_THREAD_POLICIES: tuple[IoThreadPolicy, ...] = ("normal", "batch")

_policy: IoThreadPolicy = "normal"


def use_io_thread_policy(policy: IoThreadPolicy) -> None:
    """Schedule the I/O threads of ``zmq.Context.instance()`` and of the contexts the wire
    creates from now on under ``policy``.

    Call it before the process opens its first socket: libzmq applies the policy when a context
    starts its threads, at its first socket. ``batch`` is ``normal`` where the OS has no
    ``SCHED_BATCH``.
    """
    global _policy
    if policy not in IO_THREAD_POLICIES:
        raise ValueError(f"I/O thread policy must be one of {IO_THREAD_POLICIES}, not {policy!r}")
    _policy = policy
    _apply(zmq.Context.instance())


def new_context() -> zmq.Context[Any]:
    """A new context whose I/O threads follow the process's policy."""
    return _apply(zmq.Context())


def _apply(context: zmq.Context[Any]) -> zmq.Context[Any]:
    batch = getattr(os, "SCHED_BATCH", None)
    if _policy == "batch" and batch is not None:
        context.set(zmq.THREAD_SCHED_POLICY, batch)
    return context
