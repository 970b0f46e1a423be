"""The agent-actors command: call, serve (config, signals) and demo, as real processes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from actors.cli._call import parse_items
from actors.cli._demo import start_server_process
from wire import CallCancelledError, CancelReason, open_client


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actors", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class TestParseItems:
    def test_text_and_json(self) -> None:
        """key=text is a string; key:=json is any JSON value."""
        assert parse_items(["q=src/ma", "n:=3", 'refs:=[1, {"a": null}]', "e="]) == {
            "q": "src/ma",
            "n": 3,
            "refs": [1, {"a": None}],
            "e": "",
        }

    def test_equals_inside_text(self) -> None:
        """Only the first separator splits; a text value may contain '=' and ':='."""
        assert parse_items(["expr=a=b:=c"]) == {"expr": "a=b:=c"}

    @pytest.mark.parametrize("item", ["novalue", "=x", "n:={bad"])
    def test_rejects(self, item: str) -> None:
        """Items of neither form, and bad JSON, are usage errors."""
        with pytest.raises(ValueError, match=r"^'"):
            parse_items([item])


async def test_call_prints_json_and_errors(server_process: tuple[trio.Process, str]) -> None:
    """call prints the JSON result; a failing call prints code: message and exits 1."""
    _, address = server_process
    created = await trio.to_thread.run_sync(
        lambda: run_cli("call", address, "agents/create", "title=From the CLI")
    )
    assert created.returncode == 0, created.stderr
    agent = json.loads(created.stdout)
    assert agent["title"] == "From the CLI"
    echoed = await trio.to_thread.run_sync(
        lambda: run_cli(
            "call", address, "diagnostics/echo", "--agent", agent["agentId"], 'payload:={"k": [1]}'
        )
    )
    assert json.loads(echoed.stdout) == {"k": [1]}
    failed = await trio.to_thread.run_sync(
        lambda: run_cli("call", address, "diagnostics/echo", "--agent", "nobody")
    )
    assert failed.returncode == 1
    assert failed.stderr.startswith("session-not-found: no session with id 'nobody'")
    assert failed.stdout == ""


def test_unknown_config_key_is_a_clear_error(tmp_path: Path) -> None:
    """serve refuses to start on an unknown configuration key, naming it."""
    config = tmp_path / "c.toml"
    config.write_text("[wire]\nheartbeat = 1.0\nheartbeet = 2\n")
    result = run_cli("serve", "--endpoint", f"ipc://{tmp_path}/s", "--config", str(config))
    assert result.returncode == 2
    assert "unknown key 'heartbeet' in [wire]" in result.stderr


def test_unknown_config_table_is_a_clear_error(tmp_path: Path) -> None:
    """serve refuses an unknown table."""
    config = tmp_path / "c.toml"
    config.write_text("[wyre]\n")
    result = run_cli("serve", "--endpoint", f"ipc://{tmp_path}/s", "--config", str(config))
    assert result.returncode == 2
    assert "unknown table [wyre]" in result.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_signal_shuts_down_gracefully(tmp_path: Path, signum: signal.Signals) -> None:
    """SIGTERM/SIGINT: the in-flight call gets a shutdown terminal frame and the server exits 0."""
    process, [address] = await start_server_process(f"ipc://{tmp_path}/s.sock", tmp_path / "d")
    try:
        async with open_client(address) as client:
            agent = (await client.call("agents/create", {}))["agentId"]
            caught: list[CallCancelledError] = []

            async def pending() -> None:
                try:
                    await client.agent(agent).diagnostics.sleep(60.0)
                except CallCancelledError as exc:
                    caught.append(exc)

            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(pending)
                    await trio.sleep(0.3)
                    process.send_signal(signum)
                assert await process.wait() == 0
        assert caught[0].reason is CancelReason.SHUTDOWN
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def test_demo_runs_and_shows_the_cancel() -> None:
    """agent-actors demo exits 0 and reports that the server saw the caller's cancel."""
    result = run_cli("demo", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "server saw: handler 'cancelled-by-caller' cancelled" in result.stdout
    assert "server exited with status 0" in result.stdout
