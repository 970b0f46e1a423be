"""gRPC with ``grpc.aio`` and a generic handler (no codegen): the payload travels as the raw
request and response bytes; one channel per process, one asyncio task per call in flight."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench._load_jobs import Go, Job, Samples, payload_of, split_address
from bench.peers import READY_PREFIX

__all__ = ["drive", "serve"]

_METHOD = "/bench.Echo/Echo"
_TIMEOUT = 30.0


def _target(address: str) -> str:
    where = split_address(address)
    return f"unix:{where}" if isinstance(where, str) else f"{where[0]}:{where[1]}"


def serve(address: str) -> None:
    asyncio.run(_serve(address))


async def _serve(address: str) -> None:
    import grpc

    async def echo(request: bytes, context: Any) -> bytes:
        return request

    server = grpc.aio.server()
    # No serializers: the handler gets and returns the message bytes as they are.
    handler = grpc.method_handlers_generic_handler(
        "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port(_target(address))
    await server.start()
    bound = address if address.startswith("ipc://") else f"tcp://127.0.0.1:{port}"
    print(f"{READY_PREFIX} {bound}", flush=True)
    await server.wait_for_termination()


def drive(job: Job, go: Go) -> Samples:
    return asyncio.run(_drive(job, go))


async def _drive(job: Job, go: Go) -> Samples:
    import grpc

    payload = payload_of(job.payload_bytes)
    async with grpc.aio.insecure_channel(_target(job.address)) as channel:
        echo = channel.unary_unary(_METHOD)
        for _ in range(job.warmup_calls):
            if await echo(payload, timeout=_TIMEOUT) != payload:
                raise RuntimeError("grpc: echo returned something else than its payload")
        samples = Samples(await asyncio.get_running_loop().run_in_executor(None, go), job.duration)
        await asyncio.sleep(max(0.0, (samples.start_ns - time.monotonic_ns()) / 1e9))

        async def caller() -> None:
            while samples.open():
                started = time.monotonic_ns()
                reply = await echo(payload, timeout=_TIMEOUT)
                samples.call_done(started, time.monotonic_ns())
                if len(reply) != len(payload):
                    raise RuntimeError("grpc: short echo")

        async with asyncio.timeout(job.duration + _TIMEOUT):
            await asyncio.gather(*(caller() for _ in range(job.concurrency)))
        samples.stop_clock()
        return samples
