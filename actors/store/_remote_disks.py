"""Whether a path lives on a network file system, read from ``/proc/self/mountinfo``.

An append written on the event loop (`actors.store._write_placement`) holds the whole server
while it runs. On a local disk that is a fraction of a millisecond; on a network file system a
write can hang for as long as the server behind it is gone. So a store whose writable roots
include one on a network file system writes every append in a worker thread, as if
``[sessions] inlineWrites`` were false.

Linux only: elsewhere (no ``/proc/self/mountinfo``) every path counts as local.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path

from actors.store._write_placement import INLINE_BYTES, WritePlacement

__all__ = ["NETWORK_FILE_SYSTEMS", "network_file_system", "store_placement"]

log = logging.getLogger("actors.store")

#: File system types (``mountinfo``'s field after ``-``) whose writes can wait on a network.
NETWORK_FILE_SYSTEMS = frozenset(
    {
        "9p",
        "afs",
        "ceph",
        "cifs",
        "fuse.gcsfuse",
        "fuse.rclone",
        "fuse.s3fs",
        "fuse.sshfs",
        "glusterfs",
        "lustre",
        "ncpfs",
        "nfs",
        "nfs4",
        "smb3",
        "smbfs",
    }
)

_MOUNTINFO = Path("/proc/self/mountinfo")
_OCTAL = re.compile(r"\\([0-7]{3})")


def network_file_system(path: Path, *, mountinfo: str | None = None) -> str | None:
    """The network file system type ``path`` is on, or None (local, or unknown).

    Args:
        path: a directory or file (resolved; it need not exist past its mount point).
        mountinfo: the text of ``/proc/self/mountinfo`` (read when None).
    """
    if mountinfo is None:
        mountinfo = _read_mountinfo()
    target = os.path.realpath(path)
    best: tuple[int, str] | None = None
    for line in mountinfo.splitlines():
        mount, _, filesystem = line.partition(" - ")
        fields, described = mount.split(), filesystem.split()
        if len(fields) < 5 or not described:
            continue
        mount_point, fs_type = _unescape(fields[4]), described[0]
        if _contains(mount_point, target) and (best is None or len(mount_point) >= best[0]):
            # Later lines mount over earlier ones at the same point: the last one wins.
            best = (len(mount_point), fs_type)
    if best is None or best[1] not in NETWORK_FILE_SYSTEMS:
        return None
    return best[1]


def store_placement(
    writable_roots: Sequence[Path], *, inline_writes: bool, mountinfo: str | None = None
) -> WritePlacement:
    """The `WritePlacement` of a store writing under ``writable_roots``: inline writes as
    ``inline_writes`` says, unless a root is on a network file system (logged once)."""
    if inline_writes and writable_roots:
        if mountinfo is None:
            mountinfo = _read_mountinfo()  # once for all the roots
        for root in writable_roots:
            fs_type = network_file_system(root, mountinfo=mountinfo)
            if fs_type is not None:
                log.info(
                    "%s is on %s: appends are written in worker threads (a network file "
                    "system's writes can hang, and an inline write would hold the server)",
                    root,
                    fs_type,
                )
                inline_writes = False
                break
    return WritePlacement(inline_bytes=INLINE_BYTES if inline_writes else -1)


def _read_mountinfo() -> str:
    """``/proc/self/mountinfo``, or nothing where there is none (every path counts as local)."""
    try:
        return _MOUNTINFO.read_text("utf-8", errors="replace")
    except OSError:
        return ""


def _contains(mount_point: str, path: str) -> bool:
    if mount_point == "/":
        return True
    return path == mount_point or path.startswith(mount_point + "/")


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash in octal (\040, \011, \012, \134).
    return _OCTAL.sub(lambda match: chr(int(match.group(1), 8)), field)
