"""The worker's lease clock: when it may acknowledge writes, and when it must fence itself.

Sans-IO: no clock is read here; every decision takes ``now`` (seconds on a monotonic clock, the
same one the caller used for ``sent_at``). The worker's keeper records each lease grant and
keep-alive in a `LeaseClock`; the storage hook asks `LeaseClock.may_ack` after an append is
durable and before its ack.

Why the deadline is safe. etcd starts a lease's TTL again when the leader *handles* a
keep-alive, which is after the worker *sent* it. So ``sent_at + ttl`` is never later than the
moment etcd may expire the lease (etcd expires late, never early: its lessor checks expiries
periodically, and a new leader extends every lease). Past that deadline another worker may own
our shards, so an ack must be refused: "a node whose lease may have expired must stop acting as
the leader before anyone else can be elected" (Patroni's rule, applied per shard).

Why a margin. The check runs before the ack leaves: between the check and the ack frame
reaching the socket the process may be descheduled, and a paused process (SIGSTOP, a long GC, a
VM steal) resumes with a stale decision only if the pause fell in that gap. The margin bounds
the gap we tolerate; clock-rate error between hosts (ppm) is negligible next to it. The default
is ``max(0.5 s, ttl / 6)``: half a second covers scheduling delays on a loaded 2-core machine
with a wide factor, and ``ttl / 6`` keeps the margin proportional for long TTLs while leaving a
healthy worker (keep-alive every ``ttl / 3``) a large gap: its remaining lease never falls below
``2 ttl / 3`` minus a round trip, four times the margin, so two lost keep-alives in a row still
do not stop acks.
"""

from __future__ import annotations

import attrs

__all__ = [
    "KEEP_ALIVE_FRACTION",
    "LeaseClock",
    "default_margin",
]

#: A keep-alive is sent every ``ttl * KEEP_ALIVE_FRACTION`` seconds (etcd's clients use 1/3).
KEEP_ALIVE_FRACTION = 1 / 3

#: Smallest default margin (seconds): see the module docstring.
MIN_MARGIN = 0.5


def default_margin(ttl: float) -> float:
    """The fencing margin for a lease of ``ttl`` seconds: ``max(0.5, ttl / 6)``."""
    return max(MIN_MARGIN, ttl / 6)


def _positive(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not value > 0:
        raise ValueError(f"{attribute.name} must be positive, got {value!r}")


def _non_negative(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not value >= 0:
        raise ValueError(f"{attribute.name} must not be negative, got {value!r}")


@attrs.frozen(kw_only=True)
class LeaseClock:
    """One lease as the worker must assume it: the latest moment it may still be alive.

    Build it with `LeaseClock.granted` when a lease is granted; each successful keep-alive
    gives a new clock through `renewed`.
    """

    #: Seconds etcd granted (a keep-alive extends the lease by this much).
    ttl: float = attrs.field(validator=_positive)
    #: Acks stop this many seconds before the deadline.
    margin: float = attrs.field(validator=_non_negative)
    #: ``sent_at + ttl`` of the latest answered grant or keep-alive: etcd cannot have expired
    #: the lease before then.
    deadline: float
    #: When the latest answered request was sent.
    renewed_at: float
    #: Whether the latest keep-alive attempt failed (etcd unreachable): no new claims then.
    failing: bool = False

    def __attrs_post_init__(self) -> None:
        if self.margin >= self.ttl:
            raise ValueError(f"margin {self.margin} must be below the TTL {self.ttl}")

    @classmethod
    def granted(cls, *, sent_at: float, ttl: float, margin: float | None = None) -> LeaseClock:
        """The clock of a lease whose grant request was sent at ``sent_at``.

        Args:
            sent_at: When the grant request was sent (not when it was answered).
            ttl: The TTL etcd granted.
            margin: Seconds before the deadline when acks stop (default `default_margin`).
        """
        margin = default_margin(ttl) if margin is None else margin
        return cls(ttl=ttl, margin=margin, deadline=sent_at + ttl, renewed_at=sent_at)

    def renewed(self, *, sent_at: float) -> LeaseClock:
        """The clock after a keep-alive sent at ``sent_at`` was answered (lease alive).

        An answer to an older request than the latest one never moves the deadline back.
        """
        if sent_at <= self.renewed_at:
            return attrs.evolve(self, failing=False)
        return attrs.evolve(self, deadline=sent_at + self.ttl, renewed_at=sent_at, failing=False)

    def failed(self) -> LeaseClock:
        """The clock after a keep-alive went unanswered (the deadline stays where it was)."""
        return attrs.evolve(self, failing=True)

    @property
    def fence_at(self) -> float:
        """The moment acks stop: the deadline minus the margin."""
        return self.deadline - self.margin

    def may_ack(self, now: float) -> bool:
        """Whether an append may be acknowledged at ``now`` (strictly before `fence_at`)."""
        return now < self.fence_at

    def fenced(self, now: float) -> bool:
        """Whether the worker must fence itself at ``now`` (stop acks, give up its shards)."""
        return not self.may_ack(now)

    def may_claim(self, now: float) -> bool:
        """Whether a new shard may be claimed at ``now``: the lease is safe and etcd answered
        the latest keep-alive (no new claims while etcd is unreachable)."""
        return self.may_ack(now) and not self.failing

    def next_keep_alive(self, now: float) -> float:
        """When the next keep-alive should be sent: ``ttl / 3`` after the last answered one,
        or a quarter of that from ``now`` while they fail (a retry), and never after
        `fence_at`."""
        interval = self.ttl * KEEP_ALIVE_FRACTION
        due = now + interval / 4 if self.failing else self.renewed_at + interval
        return max(now, min(due, self.fence_at))

    def time_left(self, now: float) -> float:
        """Seconds until `fence_at` (negative once past it)."""
        return self.fence_at - now
