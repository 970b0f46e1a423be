"""The socket pump's tuning (``wire/_pump.py``): each figure with the measurement behind it."""

from __future__ import annotations

__all__ = [
    "BACKLOG_RETRY",
    "HELD_BUDGET",
    "INTAKE_LIMIT",
    "MAX_IDLE_YIELDS",
    "MIN_BUDGET",
    "PASS_BUDGET",
    "PROBED_RECEIVES",
    "RECEIVE_BATCH",
]

#: Frames received per drain before the pump sends what they produced and yields to let
#: handlers run. Small enough that a peer keeping many calls in flight gets replies while the
#: rest are still being read, so both processes work at once: with a whole window per drain
#: (512 before), client and server took turns, and 128 echo calls in flight ran at half the
#: rate (measured on a 2-CPU VM: about 16,000 against 31,000 calls/s with 32 or 64).
RECEIVE_BATCH = 32
#: How long one drain's work may take, what it does inline plus the tasks it starts, when
#: more is waiting (seconds): a call that arrives meanwhile waits that long to be read. Over
#: it, a server's pump halves how many frames a drain may take and tasks it may start (its
#: budget, ``MIN_BUDGET`` to ``RECEIVE_BATCH``); under half of it, doubles it again. Cheap
#: calls keep the full batch (32 echo calls take under 1 ms); 32 ``system/describe`` handlers
#: a greedy peer sent at once took 3 to 5 ms, and another peer's call waited behind each batch.
PASS_BUDGET = 0.002
MIN_BUDGET = 4
#: Most frames a server's pass reads once it read one from a peer whose frames are held (and no
#: second drain): such a flooder's calls are refused one by one, and another client's relayed
#: call waits a few passes (100,000 calls via ``--workers 2``: its p50 2.3 ms at 2 x 32, 0.8 at 4).
HELD_BUDGET = 4
#: How often a pump with a backlog retries sends that would have blocked (seconds).
BACKLOG_RETRY = 0.002
#: Messages per drain that are preceded by an ``EVENTS`` check. ``EVENTS`` costs a few µs and
#: a receive that finds nothing (``zmq.Again``) about twice that, so a drain asks ``EVENTS``
#: for the first messages (a lone call stays cheap) and then receives until ``zmq.Again``.
PROBED_RECEIVES = 2
#: Most messages one drain reads while the owner stages them (``CallStage``): a decode each, not
#: a handler, so a newer call can shed the older one it supersedes; a few ms of reading at most.
INTAKE_LIMIT = 512
#: Passes in a row the pump yields for :attr:`SocketPump.expecting` before it sleeps anyway: a
#: miscounted ``expecting`` costs a few passes, never a busy loop.
MAX_IDLE_YIELDS = 3
