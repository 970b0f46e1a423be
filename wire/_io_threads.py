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

That wait is not free when a peer floods the server and does not read its replies: the
flooder's process and the server's event loop then fill the cores, and every other client's
frames wait their I/O thread's turn behind them. So while a peer whose replies are held back
keeps sending (:class:`PreemptWhileFlooded`), the process's I/O threads preempt again.
"""

from __future__ import annotations

import os
from typing import Any, Literal

import trio
import zmq

__all__ = [
    "IO_THREAD_POLICIES",
    "IoThreadPolicy",
    "PreemptWhileFlooded",
    "new_context",
    "use_io_thread_policy",
]

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


#: Seconds without a flood (:meth:`PreemptWhileFlooded.flooded`) before the I/O threads go back
#: to ``batch``: a flooder sends in bursts, and must not cost a policy change each time.
PREEMPT_LINGER = 1.0


class PreemptWhileFlooded:
    """Lets this process's ZeroMQ I/O threads preempt while a peer floods the server.

    The owner calls :meth:`flooded` when it reads a message from a peer whose replies it holds
    back (the peer keeps sending and does not read), and runs :meth:`run` beside it. Under the
    ``normal`` policy there is nothing to change, and neither does anything.
    """

    def __init__(self) -> None:
        self._preempting = trio.Event()
        #: Ends :data:`PREEMPT_LINGER` after the last flood: every flood moves its deadline.
        self._quiet = trio.CancelScope()

    def flooded(self) -> None:
        """A peer that does not read sent another message just now."""
        if _policy != "batch" or not hasattr(os, "SCHED_BATCH"):
            return
        self._quiet.deadline = trio.current_time() + PREEMPT_LINGER
        if not self._preempting.is_set():
            self._preempting.set()
            _set_io_threads(os.SCHED_OTHER)

    async def run(self) -> None:
        """Back to ``batch`` once no flood was seen for :data:`PREEMPT_LINGER` s; until
        cancelled."""
        try:
            while True:
                await self._preempting.wait()
                with self._quiet:
                    await trio.sleep_forever()
                self._quiet = trio.CancelScope()
                self._preempting = trio.Event()
                _set_io_threads(os.SCHED_BATCH)
        finally:
            if self._preempting.is_set():
                _set_io_threads(os.SCHED_BATCH)


def _set_io_threads(policy: int) -> None:
    """Schedule this process's running ZeroMQ I/O threads (libzmq names them ``ZMQbg/IO/N``)
    under ``policy``."""
    try:
        threads = os.listdir("/proc/self/task")
    except OSError:
        return
    for tid in threads:
        try:
            with open(f"/proc/self/task/{tid}/comm") as comm:
                if comm.read().startswith("ZMQbg/IO"):
                    os.sched_setscheduler(int(tid), policy, os.sched_param(0))
        except OSError:
            pass  # the thread ended meanwhile
