"""``serve -vv --log-format json``: the server logs every call as one JSON record with its
structured fields (issue 22, item 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from actors._serve import READY_LINE
from wire import open_client


async def _serve_and_echo(tmp_path: Path, *serve_args: str) -> tuple[list[dict[str, Any]], str]:
    """``agent-actors -vv --log-format json serve …``: create an agent, echo once, SIGTERM;
    every stderr line as JSON, and the agent's id."""
    command = [sys.executable, "-m", "actors", "-vv", "--log-format", "json", "serve"]
    command += ["--endpoint", f"ipc://{tmp_path}/s.sock", "--data", str(tmp_path / "data")]
    process = await trio.lowlevel.open_process(
        [*command, *serve_args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    stderr = bytearray()

    async def drain() -> None:
        assert process.stderr is not None
        async for chunk in process.stderr:
            stderr.extend(chunk)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        with trio.fail_after(90):
            seen = b""
            while READY_LINE.encode() not in seen:
                chunk = await process.stdout.receive_some()
                assert chunk, "the server exited before it was ready"
                seen += chunk
            address = seen.decode().split(READY_LINE)[1].split()[0]
            async with open_client(address) as client:
                agent = (await client.call("agents/create", {}))["agentId"]
                await client.call("diagnostics/echo", {"agentId": agent, "payload": 7})
            process.terminate()
            await process.wait()
    return [json.loads(line) for line in stderr.decode().splitlines() if line.strip()], agent


async def test_a_served_call_is_logged_as_json_with_its_fields(tmp_path: Path) -> None:
    """Each call the server answers appears on stderr as a JSON object carrying the endpoint,
    call id, agent id, peer, outcome and duration; every line is JSON."""
    records, agent = await _serve_and_echo(tmp_path)
    echo = [r for r in records if r.get("endpoint") == "diagnostics/echo"]
    assert len(echo) == 1, records
    assert echo[0]["outcome"] == "result"
    assert echo[0]["agent_id"] == agent
    assert {"time", "level", "logger", "message", "call_id", "peer", "duration_ms"} <= set(echo[0])
    assert any("shutting down" in r["message"] and r.get("signal") == "SIGTERM" for r in records)


async def test_workers_log_as_the_command_does(tmp_path: Path) -> None:
    """``serve --workers 2 -vv --log-format json``: the workers log in the command's format and
    at its level, each record naming its worker; every line on stderr is JSON."""
    records, agent = await _serve_and_echo(tmp_path, "--workers", "2")
    on_workers = [r for r in records if "worker" in r]
    assert {r["worker"] for r in on_workers} == {"w1", "w2"}, records
    echo = [r for r in on_workers if r.get("endpoint") == "diagnostics/echo"]
    assert len(echo) == 1 and echo[0]["agent_id"] == agent, records
    assert any(r["message"].endswith(": SIGTERM") for r in on_workers), records
