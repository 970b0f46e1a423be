"""Real disk faults for tests: a small tmpfs filled up, and a directory made read-only.

Both need mount(8) and the right to mount (root, or CAP_SYS_ADMIN); where that is missing the
test is skipped with a message. Whatever a test mounted is unmounted when it leaves the
``with`` block, also when it fails.

Read-only is made with a read-only bind mount stacked on the directory, not with
``mount -o remount,ro``: root ignores permission bits, and Linux refuses to remount a file
system read-only while a file on it is open for writing (a running server's projection cache and
session writers are), whereas every file opened through the stacked mount from then on is
read-only (EROFS) while descriptors opened before stay writable.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["FILLER", "fill", "free", "read_only", "tmpfs"]

FILLER = ".filler"
"""The file `fill` writes to use up a file system's space."""


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False)


def _needs_mount() -> None:
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("disk fault tests need mount(8) and umount(8)")


def _unmount(directory: Path) -> None:
    if subprocess.run(["umount", str(directory)], check=False).returncode != 0:
        subprocess.run(["umount", "-l", str(directory)], check=False)


@contextmanager
def tmpfs(directory: Path, *, size: str = "4m") -> Iterator[Path]:
    """Mount a tmpfs of ``size`` on ``directory`` (created if missing); skip if not allowed."""
    _needs_mount()
    directory.mkdir(parents=True, exist_ok=True)
    mounted = _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        _unmount(directory)


def fill(directory: Path) -> int:
    """Use up every free block of the file system holding ``directory`` (a `FILLER` file);
    returns the bytes written."""
    written = 0
    chunk = b"\0" * 65536
    fd = os.open(directory / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while len(chunk) >= 1:
            try:
                written += os.write(fd, chunk)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(fd)
    return written


def free(directory: Path) -> None:
    """Give back the space `fill` took."""
    (directory / FILLER).unlink(missing_ok=True)


@contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """Stack a read-only bind mount of ``directory`` on itself; skip if mounting is denied."""
    _needs_mount()
    bound = _mount("--bind", str(directory), str(directory))
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount (needs root or CAP_SYS_ADMIN): {bound.stderr.strip()}")
    try:
        remounted = _mount("-o", "remount,bind,ro", str(directory))
        if remounted.returncode != 0:
            pytest.skip(f"cannot remount read-only: {remounted.stderr.strip()}")
        probe = directory / ".write-probe"
        with pytest.raises(OSError, match="Read-only file system"):
            probe.write_bytes(b"")
        yield
    finally:
        _unmount(directory)
