"""Heartbeats: a dead peer is noticed within the documented bound (3 s by default).

The assertions allow twice the bound: these run on shared, noisy machines, and the point is that
loss is detected by the heartbeat machinery at all, not a stopwatch race.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio

from wire import PeerLostError, open_client

ROOT = Path(__file__).resolve().parents[2]
BOUND = 3.0
MARGIN = 2.0


async def test_server_killed_mid_call_fails_the_call_with_peer_lost(
    server_process: tuple[trio.Process, str],
) -> None:
    """SIGKILL on the server turns a pending call into peer-lost within the bound."""
    process, address = server_process
    async with open_client(address) as client:
        agent = (await client.call("agents/create", {}))["agentId"]
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                failed_after: list[float] = []

                async def pending_call() -> None:
                    with pytest.raises(PeerLostError):
                        await client.agent(agent).diagnostics.sleep(60.0)
                    failed_after.append(trio.current_time() - killed_at)

                nursery.start_soon(pending_call)
                await trio.sleep(0.3)
                killed_at = trio.current_time()
                process.kill()
        assert failed_after[0] < BOUND * MARGIN
        with pytest.raises(PeerLostError):
            await client.call("system/stats")


CLIENT_SCRIPT = textwrap.dedent(
    """
    import sys, trio
    from wire import open_client

    async def main():
        async with open_client(sys.argv[1]) as client:
            print("calling", flush=True)
            await client.call(
                "diagnostics/sleep",
                {"agentId": sys.argv[2], "seconds": 60, "label": "orphan"},
            )

    trio.run(main)
    """
)


async def test_dead_client_gets_its_calls_cancelled(
    server_process: tuple[trio.Process, str], tmp_path: Path
) -> None:
    """SIGKILL on a client process makes the server cancel its in-flight call within the
    bound."""
    _, address = server_process
    script = tmp_path / "client.py"
    script.write_text(CLIENT_SCRIPT)
    async with open_client(address) as observer:
        agent = (await observer.call("agents/create", {}))["agentId"]
        child = await trio.lowlevel.open_process(
            [sys.executable, str(script), address, agent],
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            assert child.stdout is not None
            with trio.fail_after(30):
                assert b"calling" in await child.stdout.receive_some(100)

                async def orphan_running() -> bool:
                    stats = await observer.call("system/stats")
                    return bool(stats["calls"]["running"] >= 2)

                while not await orphan_running():
                    await trio.sleep(0.02)
                child.send_signal(signal.SIGKILL)
                killed_at = trio.current_time()
                while True:
                    endings = await observer.call("diagnostics/endings")
                    orphan = [e for e in endings if e["call"] == "orphan"]
                    if orphan:
                        break
                    await trio.sleep(0.02)
            assert orphan[0]["outcome"] == "cancelled"
            assert trio.current_time() - killed_at < BOUND * MARGIN
        finally:
            if child.returncode is None:
                child.kill()
            await child.wait()
