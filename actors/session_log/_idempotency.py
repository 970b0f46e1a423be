"""Idempotency keys in a session log: the key record of a keyed batch, and the creator's key.

A caller that gets no answer (its worker died mid-call) retries with the key it sent; the
service must then find out whether the first attempt was written, and the only place that can
say so after a crash is the log itself, written in the same atomic step as the effect.

Representation, and why (as for the fencing epochs, `actors.session_log._epochs`): an envelope
admits exactly seven keys (`session-log-format` §5.1), so a key cannot ride on the events it
covers; an event of an unknown type marked ``"ignorable": true`` is what upstream keeps and
skips (§6.2). Hence one such record per keyed batch:

- ``idempotency/key`` (`IDEMPOTENCY_KEY_TYPE`), ``data = {"key": K, "request": D, "count": N}``:
  the ``N`` events that follow it (seqs ``seq + 1 … seq + N``) were appended by the call that
  carried key ``K``; ``D`` is the digest of that call's arguments. It is the first record of its
  batch after the epoch record (if any), so it is in the same zstd frame (or the same ``write``
  of raw lines) as its events: both are on disk, or neither.

A session created with a key carries it in its header (`CreationKey`, header key
``"idempotency"``): §4.1 "unknown header keys are dropped silently on read", so upstream reads
the header as before, and the header is published atomically with the session.

A torn zstd frame (§9) keeps the complete lines decodable from it; a keyed batch cut inside such
a frame would leave a key whose events are partly missing. `partial_keyed_batch` finds such a
tail so the reader can drop it whole: the key then says "not written", and a retry writes the
batch once, whole. (A raw ``.jsonl`` log keeps the complete lines of a torn write, §6.1, keyed
or not; a write of a few lines is not torn by a crash of the process, only by the machine's.)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

from actors.session_log._sequence import EventSequence

__all__ = [
    "IDEMPOTENCY_KEY_TYPE",
    "CreationKey",
    "KeyRecord",
    "key_record",
    "key_records",
    "partial_keyed_batch",
]

IDEMPOTENCY_KEY_TYPE = "idempotency/key"
"""The record that opens a keyed batch (ignorable, so upstream keeps it as is)."""


@attrs.frozen(kw_only=True)
class KeyRecord:
    """A well-formed ``idempotency/key`` record as read from a log."""

    key: str
    #: Digest of the keyed call's arguments.
    request: str
    #: Its own seq; the batch's events are ``seq + 1 … seq + count``.
    seq: int
    #: How many events of the call follow it.
    count: int
    #: Its ``time`` (epoch ms).
    time: int

    @classmethod
    def of(cls, event: Mapping[str, Any]) -> KeyRecord | None:
        """The key of a record of `IDEMPOTENCY_KEY_TYPE`; None for anything else or a malformed
        one (which then reads as an ordinary ignorable event, as upstream reads it)."""
        if event.get("type") != IDEMPOTENCY_KEY_TYPE or event.get("ignorable") is not True:
            return None
        data = event.get("data")
        if type(data) is not dict:
            return None
        key, request, count = data.get("key"), data.get("request"), data.get("count")
        seq, time = event.get("seq"), event.get("time")
        if not (type(key) is str and type(request) is str and type(count) is int and count >= 0):
            return None
        if type(seq) is not int or type(time) is not int:
            return None
        return cls(key=key, request=request, seq=seq, count=count, time=time)

    @property
    def seqs(self) -> tuple[int, ...]:
        """The seqs of the keyed call's events."""
        return tuple(range(self.seq + 1, self.seq + 1 + self.count))


def key_record(key: str, request: str, count: int) -> dict[str, Any]:
    """The ``type``, ``data`` and ``ignorable`` of a key record (the writer adds seq and time)."""
    return {
        "type": IDEMPOTENCY_KEY_TYPE,
        "data": {"key": key, "request": request, "count": count},
        "ignorable": True,
    }


def key_records(events: Sequence[Mapping[str, Any]]) -> Iterator[KeyRecord]:
    """The well-formed key records among a loaded log's events, in log order."""
    items: Sequence[object] = events.items if isinstance(events, EventSequence) else events
    for item in items:
        # Packed chunk rows (the bulk of a log) are never key records: they stay unparsed.
        if type(item) is dict and item.get("type") == IDEMPOTENCY_KEY_TYPE:
            record = KeyRecord.of(item)
            if record is not None:
                yield record


def partial_keyed_batch(items: Sequence[object], start: int, total: int) -> int | None:
    """Where to cut ``items`` so that no keyed batch among ``items[start:]`` is kept in part.

    Args:
        items: the scanned items (event dicts and packed rows), in seq order.
        start: the first item that may belong to a partial batch (the first one recovered from
            a torn frame).
        total: the number of events the items hold.

    Returns:
        The index of the key record whose batch ends past ``total``, or None.
    """
    for index in range(len(items) - 1, start - 1, -1):
        item = items[index]
        if type(item) is dict and item.get("type") == IDEMPOTENCY_KEY_TYPE:
            record = KeyRecord.of(item)
            if record is not None and record.seq + 1 + record.count > total:
                return index
            return None  # the last key's batch is whole; earlier ones end before it
    return None


@attrs.frozen(kw_only=True)
class CreationKey:
    """The key a session was created with (header ``"idempotency": {key, request}``)."""

    key: str
    #: Digest of the creating call's arguments.
    request: str

    @classmethod
    def from_record(cls, value: object) -> CreationKey | None:
        """The key of a header's ``idempotency`` value; None when absent or malformed (the
        header then reads as one without it, as upstream reads every unknown key)."""
        if type(value) is not dict:
            return None
        key, request = value.get("key"), value.get("request")
        if type(key) is not str or type(request) is not str:
            return None
        return cls(key=key, request=request)

    def to_record(self) -> dict[str, str]:
        """The header's ``idempotency`` value."""
        return {"key": self.key, "request": self.request}
