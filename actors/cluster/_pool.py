"""Wire clients to the workers, one per endpoint, opened on first use.

The supervisor forwards calls through these clients and the workers call each other through
them (actor-to-actor calls across shards). Closing an endpoint's client fails every call in
flight on it with ``unavailable`` at once: the supervisor does so the moment it sees a worker
process exit, so a call on a killed worker never waits out the heartbeat bound.

A client that has started no call for `IDLE_CLOSE` seconds, and has none in flight, is closed
(it says bye): a connection pings its server every heartbeat, and that wakes both processes
every second for as long as the pool keeps it, which is most of what an idle cluster costs once
calls have reached every worker (`python -m bench.idle`). The next call to that endpoint
connects again: through the supervisor it takes the task path, which waits for the welcome.
"""

from __future__ import annotations

import math

import attrs
import trio

from wire import Client, UnavailableError, open_client

__all__ = ["IDLE_CLOSE", "ClientPool"]

#: Seconds without a new call after which a pooled client with no call in flight is closed (it
#: is closed after one to two of these).
IDLE_CLOSE = 30.0


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
        idle_close: Seconds without a new call before an idle client is closed (see the
            module; ``None``: never).
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        name: str = "agent-actors cluster",
        connect_timeout: float = 5.0,
        idle_close: float | None = IDLE_CLOSE,
    ) -> None:
        self._nursery = nursery
        self._name = name
        self._connect_timeout = connect_timeout
        self._idle_close = math.inf if idle_close is None else idle_close
        self._entries: dict[str, _Entry] = {}
        #: Bumped whenever an endpoint's client is forgotten or replaced: what :meth:`ready`
        #: returned stays its answer while this is unchanged and that client is still ready
        #: (the supervisor's relay keeps its routes by it).
        self.generation = 0

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
            self.generation += 1
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
                await self._until_closed_or_idle(endpoint, entry, client)
        except Exception as exc:  # connect failures; the caller sees them as unavailable
            entry.error = exc
        finally:
            self.generation += 1
            entry.client = None
            entry.ready.set()
            if self._entries.get(endpoint) is entry:
                del self._entries[endpoint]

    async def _until_closed_or_idle(self, endpoint: str, entry: _Entry, client: Client) -> None:
        """Return once the entry is closed, or once ``client`` had no call in flight and
        started none for a whole idle period (the entry is then forgotten first, so that no
        caller gets the client while it says bye)."""
        started = client.statistics().calls_started
        busy = False
        while True:
            with trio.move_on_after(self._idle_close):
                await entry.closing.wait()
                return
            statistics = client.statistics()
            # No call started since the last look, and none was in flight then (so none is
            # now): the whole period was quiet.
            if statistics.calls_started == started and not busy:
                if self._entries.get(endpoint) is entry:
                    self.generation += 1
                    del self._entries[endpoint]
                return
            started, busy = statistics.calls_started, statistics.pending_calls > 0

    def endpoints(self) -> list[str]:
        return list(self._entries)
