"""``serve --metrics``: Prometheus metrics and probes over HTTP, scraped with a real HTTP client
while calls run, in one process and as one view over ``--workers 2`` (issue 22, item 3)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from actors._serve import METRICS_LINE, READY_LINE
from wire import open_client

PYTHON = sys.executable


@asynccontextmanager
async def serving(tmp_path: Path, *extra: str) -> AsyncIterator[tuple[str, str]]:
    """A real ``agent-actors serve --metrics 127.0.0.1:0 …``: its endpoint and metrics URL."""
    command = [
        PYTHON,
        "-m",
        "actors",
        "serve",
        "--endpoint",
        f"ipc://{tmp_path}/m.sock",
        "--data",
        str(tmp_path / "data"),
        "--metrics",
        "127.0.0.1:0",
        *extra,
    ]
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ}
    )
    assert process.stdout is not None
    try:
        url = address = ""
        buffered = b""
        with trio.fail_after(60):
            while not address:
                chunk = await process.stdout.receive_some()
                assert chunk, "the server exited before it was ready"
                buffered += chunk
                *lines, rest = buffered.split(b"\n")
                buffered = rest
                for line in map(bytes.decode, lines):
                    if line.startswith(METRICS_LINE):
                        url = line.split()[-1]
                    elif line.startswith(READY_LINE):
                        address = line.split()[-1]
        assert url, "no metrics line before the ready line"
        yield address, url
    finally:
        process.terminate()
        with trio.move_on_after(30):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


def families(text: str) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(found: dict[str, Any], name: str, suffix: str = "", **labels: str) -> float:
    """The sample of ``name`` (plus ``suffix``) with these labels, summed over the others."""
    return sum(
        sample.value
        for sample in found[name].samples
        if sample.name == name + suffix
        and all(sample.labels.get(k) == v for k, v in labels.items())
    )


async def exercise(address: str, tmp_path: Path) -> None:
    """Echoes, a cancelled sleep, an append: what the metrics must then show."""
    async with open_client(address) as client:
        agent = (await client.call("agents/create", {"cwd": str(tmp_path)}))["agentId"]
        for n in range(20):
            assert await client.call("diagnostics/echo", {"agentId": agent, "payload": n}) == n
        # Cancelled by hand (a scope with a deadline would send it along: deadline-exceeded).
        async with trio.open_nursery() as nursery:

            async def sleep() -> None:
                await client.call("diagnostics/sleep", {"agentId": agent, "seconds": 30})

            nursery.start_soon(sleep)
            await trio.sleep(0.3)
            nursery.cancel_scope.cancel()
        event = {"type": "note/added", "data": {"n": 1}, "ignorable": True}
        await client.call("sessions/append", {"agentId": agent, "events": [event]})
        # A global query (not the bare `@`, which lists one directory) builds the index.
        (tmp_path / "main.py").write_text("")
        await client.call("fileReferences/list", {"agentId": agent, "query": "main"})


@pytest.mark.parametrize("workers", [0, 2], ids=["single", "workers2"])
async def test_metrics_are_scraped_over_http_while_calls_run(tmp_path: Path, workers: int) -> None:
    """A scrape shows calls by endpoint and outcome, their latency histogram, the cancel by
    reason, active actors, appends and their fsync latency, and a file-index build; with
    ``--workers 2`` the supervisor's one view adds up both workers; the probes answer."""
    extra = ("--workers", str(workers)) if workers else ()
    async with serving(tmp_path, *extra) as (address, url), open_client(address) as watcher:
        async with httpx.AsyncClient(timeout=10) as http, trio.open_nursery() as nursery:
            base = url.removesuffix("/metrics")
            assert (await http.get(f"{base}/healthz")).status_code == 200
            assert (await http.get(f"{base}/readyz")).status_code == 200
            assert (await http.get(f"{base}/nothing")).status_code == 404
            with trio.fail_after(60):
                await exercise(address, tmp_path)
                # Scraped while a call runs: the watcher's sleep, in flight until cancelled.
                # Its agent is made first, so the only call of the watcher in flight is the sleep.
                watching = trio.CancelScope()
                sleeper = (await watcher.call("agents/create", {}))["agentId"]

                async def watch() -> None:
                    with watching:
                        await watcher.call("diagnostics/sleep", {"agentId": sleeper, "seconds": 60})

                nursery.start_soon(watch)
                while not value(
                    families((await http.get(url)).text),
                    "agent_actors_calls_in_flight",
                    state="running",
                ):
                    await trio.sleep(0.05)
                # The cancelled sleep's terminal frame may trail its cancel a little.
                while True:
                    response = await http.get(url)
                    assert response.status_code == 200
                    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
                    found = families(response.text)
                    if value(found, "agent_actors_cancels", "_total", reason="caller") >= 1:
                        break
                    await trio.sleep(0.1)
                watching.cancel()
    calls = "agent_actors_calls"
    assert value(found, "agent_actors_calls_in_flight", state="running") >= 1  # the watcher's
    assert value(found, calls, "_total", endpoint="diagnostics/echo", outcome="result") == 20
    assert value(found, calls, "_total", endpoint="diagnostics/sleep", outcome="cancelled") == 1
    assert value(found, calls, "_total", endpoint="sessions/append", outcome="result") == 1
    latency = "agent_actors_call_duration_seconds"
    assert value(found, latency, "_count", endpoint="diagnostics/echo") == 20
    assert value(found, latency, "_bucket", endpoint="diagnostics/echo", le="+Inf") == 20
    assert value(found, latency, "_sum", endpoint="diagnostics/sleep") >= 0.25
    assert value(found, "agent_actors_peers") >= 1
    assert value(found, "agent_actors_actors_active") >= 1
    assert value(found, "agent_actors_appended_events", "_total") >= 1
    assert value(found, "agent_actors_fsync_duration_seconds", "_count") >= 1
    assert value(found, "agent_actors_append_writes", "_total", where="inline") >= 1
    assert value(found, "agent_actors_file_index_builds", "_total") >= 1
    # Every serve process froze what startup built and times its collections from then on.
    assert value(found, "agent_actors_gc_frozen_objects") > 1000 * (workers + 1)
    assert "agent_actors_gc_pause_seconds" in found
    assert value(found, "agent_actors_gc_collections", "_total", generation="2") >= workers + 1
    assert value(found, "agent_actors_backlog_bytes") == 0
    if workers:
        assert value(found, "agent_actors_workers_answering") == workers


async def test_metrics_refuse_a_public_address_without_insecure(tmp_path: Path) -> None:
    """``--metrics 0.0.0.0:9464`` without ``--insecure`` is a usage error naming the fix."""
    command = [PYTHON, "-m", "actors", "serve", "--data", str(tmp_path)]
    result = await trio.run_process(
        [*command, "--metrics", "0.0.0.0:9464"], capture_stderr=True, check=False
    )
    stderr = result.stderr.decode()
    assert result.returncode == 2
    assert "not a loopback address" in stderr and "--insecure" in stderr
    assert "Traceback" not in stderr
