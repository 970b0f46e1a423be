"""Real etcd members for tests: temp ``--data-dir``, free loopback ports, killed at teardown.

``etcd`` comes from Debian's ``etcd-server`` package (3.4.x). Tests that need it are marked
``etcd`` and skip with a message when the binary is missing (see ``conftest.py``).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path

import attrs

#: Raft timings for tests: with ``--election-timeout 50`` etcd's minimum lease TTL is 1 s
#: (``ceil(1.5 × election timeout)``, 2 s with the defaults), so lease expiry tests stay short.
FAST_RAFT = ("--heartbeat-interval", "10", "--election-timeout", "50")


def etcd_binary() -> str | None:
    """Path of the ``etcd`` binary, or None when it is not installed."""
    return shutil.which("etcd")


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@attrs.define
class EtcdCluster:
    """Running etcd members; ``urls`` are their client (JSON gateway) base URLs."""

    urls: list[str]
    processes: list[subprocess.Popen[bytes]]
    logs: list[Path]
    commands: list[list[str]] = attrs.field(factory=list)

    @property
    def etcd_url(self) -> str:
        """The ``etcd://h:p[,h:p]`` form ``serve --coordinator`` takes."""
        return "etcd://" + ",".join(url.removeprefix("http://") for url in self.urls)

    def kill(self, index: int = 0) -> None:
        """SIGKILL member ``index`` (its data directory stays)."""
        self.processes[index].kill()
        self.processes[index].wait(timeout=10)

    def restart(self, index: int = 0, *, timeout: float = 15.0) -> None:
        """Start member ``index`` again on its data directory and ports; wait until healthy."""
        with self.logs[index].open("ab") as out:
            self.processes[index] = subprocess.Popen(
                self.commands[index], stdout=out, stderr=subprocess.STDOUT
            )
        _wait_healthy(self, [index], timeout)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
        for process in self.processes:
            process.wait(timeout=10)


def start_etcd(directory: Path, *, members: int = 1, timeout: float = 15.0) -> EtcdCluster:
    """Start ``members`` etcd members under ``directory`` and wait until they are healthy.

    Raises:
        RuntimeError: etcd did not become healthy within ``timeout`` (its log is quoted).
    """
    binary = etcd_binary()
    if binary is None:
        raise RuntimeError("etcd binary not found on PATH")
    ports = _free_ports(2 * members)
    names = [f"m{i}" for i in range(members)]
    peers = [f"http://127.0.0.1:{ports[2 * i + 1]}" for i in range(members)]
    initial = ",".join(f"{name}={peer}" for name, peer in zip(names, peers, strict=True))
    cluster = EtcdCluster(urls=[], processes=[], logs=[])
    for i, name in enumerate(names):
        client = f"http://127.0.0.1:{ports[2 * i]}"
        log = directory / f"etcd-{name}.log"
        command = [
            binary,
            "--name", name,
            "--data-dir", str(directory / f"etcd-{name}"),
            "--listen-client-urls", client,
            "--advertise-client-urls", client,
            "--listen-peer-urls", peers[i],
            "--initial-advertise-peer-urls", peers[i],
            "--initial-cluster", initial,
            "--initial-cluster-state", "new",
            "--initial-cluster-token", f"test-{directory.name}",
            *(FAST_RAFT if members == 1 else ()),
        ]  # fmt: skip
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        cluster.commands.append(command)
        cluster.urls.append(client)
        cluster.processes.append(process)
        cluster.logs.append(log)
    try:
        _wait_healthy(cluster, range(members), timeout)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _wait_healthy(cluster: EtcdCluster, indexes: Iterable[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for i in indexes:
        url, process, log = cluster.urls[i], cluster.processes[i], cluster.logs[i]
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"etcd at {url} did not become healthy:\n{tail}")
            time.sleep(0.05)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=1) as response:
            return b'"true"' in response.read()
    except OSError:
        return False
