"""One streaming request to etcd's JSON gateway (``/v3/watch``), read line by line.

The gateway answers a streaming RPC with one JSON document per line for as long as the stream
lives. This reads it with h11 (the HTTP/1.1 state machine httpx itself is built on) over a trio
TCP stream rather than with httpx's ``Response.aiter_lines``: httpx 0.28 builds that iterator
from nested async generators that cannot all be closed when a caller stops early, and trio then
warns about each one it finalizes (encode/httpx#3686, fix pending in #3777). Here the only
generator is this one, closed by its caller with ``aclosing``.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import AsyncGenerator
from typing import Any

import h11
import trio

from actors.cluster._coordinator import CoordinatorError

__all__ = ["StreamClosedError", "stream_json_lines"]

#: Read size for the response body.
_CHUNK = 65536


class StreamClosedError(CoordinatorError):
    """The streaming request could not be opened or broke (etcd gone, connection lost)."""


async def stream_json_lines(
    base_url: str, path: str, body: dict[str, Any], *, connect_timeout: float
) -> AsyncGenerator[dict[str, Any], None]:
    """POST ``body`` as JSON to ``base_url + path`` and yield each JSON line of the answer.

    Raises:
        StreamClosedError: no connection, the connection broke, or the server ended the stream.
        ValueError: a line is not JSON.
    """
    parts = urllib.parse.urlsplit(base_url)
    if parts.hostname is None or parts.port is None:
        raise ValueError(f"not a host:port URL: {base_url!r}")
    where = f"{base_url}{path}"
    try:
        with trio.fail_after(connect_timeout):
            stream = await trio.open_tcp_stream(parts.hostname, parts.port)
    except (OSError, trio.TooSlowError) as exc:
        raise StreamClosedError(f"cannot connect to {where}: {exc!r}") from None
    async with stream:
        connection = h11.Connection(h11.CLIENT)
        payload = json.dumps(body).encode()
        request = h11.Request(
            method="POST",
            target=path,
            headers=[
                ("Host", parts.netloc),
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(payload))),
            ],
        )
        buffer = b""
        try:
            await stream.send_all(
                connection.send(request)
                + connection.send(h11.Data(data=payload))
                + connection.send(h11.EndOfMessage())
            )
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    connection.receive_data(await stream.receive_some(_CHUNK))
                elif isinstance(event, h11.Data):
                    buffer += bytes(event.data)
                    while b"\n" in buffer:
                        line, _, buffer = buffer.partition(b"\n")
                        if line.strip():
                            yield json.loads(line)
                elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                    break
        except (OSError, trio.BrokenResourceError, h11.ProtocolError) as exc:
            raise StreamClosedError(f"stream {where} broke: {exc!r}") from None
        if buffer.strip():
            yield json.loads(buffer)
    raise StreamClosedError(f"{where} ended the stream")
