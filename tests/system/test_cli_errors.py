"""The agent-actors command's failures, as a user sees them: a line or a few naming what is wrong
and what to do, exit status 1 (a call failed) or 2 (usage, start-up), never a traceback; and
``--version``, the logging options and the ipc socket file's life, with real processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

from actors._serve import READY_LINE

PYTHON = sys.executable


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "actors", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """A real ``agent-actors serve`` on a tcp and an ipc endpoint, shared by this module."""

    def __init__(self, root: Path) -> None:
        self.ipc_path = root / "s.sock"
        self.process = subprocess.Popen(
            [
                *(PYTHON, "-m", "actors", "serve", "--endpoint", "tcp://127.0.0.1:0"),
                *("--endpoint", f"ipc://{self.ipc_path}", "--data", str(root / "data")),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith(READY_LINE), line + self.process.stderr.read()  # type: ignore[union-attr]
        self.tcp, self.ipc = line.removeprefix(READY_LINE).split()

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGTERM)
        try:
            _, err = self.process.communicate(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        return self.process.returncode, err


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = Server(tmp_path_factory.mktemp("server"))
    try:
        yield running
    finally:
        running.stop()


def failure(result: subprocess.CompletedProcess[str], status: int, *texts: str) -> None:
    """``result`` failed with ``status``, said each of ``texts`` on stderr in a few lines,
    printed nothing on stdout and no traceback."""
    assert result.returncode == status, (result.returncode, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) <= 5, result.stderr
    for text in texts:
        assert text in result.stderr, (text, result.stderr)


# -- serve: start-up errors (status 2) -------------------------------------------------------


def test_serve_on_a_port_in_use(server: Server, tmp_path: Path) -> None:
    """A port another server holds is named as in use, with what to do."""
    result = run_cli("serve", "--endpoint", server.tcp, "--data", str(tmp_path))
    failure(result, 2, f"cannot serve on {server.tcp}", "already in use", "hint: ")


def test_serve_on_an_ipc_path_a_live_server_holds(server: Server, tmp_path: Path) -> None:
    """An ipc path a live server listens on is refused, and that server keeps its socket."""
    result = run_cli("serve", "--endpoint", server.ipc, "--data", str(tmp_path))
    failure(result, 2, f"cannot serve on {server.ipc}: another server is listening there")
    assert server.ipc_path.is_socket()


def test_ipc_path_in_a_missing_directory(tmp_path: Path) -> None:
    """``ipc://DIR/x.sock`` with DIR missing names DIR and does not create it."""
    missing = tmp_path / "nonexistent-dir"
    result = run_cli("serve", "--endpoint", f"ipc://{missing}/x.sock", "--data", str(tmp_path))
    failure(result, 2, f"directory {missing} does not exist", "mkdir -p")
    assert not missing.exists()


def test_ipc_path_over_a_regular_file(tmp_path: Path) -> None:
    """An ipc path naming a regular file is refused, and the file is left alone."""
    precious = tmp_path / "notes.txt"
    precious.write_text("keep me")
    result = run_cli("serve", "--endpoint", f"ipc://{precious}", "--data", str(tmp_path / "d"))
    failure(result, 2, "exists and is not a socket")
    assert precious.read_text() == "keep me"


@pytest.mark.parametrize(
    ("endpoint", "texts"),
    [
        ("127.0.0.1:7561", ["endpoint '127.0.0.1:7561' has no scheme", "tcp://127.0.0.1:7561"]),
        ("http://127.0.0.1:7561", ["unsupported scheme 'http://'", "tcp://127.0.0.1:7561"]),
        ("tcp://127.0.0.1", ["needs a host and a port"]),
        ("tcp://127.0.0.1:99999", ["is not a number from 0 to 65535"]),
        ("tcp://nohost.invalid:7561", ["cannot resolve host 'nohost.invalid'"]),
        ("inproc://x", ["unsupported scheme 'inproc://'", "same process"]),
    ],
)
def test_serve_on_a_bad_endpoint(tmp_path: Path, endpoint: str, texts: list[str]) -> None:
    """A malformed or unresolvable endpoint is a usage error naming it and the form to use."""
    failure(run_cli("serve", "--endpoint", endpoint, "--data", str(tmp_path)), 2, *texts)


def test_serve_with_an_unwritable_data_directory(tmp_path: Path) -> None:
    """A data directory that cannot be written is named, with the reason."""
    (tmp_path / "file").write_text("")
    data = tmp_path / "file" / "data"
    result = run_cli("serve", "--endpoint", f"ipc://{tmp_path}/s.sock", "--data", str(data))
    failure(result, 2, f"data directory {data} is not writable")


def test_serve_with_a_bad_config(tmp_path: Path) -> None:
    """A configuration file that does not parse is named, with the parser's reason."""
    config = tmp_path / "c.toml"
    config.write_text("[wire\n")
    result = run_cli("serve", "--config", str(config), "--data", str(tmp_path))
    failure(result, 2, f"agent-actors: {config}: cannot read configuration")


def test_serve_with_bad_keys(tmp_path: Path) -> None:
    """A missing CURVE key file is named."""
    key = tmp_path / "server.key"
    result = run_cli(
        "serve", "--curve", str(key), "--clients", str(tmp_path / "c.toml"), "--data", str(tmp_path)
    )
    failure(result, 2, f"agent-actors: {key}: cannot read the key pair")


# -- call: usage errors (2) and failed calls (1) ---------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "texts"),
    [
        ("127.0.0.1:7555", ["has no scheme", "write tcp://127.0.0.1:7555"]),
        ("http://127.0.0.1:7555/", ["unsupported scheme 'http://'", "write tcp://127.0.0.1:7555"]),
        ("tcp://*:7555", ["a call needs the server's host"]),
    ],
)
def test_call_with_a_malformed_endpoint(endpoint: str, texts: list[str]) -> None:
    """A malformed endpoint is a usage error and nothing is sent."""
    failure(run_cli("call", endpoint, "system/stats"), 2, *texts)


def test_call_with_an_unresolvable_host() -> None:
    """An unknown host is a DNS error naming the host, not a deadline."""
    result = run_cli("call", "tcp://nohost.invalid:7555", "system/stats", "--timeout", "10")
    failure(result, 1, "cannot resolve host 'nohost.invalid'")


@pytest.mark.parametrize(("timeout", "waited"), [("1", "1"), ("8", "5")])
def test_call_with_no_server_listening(timeout: str, waited: str) -> None:
    """No server at a tcp endpoint is one message whatever --timeout is: who did not answer,
    within how long, and what to check."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    started = time.monotonic()
    result = run_cli("call", endpoint, "system/stats", "--timeout", timeout)
    failure(
        result,
        1,
        f"unavailable: no server answered at {endpoint} within {waited} s",
        "is `agent-actors serve` running there",
    )
    assert time.monotonic() - started < 30


def test_call_an_ipc_endpoint_without_a_socket_file(tmp_path: Path) -> None:
    """An ipc endpoint with no socket file fails at once, naming the path."""
    result = run_cli("call", f"ipc://{tmp_path}/none.sock", "system/stats")
    failure(result, 1, f"no server at ipc://{tmp_path}/none.sock", "does not exist")


def test_call_with_bad_keys(tmp_path: Path) -> None:
    """A missing client key file is a usage error naming it; --key alone asks for the server's
    key instead of being ignored."""
    key = tmp_path / "me.key"
    secured = ["--server-key", "x" * 40, "--key", str(key)]
    failure(run_cli("call", "tcp://127.0.0.1:1", "system/stats", *secured), 2, str(key))
    alone = run_cli("call", "tcp://127.0.0.1:1", "system/stats", "--key", str(key))
    failure(alone, 2, "--key needs --server-key")


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["novalue"], "expected key=text or key:=json"),
        (["n:={bad"], "invalid JSON"),
        (["--timeout", "-1"], "--timeout must be a positive number of seconds"),
    ],
)
def test_call_with_bad_arguments(args: list[str], text: str) -> None:
    """Bad items and a bad --timeout are usage errors."""
    failure(run_cli("call", "tcp://127.0.0.1:1", "system/stats", *args), 2, text)


def test_a_string_for_an_integer_suggests_json(server: Server) -> None:
    """``limit=10`` on an integer parameter says what was wrong and suggests ``limit:=10``."""
    result = run_cli("call", server.tcp, "sessions/list", "limit=10")
    failure(result, 1, "expected an integer, got a string", "write `limit:=10`")
    assert result.stderr.startswith("arguments-invalid: ")


def test_a_missing_agent_id_mentions_the_agent_option(server: Server) -> None:
    """A call that needs an agent and got none points at --agent."""
    failure(
        run_cli("call", server.ipc, "diagnostics/echo"),
        1,
        "missing argument 'agentId'",
        "--agent ID",
    )


def test_an_unknown_endpoint_gets_the_close_names(server: Server) -> None:
    """A misspelt endpoint gets "did you mean" with the name the server describes."""
    result = run_cli("call", server.tcp, "sessions/lst")
    failure(result, 1, "unknown-endpoint: unknown endpoint 'sessions/lst'")
    assert "hint: did you mean sessions/list?" in result.stderr.splitlines()


def test_an_unknown_argument_gets_the_close_names(server: Server) -> None:
    """A misspelt argument gets the parameter it was likely meant for."""
    result = run_cli("call", server.tcp, "sessions/list", "limt:=10")
    failure(result, 1, "unknown argument(s) 'limt'", "did you mean limit (not limt)?")


def test_an_interrupted_call_exits_quietly(server: Server) -> None:
    """SIGINT during a call ends it with status 130 and no traceback."""
    agent = json.loads(run_cli("call", server.tcp, "agents/create").stdout)["agentId"]
    process = subprocess.Popen(
        [
            *(PYTHON, "-m", "actors", "call", server.tcp, "diagnostics/sleep", "seconds:=30"),
            *("--agent", agent, "-v"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert "Traceback" not in err


def test_output_cut_short_is_no_traceback(server: Server) -> None:
    """A reader that stops reading (``… | head``) gets no traceback on stderr."""
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "w") as closed:
        result = subprocess.run(
            [PYTHON, "-m", "actors", "call", server.tcp, "system/describe"],
            stdout=closed,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr


def test_an_unexpected_error_is_one_line_and_a_traceback_on_request() -> None:
    """A bug is reported in one line with what to do; --log-level debug shows its traceback."""
    program = (
        "import sys\n"
        "import actors.cli._call as call\n"
        "def broken(args): raise RuntimeError('boom')\n"
        "call.run_call = broken\n"
        "from actors.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    argv = [PYTHON, "-c", program, "call", "tcp://127.0.0.1:1", "system/stats"]
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    failure(plain, 1, "agent-actors: unexpected error: RuntimeError: boom", "--log-level debug")
    debug = subprocess.run(
        [*argv, "--log-level", "debug"], capture_output=True, text=True, timeout=60, check=False
    )
    assert debug.returncode == 1
    assert "Traceback" in debug.stderr and "RuntimeError: boom" in debug.stderr


# -- --version, logging, the ipc socket file --------------------------------------------------


def test_version() -> None:
    """``--version`` prints the package version and the protocol, and exits 0."""
    result = run_cli("--version")
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first == f"agent-actors {version('agent-actors')}"
    assert second.startswith("protocol v1, Python ")


def test_json_logs_carry_the_call_fields(server: Server) -> None:
    """``--log-format json -v``: every stderr line is one JSON object with time, level, logger,
    message and the call's structured fields; the result stays on stdout."""
    result = run_cli("--log-format", "json", "call", server.tcp, "system/stats", "-v")
    assert result.returncode == 0, result.stderr
    assert "callsTotal" in json.loads(result.stdout)
    records = [json.loads(line) for line in result.stderr.splitlines()]
    [call] = [r for r in records if r["logger"] == "actors.cli.call"]
    assert {"time", "level", "logger", "message"} <= call.keys()
    assert call["level"] == "INFO" and call["time"].endswith("Z")
    assert call["endpoint"] == server.tcp and call["method"] == "system/stats"
    assert call["outcome"] == "ok" and call["duration_ms"] >= 0


def test_json_format_reports_a_failure_as_a_record(server: Server) -> None:
    """With ``--log-format json`` a failure is one JSON record with its code and hints."""
    result = run_cli("call", server.tcp, "sessions/lst", "--log-format", "json")
    assert result.returncode == 1
    [record] = [json.loads(line) for line in result.stderr.splitlines()]
    assert record["level"] == "ERROR" and record["code"] == "unknown-endpoint"
    assert record["exit_status"] == 1 and "did you mean sessions/list?" in record["hints"]


def test_verbosity(server: Server) -> None:
    """``-v`` shows the info record of a call in text; by default and with ``-q`` there is none."""
    verbose = run_cli("-v", "call", server.tcp, "system/stats")
    assert "agent-actors: info: call system/stats: ok [actors.cli.call]" in verbose.stderr
    assert f"endpoint={server.tcp}" in verbose.stderr
    for quiet in ([], ["-q"], ["--log-level", "error", "-v"]):
        assert run_cli(*quiet, "call", server.tcp, "system/stats").stderr == ""


def test_the_ipc_socket_file_is_removed_after_a_graceful_stop(tmp_path: Path) -> None:
    """SIGTERM stops the server with status 0 and its ipc socket file is gone."""
    stopped = Server(tmp_path)
    assert stopped.ipc_path.is_socket()
    status, err = stopped.stop()
    assert status == 0, err
    assert not stopped.ipc_path.exists()
