"""A thin trio client for etcd's v3 JSON gateway (``/v3/kv/*``, ``/v3/lease/*``, ``/v3/watch``).

etcd serves its gRPC API as JSON over HTTP (grpc-gateway, "etcd3 API → gRPC gateway" in the
etcd docs): keys and values are base64, int64 fields are decimal strings, fields at their zero
value are left out, and streaming RPCs (``/v3/watch``, ``/v3/lease/keepalive``) answer with one
JSON object per line, each wrapped as ``{"result": …}`` or ``{"error": …}``. This module only
moves those documents; what the keys mean is `EtcdCoordinator`'s business.

httpx (with httpcore's native trio backend) carries the unary requests; the watch stream is
read by `stream_json_lines` (h11 over a trio TCP stream, see ``_etcd_watch.py`` for why).
Transport failures are mapped to `EtcdUnavailableError` at this edge and every member URL is
tried in turn, so a caller never sees an httpx exception.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

import attrs
import httpx

from actors.cluster._coordinator import CoordinatorError
from actors.cluster._etcd_watch import StreamClosedError, stream_json_lines

__all__ = [
    "EtcdClient",
    "EtcdError",
    "EtcdUnavailableError",
    "KeyValue",
    "WatchBatch",
    "b64",
    "compare_create",
    "compare_lease",
    "open_etcd_client",
    "prefix_end",
    "request_delete",
    "request_put",
    "request_range",
]

#: gRPC status code etcd answers for a lease that does not exist (``requested lease not found``).
NOT_FOUND = 5

#: gRPC codes that mean "no answer now" (DEADLINE_EXCEEDED, UNAVAILABLE: no leader, no quorum).
_UNAVAILABLE_CODES = frozenset({4, 14})

#: Connect/read/write budget of one unary request (seconds); watches have no read timeout.
REQUEST_TIMEOUT = 5.0


class EtcdError(CoordinatorError):
    """etcd refused a request (the message is etcd's own, with its gRPC status code)."""

    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.code = code


class EtcdUnavailableError(CoordinatorError):
    """No etcd member answered (connection refused, timeout, connection lost)."""


@attrs.frozen(kw_only=True)
class KeyValue:
    """One key as etcd reports it (``mvccpb.KeyValue``)."""

    key: bytes
    value: bytes = b""
    #: Revision of the write that created the key (the fencing epoch of a shard claim).
    create_revision: int = 0
    mod_revision: int = 0
    #: Lease the key is attached to (0: none).
    lease: int = 0

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> KeyValue:
        return cls(
            key=_unb64(document.get("key", "")),
            value=_unb64(document.get("value", "")),
            create_revision=int(document.get("create_revision", 0)),
            mod_revision=int(document.get("mod_revision", 0)),
            lease=int(document.get("lease", 0)),
        )


@attrs.frozen(kw_only=True)
class WatchBatch:
    """One watch response: the events of the revisions up to ``revision``."""

    revision: int
    #: ``(deleted, kv)`` in order; a deleted kv carries only its key and mod_revision.
    events: tuple[tuple[bool, KeyValue], ...] = ()


def b64(data: bytes | str) -> str:
    """Base64 of ``data`` (str is UTF-8 encoded first), as the gateway wants keys and values."""
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


def prefix_end(prefix: bytes) -> bytes:
    """The ``range_end`` covering every key that starts with ``prefix`` (etcd's prefix end)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\x00"  # every key


def compare_create(key: bytes, revision: int) -> dict[str, Any]:
    """Compare: ``key``'s create_revision equals ``revision`` (0: the key is absent)."""
    return {"key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": revision}


def compare_lease(key: bytes, lease: int) -> dict[str, Any]:
    """Compare: ``key`` is attached to ``lease`` (false when the key is absent)."""
    return {"key": b64(key), "target": "LEASE", "result": "EQUAL", "lease": lease}


def request_put(key: bytes, value: bytes, *, lease: int = 0) -> dict[str, Any]:
    """Txn op: put ``key`` = ``value``, attached to ``lease`` when nonzero."""
    put: dict[str, Any] = {"key": b64(key), "value": b64(value)}
    if lease:
        put["lease"] = lease
    return {"request_put": put}


def request_range(key: bytes, range_end: bytes | None = None) -> dict[str, Any]:
    """Txn op: read ``key`` (or ``[key, range_end)``)."""
    body = {"key": b64(key)}
    if range_end is not None:
        body["range_end"] = b64(range_end)
    return {"request_range": body}


def request_delete(key: bytes) -> dict[str, Any]:
    """Txn op: delete ``key``."""
    return {"request_delete_range": {"key": b64(key)}}


def _raise_for(document: dict[str, Any], status: int) -> None:
    error = document.get("error")
    if isinstance(error, dict):  # a stream's {"error": {...}} envelope
        document, error = error, error.get("message")
    if error is not None or status >= 400:
        message = str(document.get("message") or error or f"HTTP {status}")
        code = int(document.get("code", 0))
        if code in _UNAVAILABLE_CODES:
            raise EtcdUnavailableError(f"etcd: {message}")
        raise EtcdError(f"etcd: {message}", code=code)


class EtcdClient:
    """The handful of etcd v3 calls the coordinator needs, over the JSON gateway.

    Args:
        http: An open httpx client (owned by the caller).
        urls: Base URLs of the etcd members (``http://127.0.0.1:2379``); tried in order, and
            the one that answered last is tried first next time.
    """

    def __init__(self, http: httpx.AsyncClient, urls: Sequence[str]) -> None:
        if not urls:
            raise ValueError("at least one etcd URL is needed")
        self._http = http
        self._urls = [url.rstrip("/") for url in urls]

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        failures = []
        for url in list(self._urls):
            try:
                response = await self._http.post(url + path, json=body)
            except httpx.TransportError as exc:
                failures.append(f"{url}: {type(exc).__name__} {exc}".rstrip())
                continue
            if url != self._urls[0]:
                self._urls.remove(url)
                self._urls.insert(0, url)
            try:
                document = response.json()
            except ValueError:
                raise EtcdError(
                    f"etcd {url}{path}: HTTP {response.status_code}, not JSON", code=0
                ) from None
            _raise_for(document, response.status_code)
            return document  # type: ignore[no-any-return]
        raise EtcdUnavailableError(f"no etcd member answered {path}: {'; '.join(failures)}")

    async def range(self, key: bytes, range_end: bytes | None = None) -> tuple[int, list[KeyValue]]:
        """The keys in ``[key, range_end)`` (or just ``key``) and the store revision then."""
        document = await self._post("/v3/kv/range", request_range(key, range_end)["request_range"])
        kvs = [KeyValue.from_json(kv) for kv in document.get("kvs", [])]
        return int(document["header"]["revision"]), kvs

    async def txn(
        self,
        compare: list[dict[str, Any]],
        success: list[dict[str, Any]],
        failure: list[dict[str, Any]] | None = None,
    ) -> tuple[bool, int, list[dict[str, Any]]]:
        """Run a transaction; ``(succeeded, revision after it, responses of the branch run)``."""
        body = {"compare": compare, "success": success, "failure": failure or []}
        document = await self._post("/v3/kv/txn", body)
        responses = document.get("responses", [])
        return (
            bool(document.get("succeeded", False)),
            int(document["header"]["revision"]),
            responses,
        )

    async def lease_grant(self, ttl: int) -> tuple[int, int]:
        """Grant a lease of ``ttl`` seconds; ``(lease id, TTL granted)``."""
        document = await self._post("/v3/lease/grant", {"TTL": ttl})
        return int(document["ID"]), int(document["TTL"])

    async def lease_keep_alive(self, lease: int) -> int:
        """Refresh ``lease`` once; its remaining TTL, 0 when it no longer exists."""
        document = await self._post("/v3/lease/keepalive", {"ID": lease})
        return int(document.get("result", {}).get("TTL", 0))

    async def lease_revoke(self, lease: int) -> bool:
        """Revoke ``lease`` (its keys go in one revision); False when it was already gone."""
        try:
            await self._post("/v3/lease/revoke", {"ID": lease})
        except EtcdError as exc:
            if exc.code == NOT_FOUND:
                return False
            raise
        return True

    async def watch(
        self, key: bytes, range_end: bytes, *, start_revision: int
    ) -> AsyncGenerator[WatchBatch, None]:
        """Events on ``[key, range_end)`` from ``start_revision`` on, until cancelled.

        Raises:
            EtcdUnavailableError: the stream could not be opened or broke.
            EtcdError: etcd cancelled the watch (for example, the revision was compacted).
        """
        body = {
            "create_request": {
                "key": b64(key),
                "range_end": b64(range_end),
                "start_revision": start_revision,
            }
        }
        url = self._urls[0]
        lines = stream_json_lines(url, "/v3/watch", body, connect_timeout=REQUEST_TIMEOUT)
        try:
            async with contextlib.aclosing(lines):
                async for document in lines:
                    batch = _watch_batch(document)
                    if batch is not None:
                        yield batch
        except (StreamClosedError, ValueError) as exc:
            # Rotate so the next attempt starts at another member.
            if len(self._urls) > 1 and self._urls[0] == url:
                self._urls.append(self._urls.pop(0))
            raise EtcdUnavailableError(f"etcd watch on {url} failed: {exc}") from None


def _watch_batch(document: dict[str, Any]) -> WatchBatch | None:
    _raise_for(document, 200)
    result = document.get("result", {})
    if result.get("canceled") or result.get("compact_revision"):
        reason = result.get("cancel_reason") or f"compacted at {result.get('compact_revision')}"
        raise EtcdError(f"etcd cancelled the watch: {reason}", code=0)
    if "events" not in result:
        return None  # the "created" acknowledgement or a progress notification
    events = tuple(
        (event.get("type") == "DELETE", KeyValue.from_json(event["kv"]))
        for event in result["events"]
    )
    return WatchBatch(revision=int(result["header"]["revision"]), events=events)


@contextlib.asynccontextmanager
async def open_etcd_client(urls: Sequence[str]) -> AsyncIterator[EtcdClient]:
    """An `EtcdClient` over a fresh httpx client, closed on exit."""
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT) as http:
        yield EtcdClient(http, urls)
