"""Freed heap is kept for reuse while large messages flow (glibc): a 64 KiB call does not fault
its buffers' pages in again and again, and a process whose environment sets glibc's malloc
knobs is left as it says."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from tests._processes import run_script

#: A server and a client in one fresh interpreter: 16 callers echo 64 KiB, 1,600 calls counted
#: after a warm-up; the page faults of the process per call.
_ECHO_64K = """
import json, resource, tempfile
import trio
from wire import Endpoint, EndpointSpec, Param, Registry, Server, open_client
from wire._memory import keep_heap_for_reuse

PAYLOAD = Param(name="payload", wire_name="payload", annotation=bytes)


def echo(ctx, args):
    return args["payload"]


async def never(ctx, args):
    raise AssertionError("echo runs inline")


async def main():
    spec = EndpointSpec(name="t/echo", params=(PAYLOAD,))
    server = Server(Registry([Endpoint(spec=spec, handler=never, run_inline=echo)]))
    async with trio.open_nursery() as nursery:
        [bound] = await nursery.start(server.run, f"ipc://{tempfile.mkdtemp()}/s.sock")
        async with open_client(bound) as client:
            payload = b"x" * 65536

            async def calls(n):
                for _ in range(n):
                    assert await client.call("t/echo", {"payload": payload}) == payload

            async def callers(n):
                async with trio.open_nursery() as inner:
                    for _ in range(16):
                        inner.start_soon(calls, n)

            await callers(20)
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            await callers(100)
            after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        await server.aclose()
    kept_again = keep_heap_for_reuse()  # the pumps did it already, or the environment said no
    print(json.dumps({"faultsPerCall": (after - before) / 1600, "keptAgain": kept_again}))


trio.run(main)
"""


def _echo_64k(**env: str) -> dict[str, Any]:
    kept = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    return run_script(_ECHO_64K, env={**kept, **env})


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator, Linux")
def test_64k_calls_reuse_the_heap_instead_of_faulting_pages_in() -> None:
    """With glibc's default trim mark set in the environment (so the wire leaves the allocator
    alone) the heap shrinks between calls and each call faults pages in again; with the wire's
    setting a call faults less than one page in."""
    default = _echo_64k(GLIBC_TUNABLES="glibc.malloc.trim_threshold=131072")
    if default["faultsPerCall"] < 2:
        pytest.skip(f"this allocator keeps its heap by itself: {default}")
    kept = _echo_64k(GLIBC_TUNABLES="")
    assert kept["faultsPerCall"] < 1, (kept, default)
    assert kept["keptAgain"] is False and default["keptAgain"] is False  # once per process
