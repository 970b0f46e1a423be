"""Ending the server processes that tests start."""

from __future__ import annotations

import trio

__all__ = ["reap"]


async def reap(process: trio.Process) -> None:
    """Kill ``process`` unless it has exited, and wait for it (at most 10 s, even while the
    test is being cancelled): no server outlives its test."""
    if process.returncode is None:
        process.kill()
    with trio.move_on_after(10, shield=True):
        await process.wait()
