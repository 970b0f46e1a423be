"""``agent-actors demo``: a guided tour through a real server process.

Starts ``agent-actors serve`` as a child process on a temporary ipc endpoint with a temporary
data directory, makes calls over the wire (one of them cancelled mid-flight, and the server's
record shows it saw the cancel), stops the server with SIGTERM and checks it exited cleanly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from actors._serve import READY_LINE
from wire import CallCancelledError, WireError, open_client

__all__ = ["run_demo", "start_server_process"]


def _say(text: str) -> None:
    print(text, flush=True)


async def start_server_process(
    endpoint: str, data_dir: Path, *, extra: list[str] | None = None, ready_within: float = 30.0
) -> tuple[trio.Process, list[str]]:
    """Start ``python -m actors serve`` and wait for its ready line.

    Returns the process and the addresses it bound.
    """
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "actors", "serve", "--endpoint", endpoint, "--data", str(data_dir)]
        + (extra or []),
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    buffer = b""
    with trio.fail_after(ready_within):
        while b"\n" not in buffer:
            chunk = await process.stdout.receive_some(4096)
            if not chunk:
                raise RuntimeError(f"server exited early with status {await process.wait()}")
            buffer += chunk
    line = buffer.split(b"\n", 1)[0].decode()
    if not line.startswith(READY_LINE):
        raise RuntimeError(f"unexpected first line from the server: {line!r}")
    return process, line.removeprefix(READY_LINE).split()


async def run_demo() -> int:
    with tempfile.TemporaryDirectory(prefix="agent-actors-demo-") as tmp:
        endpoint = f"ipc://{tmp}/demo.sock"
        _say(f"1. Starting a server process on {endpoint}")
        process, _ = await start_server_process(endpoint, Path(tmp) / "data")
        try:
            await _tour(endpoint, Path(tmp))
        finally:
            _say("9. Stopping the server with SIGTERM (graceful shutdown)")
            process.send_signal(signal.SIGTERM)
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
        _say(f"   server exited with status {process.returncode}")
        return 0 if process.returncode == 0 else 1


async def _tour(endpoint: str, tmp: Path) -> None:
    async with open_client(endpoint, name="agent-actors demo") as client:
        assert client.welcome is not None
        _say(
            f"2. Connected: protocol v{client.welcome.version}, heartbeat "
            f"{client.welcome.heartbeat_ms} ms, peer timeout {client.welcome.peer_timeout_ms} ms"
        )
        described = await client.call("system/describe")
        names = [e["name"] for e in described["endpoints"]]
        _say(f"3. system/describe lists {len(names)} endpoints: {', '.join(names)}")

        agent = await client.call("agents/create", {"cwd": str(tmp), "title": "Demo agent"})
        agent_id = agent["agentId"]
        _say(f"4. Created agent {agent_id}; calling it through its proxy")
        proxy = client.agent(agent_id)
        echoed = await proxy.diagnostics.echo({"hello": "world"})
        _say(f"   diagnostics/echo -> {echoed}")
        for text in ("first note", "second note"):
            count = await proxy.diagnostics.note(text)
            _say(f"   diagnostics/note({text!r}) -> {count} note(s)")

        _say("5. A 30 s sleep, cancelled by the caller after 0.3 s")
        started = trio.current_time()
        with trio.move_on_after(0.3):
            await proxy.diagnostics.sleep(30.0, label="cancelled-by-caller")
        _say(f"   caller gave up after {trio.current_time() - started:.2f} s")
        await _show_server_view(client, "cancelled-by-caller")

        _say("6. Latest wins: a second call with the same supersede key replaces the first")
        async with trio.open_nursery() as nursery:
            outcome: dict[str, Any] = {}

            async def first() -> None:
                try:
                    await proxy.diagnostics.sleep(30.0, label="superseded", supersede="typing")
                except CallCancelledError as exc:
                    outcome["first"] = f"{exc.code.value} ({exc.reason}, was {exc.state})"

            nursery.start_soon(first)
            await trio.sleep(0.2)
            outcome["second"] = await proxy.diagnostics.sleep(
                0.1, label="latest", supersede="typing"
            )
        _say(f"   first call: {outcome['first']}; second call returned {outcome['second']}")

        await _references(client, agent_id, tmp)

        _say("8. Errors are typed and the server keeps serving")
        for endpoint_name, args in (
            ("nope/missing", {}),
            ("diagnostics/sleep", {"agentId": agent_id, "seconds": "soon"}),
            ("diagnostics/echo", {"agentId": "no-such-agent"}),
        ):
            try:
                await client.call(endpoint_name, args)
            except WireError as exc:
                _say(f"   {endpoint_name} -> {exc.code.value}: {exc.message}")
        stats = await client.call("system/stats")
        _say(
            f"   server stats: {stats['callsTotal']} calls, {stats['cancelledTotal']} cancelled, "
            f"{stats['handlerTasks']} other handler tasks alive"
        )


async def _references(client: Any, agent_id: str, tmp: Path) -> None:
    _say("7. The DSH reference endpoints, on two agents sharing a workspace")
    work = tmp / "work"
    for name in ("src/main.py", "src/mailbox.py", "README.md"):
        await trio.Path(work / name).parent.mkdir(parents=True, exist_ok=True)
        await trio.Path(work / name).write_text("# demo\n")
    other = await client.call("agents/create", {"cwd": str(work), "title": "Design notes"})
    mine = await client.call("agents/create", {"cwd": str(work), "title": "Implementation"})
    proxy = client.agent(mine["agentId"])
    files = await proxy.fileReferences.list("mail")
    _say(f"   fileReferences/list('mail') -> {[f['path'] for f in files]}")
    listed = await proxy.fileReferences.list("")
    _say(f"   fileReferences/list('') -> {[(f['path'], f['kind']) for f in listed]}")
    candidates = await proxy.sessionReferenceResolver.candidates("design")
    _say(f"   sessionReferenceResolver/candidates('design') -> {candidates[0]['mention']}")
    prepared = await proxy.sessionReferenceResolver.prepare(
        f"Compare with {candidates[0]['mention']}",
        [{"sessionId": other["agentId"], "label": "Design notes"}],
    )
    context = str(prepared.get("additionalContext", ""))
    tagged = "<referenced-sessions>" in context
    _say(
        f"   sessionReferenceResolver/prepare -> additionalContext of {len(context)} characters"
        f"{', inside <referenced-sessions>' if tagged else ''}"
    )


async def _show_server_view(client: Any, label: str) -> None:
    with trio.fail_after(5):
        while True:
            endings = await client.call("diagnostics/endings")
            seen = [e for e in endings if e["call"] == label]
            if seen:
                break
            await trio.sleep(0.02)
    _say(
        f"   server saw: handler {label!r} {seen[-1]['outcome']} after {seen[-1]['elapsed']:.2f} s"
    )
