"""Wire clients to the workers, one per endpoint, opened on first use.

The supervisor forwards calls through these clients and the workers call each other through
them (actor-to-actor calls across shards). Closing an endpoint's client fails every call in
flight on it with ``unavailable`` at once: the supervisor does so the moment it sees a worker
process exit, so a call on a killed worker never waits out the heartbeat bound.
"""

from __future__ import annotations

import attrs
import trio

from wire import Client, UnavailableError, open_client

__all__ = ["ClientPool"]


@attrs.define(eq=False)
class _Entry:
    ready: trio.Event = attrs.Factory(trio.Event)
    closing: trio.Event = attrs.Factory(trio.Event)
    client: Client | None = None
    error: BaseException | None = None


class ClientPool:
    """Clients by endpoint, living in ``nursery``.

    Args:
        nursery: Where each client's background task runs.
        name: Client name sent in hello.
        connect_timeout: Seconds to wait for a welcome.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        name: str = "agent-actors cluster",
        connect_timeout: float = 5.0,
    ) -> None:
        self._nursery = nursery
        self._name = name
        self._connect_timeout = connect_timeout
        self._entries: dict[str, _Entry] = {}

    async def get(self, endpoint: str) -> Client:
        """The client for ``endpoint``, connecting if needed.

        Raises:
            UnavailableError: no welcome within the connect timeout, or the pool is closing it.
        """
        entry = self._entry(endpoint)
        if entry.client is not None:
            return entry.client
        await entry.ready.wait()
        if entry.client is None:
            raise UnavailableError(f"cannot reach {endpoint}: {entry.error}")
        return entry.client

    def connect_soon(self, endpoint: str) -> None:
        """Start connecting to ``endpoint`` unless connected or connecting, without waiting
        (the relay's later calls find it :meth:`ready`)."""
        self._entry(endpoint)

    def _entry(self, endpoint: str) -> _Entry:
        entry = self._entries.get(endpoint)
        if entry is None:
            entry = self._entries[endpoint] = _Entry()
            self._nursery.start_soon(self._hold, endpoint, entry)
        return entry

    def ready(self, endpoint: str) -> Client | None:
        """The client for ``endpoint`` if it is connected and answering, without waiting (the
        supervisor's relay falls back to :meth:`get` otherwise)."""
        entry = self._entries.get(endpoint)
        client = entry.client if entry is not None else None
        return client if client is not None and client.ready else None

    def close(self, endpoint: str) -> None:
        """Close the client of ``endpoint`` (its calls in flight fail with ``unavailable``)."""
        entry = self._entries.pop(endpoint, None)
        if entry is not None:
            entry.closing.set()

    def close_all(self) -> None:
        for endpoint in list(self._entries):
            self.close(endpoint)

    async def _hold(self, endpoint: str, entry: _Entry) -> None:
        try:
            async with open_client(
                endpoint, name=self._name, connect_timeout=self._connect_timeout
            ) as client:
                entry.client = client
                entry.ready.set()
                await entry.closing.wait()
        except Exception as exc:  # connect failures; the caller sees them as unavailable
            entry.error = exc
        finally:
            entry.client = None
            entry.ready.set()
            if self._entries.get(endpoint) is entry:
                del self._entries[endpoint]

    def endpoints(self) -> list[str]:
        return list(self._entries)
