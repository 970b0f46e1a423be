"""The command line's security: ``keys``, ``serve --curve``/``--insecure``, client keys from
files and the environment (issue 9, item 1)."""

from __future__ import annotations

import json
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from actors._keys import (
    ENV_CLIENT_KEY,
    ENV_CLIENT_SECRET,
    ENV_SERVER_KEY,
    KeyFileError,
    client_security,
    generate_key_files,
    read_key_pair,
    read_public_key,
)
from actors.cli._demo import start_server_process
from actors.cli._main import main
from actors.cli._security import exposure_problem
from wire._security import is_loopback


@pytest.mark.parametrize(
    ("endpoint", "loopback"),
    [
        ("tcp://127.0.0.1:7555", True),
        ("tcp://127.1.2.3:1", True),
        ("tcp://localhost:7555", True),
        ("tcp://[::1]:7555", True),
        ("tcp://lo:7555", True),
        ("ipc:///tmp/x.sock", True),
        ("inproc://x", True),
        ("tcp://*:7555", False),
        ("tcp://0.0.0.0:7555", False),
        ("tcp://[::]:7555", False),
        ("tcp://10.0.0.5:7555", False),
        ("tcp://eth0:7555", False),
        ("tcp://example.com:7555", False),
    ],
)
def test_is_loopback(endpoint: str, loopback: bool) -> None:
    """Only loopback addresses, ipc and inproc count as local."""
    assert is_loopback(endpoint) is loopback


def test_exposure_rule() -> None:
    """A non-loopback tcp endpoint needs --curve or --insecure; loopback and ipc never do."""
    local = ["tcp://127.0.0.1:1", "ipc:///tmp/s"]
    assert exposure_problem(local, curve=False, insecure=False) is None
    exposed = [*local, "tcp://*:1"]
    problem = exposure_problem(exposed, curve=False, insecure=False)
    assert problem is not None and "tcp://*:1" in problem and "--curve" in problem
    assert exposure_problem(exposed, curve=True, insecure=False) is None
    assert exposure_problem(exposed, curve=False, insecure=True) is None


def test_serve_refuses_a_public_endpoint_without_curve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``serve --endpoint tcp://0.0.0.0:…`` exits 2 before binding anything."""
    status = main(["serve", "--endpoint", "tcp://0.0.0.0:7999", "--data", str(tmp_path)])
    assert status == 2
    assert "refusing to serve tcp://0.0.0.0:7999 without encryption" in capsys.readouterr().err


def test_serve_curve_needs_an_allowlist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--curve`` without ``--clients`` (and the reverse) is a usage error."""
    key = generate_key_files(tmp_path, "server")[0]
    assert main(["serve", "--curve", str(key), "--data", str(tmp_path)]) == 2
    assert "--curve needs --clients" in capsys.readouterr().err
    assert main(["serve", "--clients", str(key), "--data", str(tmp_path)]) == 2
    assert "--clients needs --curve" in capsys.readouterr().err


def test_keys_command_writes_owner_only_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``keys NAME`` writes NAME.key and NAME.pub with mode 0600, prints the public key, and
    refuses to overwrite them."""
    assert main(["keys", "ide", "--dir", str(tmp_path / "k")]) == 0
    out = capsys.readouterr().out
    secret, public = tmp_path / "k" / "ide.key", tmp_path / "k" / "ide.pub"
    for path in (secret, public):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    pair = read_key_pair(secret)
    assert read_public_key(str(public)) == pair.public
    assert pair.public.decode() in out
    assert main(["keys", "ide", "--dir", str(tmp_path / "k")]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert read_key_pair(secret) == pair


def test_key_names_cannot_escape_the_directory(tmp_path: Path) -> None:
    """A key name with a path separator or a leading dot is refused."""
    for name in ("../evil", "a/b", ".hidden", ""):
        with pytest.raises(KeyFileError):
            generate_key_files(tmp_path, name)


def test_key_pair_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    """A key pair file with group or other permissions is refused, as ssh does."""
    secret, _ = generate_key_files(tmp_path, "s")
    secret.chmod(0o644)
    with pytest.raises(KeyFileError, match="too open"):
        read_key_pair(secret)


def test_key_pair_halves_must_match(tmp_path: Path) -> None:
    """A key pair file whose public half belongs to another secret is refused."""
    first, _ = generate_key_files(tmp_path, "a")
    second, _ = generate_key_files(tmp_path, "b")
    mixed = tmp_path / "mixed.key"
    a_text, b_text = first.read_text(), second.read_text()
    public_line = next(line for line in a_text.splitlines() if line.startswith("public"))
    secret_line = next(line for line in b_text.splitlines() if line.startswith("secret"))
    mixed.write_text(f"{public_line}\n{secret_line}\n")
    mixed.chmod(0o600)
    with pytest.raises(KeyFileError, match="does not belong"):
        read_key_pair(mixed)


def test_client_keys_from_files_and_environment(tmp_path: Path) -> None:
    """The client finds the server key and its own pair in arguments or the environment;
    a server key without a client key is an error; no server key means plain."""
    server_key, server_pub = generate_key_files(tmp_path, "server")
    client_key, _ = generate_key_files(tmp_path, "client")
    server, client = read_key_pair(server_key), read_key_pair(client_key)
    assert client_security(environ={}) is None
    from_files = client_security(str(server_pub), client_key, environ={})
    assert from_files is not None
    assert (from_files.server_key, from_files.keys) == (server.public, client)
    env = {ENV_SERVER_KEY: server.public.decode(), ENV_CLIENT_KEY: str(client_key)}
    assert client_security(environ=env) == from_files
    env = {ENV_SERVER_KEY: str(server_pub), ENV_CLIENT_SECRET: client.secret.decode()}
    assert client_security(environ=env) == from_files
    with pytest.raises(KeyFileError, match="no client key"):
        client_security(environ={ENV_SERVER_KEY: server.public.decode()})
    with pytest.raises(KeyFileError):
        client_security(environ={ENV_SERVER_KEY: "~" * 40, ENV_CLIENT_KEY: str(client_key)})


async def test_serve_curve_end_to_end(tmp_path: Path) -> None:
    """A real ``serve --curve`` process on tcp: ``call`` with a listed write key succeeds,
    ``call`` with a read key gets unauthorized for a write, without keys gets no reply."""
    keys = tmp_path / "keys"
    server_key, server_pub = generate_key_files(keys, "server")
    writer_key, writer_pub = generate_key_files(keys, "writer")
    reader_key, reader_pub = generate_key_files(keys, "reader")
    allowlist = keys / "clients.toml"
    allowlist.write_text(
        f'[clients.writer]\nkey = "{read_public_key(str(writer_pub)).decode()}"\n'
        'role = "write"\n'
        f'[clients.reader]\nkey = "{read_public_key(str(reader_pub)).decode()}"\n'
        'role = "read"\n'
    )
    allowlist.chmod(0o600)
    process, [address] = await start_server_process(
        "tcp://127.0.0.1:0",
        tmp_path / "data",
        extra=["--curve", str(server_key), "--clients", str(allowlist)],
    )
    try:

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "actors", "call", address, *args],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )

        secured = ["--server-key", str(server_pub)]
        created = await trio.to_thread.run_sync(
            lambda: cli("agents/create", "title=x", *secured, "--key", str(writer_key))
        )
        assert created.returncode == 0, created.stderr
        agent = json.loads(created.stdout)["agentId"]
        denied = await trio.to_thread.run_sync(
            lambda: cli(
                "sessions/setTitle",
                "title=y",
                "--agent",
                agent,
                *secured,
                "--key",
                str(reader_key),
            )
        )
        assert denied.returncode == 1 and denied.stderr.startswith("unauthorized:"), denied
        listed = await trio.to_thread.run_sync(
            lambda: cli("sessions/list", *secured, "--key", str(reader_key))
        )
        assert listed.returncode == 0, listed.stderr
        plain = await trio.to_thread.run_sync(lambda: cli("sessions/list", "--timeout", "1.5"))
        assert plain.returncode == 1
        assert "no welcome" in plain.stderr or "deadline-exceeded" in plain.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
