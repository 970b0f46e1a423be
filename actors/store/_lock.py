"""One writer per session across processes: an OS lock file beside each transcript.

A session directory is "reserved for future session-owned artifacts" and "other entries
inside the session directory are ignored by discovery" (`session-log-format` §2.1), so the
lock lives there, as ``<session dir>/session.lock``. It is taken with ``flock(LOCK_EX |
LOCK_NB)``: the kernel drops it when its holder exits, even on SIGKILL, so a crash never
leaves a session locked. ``flock`` locks belong to an open file description, so two stores in
one process exclude each other as well as two processes do. The file itself is never deleted
(unlinking lock files races with the next locker); its content is the holder's pid, for the
error message only.

The lock only excludes writers that take it (our servers). Upstream DSH does not, so a DSH
process writing the same directory is not excluded.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from wire import AgentBusyError

__all__ = ["LOCK_NAME", "SessionLock", "lock_path_for"]

LOCK_NAME = "session.lock"
"""File name of the lock inside a session's directory."""


def lock_path_for(transcript: Path) -> Path:
    """Return the lock file of the session whose transcript is ``transcript``."""
    return transcript.parent / LOCK_NAME


class SessionLock:
    """The exclusive write lock of one session (not reentrant; one holder object).

    Args:
        path: the lock file (see `lock_path_for`).
        session_id: named in the busy error.
    """

    def __init__(self, path: Path, session_id: str) -> None:
        self.path = path
        self.session_id = session_id
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock without waiting (idempotent while held).

        Raises:
            AgentBusyError: another holder (another process, or another store in this one)
                has it; the message names the session, the lock file and the holder's pid.
            OSError: the lock file cannot be created or opened.
        """
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise self._busy(holder) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the pid is informative only; the lock is what counts
        self._fd = fd

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        # Closing the descriptor drops the flock; no unlink (see the module docstring).
        with contextlib.suppress(OSError):
            os.close(fd)

    def _busy(self, holder: int | None) -> AgentBusyError:
        who = f"process {holder}" if holder is not None else "another process"
        return AgentBusyError(
            f'session "{self.session_id}" is being written by {who} (lock {self.path}); '
            "it accepts writes here once that writer passivates it or exits",
            details={
                "sessionId": self.session_id,
                "lockPath": str(self.path),
                **({"holderPid": holder} if holder is not None else {}),
            },
        )


def _read_holder(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
