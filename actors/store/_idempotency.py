"""Idempotency keys: the request a key names, and the bounded index of one session's keys.

A mutating call may carry an idempotency key. Its first outcome is recorded with its effect,
atomically (`actors.session_log._idempotency`: a key record in the same batch, or the header of
a created session; the projection cache's ``model_route_keys`` for model routes); a retry with
the same key finds it and gets that outcome back, and nothing is applied again.

What a key is compared by: `request_digest`, a BLAKE2b digest of the call's endpoint and its
arguments after validation (wire names, canonical JSON: sorted keys, no whitespace), so a retry
that sends the same arguments matches whatever order or defaults it spells them in, and a call
with other arguments under the same key is refused (`key_reused`), never answered with the
first call's outcome.

How long keys are kept (`IdempotencyPolicy`): per session, the keys of the last
`DEFAULT_CAPACITY` keyed calls that are younger than `DEFAULT_WINDOW_MS` (24 h, by the time
recorded with them). An index is rebuilt from the log when a session is opened for writing, so
its memory is bounded by the capacity whatever the log's length.
"""

from __future__ import annotations

import collections
import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from actors.session_log import KeyRecord, key_record, key_records
from actors.store._events import EventInput
from wire import ArgumentsInvalidError

__all__ = [
    "DEFAULT_CAPACITY",
    "DEFAULT_WINDOW_MS",
    "KEY_REUSED",
    "MAX_KEY_LENGTH",
    "IdempotencyPolicy",
    "KeyIndex",
    "KeyedRequest",
    "event_args",
    "key_event",
    "key_reused",
    "keyed_request",
    "keyed_session_id",
    "request_digest",
    "session_id_for_key",
]

MAX_KEY_LENGTH = 128
"""Longest idempotency key, in characters."""
DEFAULT_WINDOW_MS = 24 * 60 * 60 * 1000
"""How long a key is remembered (ms): 24 h."""
DEFAULT_CAPACITY = 10_000
"""How many keys a session remembers at most (the most recent ones)."""
KEY_REUSED = "idempotency-key-reused"
"""``details.reason`` of the ``arguments-invalid`` error for a key reused with other
arguments."""

#: Namespace of the session ids derived from keys (`session_id_for_key`); fixed forever, since
#: a retry after an upgrade must derive the same id.
_KEY_NAMESPACE = uuid.UUID("6f1c2a4e-9d3b-5c7a-8e21-4b0f9a3d7c55")


@attrs.frozen(kw_only=True)
class IdempotencyPolicy:
    """How many keys a session remembers, and for how long."""

    #: Keys older than this (ms, by the time recorded with them) are forgotten.
    window_ms: int = DEFAULT_WINDOW_MS
    #: At most this many keys per session (the most recent); older ones are forgotten.
    capacity: int = DEFAULT_CAPACITY


@attrs.frozen(kw_only=True)
class KeyedRequest:
    """A keyed call: its key and the digest of its arguments (`request_digest`)."""

    key: str
    request: str


def request_digest(endpoint: str, args: Mapping[str, Any]) -> str:
    """The digest a key is compared by: 32 hex digits of BLAKE2b over the canonical JSON of
    ``{"endpoint": endpoint, "args": args}`` (sorted keys, no whitespace, UTF-8).

    ``args`` are the call's validated arguments by wire name, as JSON values (attrs records
    given as their wire maps); an argument left at its default is passed at its default.

    Raises:
        TypeError, ValueError: an argument is not a JSON value.
    """
    text = json.dumps(
        {"endpoint": endpoint, "args": args},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def keyed_request(endpoint: str, key: str | None, args: Mapping[str, Any]) -> KeyedRequest | None:
    """The keyed request of a call, None when it carries no key.

    Raises:
        ArgumentsInvalidError: the key is not a string of 1 to `MAX_KEY_LENGTH` characters, or
            an argument has no JSON spelling.
    """
    if key is None:
        return None
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise ArgumentsInvalidError(
            f"idempotencyKey must be a string of 1 to {MAX_KEY_LENGTH} characters",
            details={"argument": "idempotencyKey"},
        )
    try:
        request = request_digest(endpoint, args)
    except (TypeError, ValueError) as error:
        raise ArgumentsInvalidError(f"arguments have no JSON spelling: {error}") from None
    return KeyedRequest(key=key, request=request)


def session_id_for_key(key: str) -> str:
    """The id of the session ``sessions/create`` makes for ``key`` when no ``sessionId`` is
    given: a name-based UUID (version 5), so every retry, on any worker, names one session."""
    return str(uuid.uuid5(_KEY_NAMESPACE, key))


def event_args(items: Sequence[EventInput]) -> list[dict[str, Any]]:
    """The wire maps of appended events, as `request_digest` takes them."""
    return [
        {
            "type": item.type,
            "data": item.data,
            "surfaceOp": item.surface_op,
            "sourceEventSeqs": item.source_event_seqs,
            "ignorable": item.ignorable,
        }
        for item in items
    ]


def key_event(keyed: KeyedRequest, count: int) -> EventInput:
    """The key record that opens a keyed batch of ``count`` events."""
    record = key_record(keyed.key, keyed.request, count)
    return EventInput(type=record["type"], data=record["data"], ignorable=True)


def keyed_session_id(args: Mapping[str, Any]) -> str | None:
    """The session a create's wire ``args`` name through their key alone: `session_id_for_key`
    of a valid ``idempotencyKey`` when no ``sessionId`` is given, else None (routing sends a
    keyed create, and every retry of it, to that session's shard)."""
    key = args.get("idempotencyKey")
    if args.get("sessionId") is not None or not isinstance(key, str):
        return None
    return session_id_for_key(key) if 1 <= len(key) <= MAX_KEY_LENGTH else None


def key_reused(key: str, **details: Any) -> ArgumentsInvalidError:
    """The error for a key sent again with other arguments."""
    return ArgumentsInvalidError(
        f"idempotency key {key!r} was already used for a call with other arguments; "
        "use a new key for a new request",
        details={"reason": KEY_REUSED, "idempotencyKey": key, **details},
    )


@attrs.frozen(kw_only=True)
class _Remembered:
    request: str
    #: The key record's own seq; the call's events are the ``count`` that follow it.
    seq: int
    count: int
    time: int


class KeyIndex:
    """The idempotency keys of one session's log, oldest first, bounded by a policy."""

    def __init__(self, policy: IdempotencyPolicy) -> None:
        self._policy = policy
        self._keys: collections.OrderedDict[str, _Remembered] = collections.OrderedDict()

    @classmethod
    def of_log(
        cls, events: Sequence[Mapping[str, Any]], policy: IdempotencyPolicy, now_ms: int
    ) -> KeyIndex:
        """The index of the key records among a loaded log's ``events`` that are still within
        the policy at ``now_ms``."""
        index = cls(policy)
        for record in key_records(events):
            index.add(record)
        index._evict(now_ms)
        return index

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, record: KeyRecord) -> None:
        """Remember the key record of a batch (the latest record of a key wins)."""
        keys = self._keys
        keys.pop(record.key, None)
        keys[record.key] = _Remembered(
            request=record.request, seq=record.seq, count=record.count, time=record.time
        )
        if len(keys) > self._policy.capacity:
            keys.popitem(last=False)

    def forget_from(self, seq: int) -> None:
        """Forget the keys recorded at ``seq`` or later (batches that were not written after
        all: the retry must write them)."""
        keys = self._keys
        # The newest keys are last: stop at the first one that stays.
        while keys and next(reversed(keys.values())).seq >= seq:
            keys.popitem(last=True)

    def find(self, keyed: KeyedRequest, now_ms: int) -> tuple[int, ...] | None:
        """The seqs of the first call with ``keyed.key``, None when it is not remembered.

        Raises:
            ArgumentsInvalidError: the key was used for a call with other arguments.
        """
        self._evict(now_ms)
        found = self._keys.get(keyed.key)
        if found is None:
            return None
        if found.request != keyed.request:
            raise key_reused(keyed.key)
        return tuple(range(found.seq + 1, found.seq + 1 + found.count))

    def _evict(self, now_ms: int) -> None:
        oldest = now_ms - self._policy.window_ms
        keys = self._keys
        while keys and next(iter(keys.values())).time < oldest:
            keys.popitem(last=False)
