"""Filesystem primitives that never cross a symbolic link below the root.

Upstream checks each prefix of a directory-mode path with ``lstat`` and then reads the target by
path, which leaves a window in which a swapped-in link is followed once (spec §4.7, §9.17). Where
the platform allows it we close that window: every directory below the root is opened relative to
its parent's descriptor with ``O_NOFOLLOW``, and the index re-checks each subdirectory's identity
after opening it. The observable results are upstream's; only the race is gone.

Every function here swallows filesystem errors: "the affected listing or subtree contributes
nothing and the call resolves normally" (spec §6.2).
"""

from __future__ import annotations

import os
import stat
from typing import Final, TypeAlias

__all__ = [
    "DirectoryHandle",
    "Identity",
    "ListedEntry",
    "close_directory",
    "device_of",
    "open_beneath",
    "open_root",
    "open_subdirectory",
    "read_entries",
    "read_small_text",
]

Identity: TypeAlias = tuple[int, int]
"""``(st_dev, st_ino)`` of a directory, recorded when its parent was listed."""

ListedEntry: TypeAlias = tuple[str, bool, Identity | None]
"""``(name, is_directory, identity)``; identity only for directories and only when asked for."""

DirectoryHandle: TypeAlias = int | str
"""An open directory descriptor, or a path where descriptors cannot be used (Windows)."""

_O_DIRECTORY: Final = getattr(os, "O_DIRECTORY", 0)
_O_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
# O_PATH (Linux) opens a directory for traversal only, so an intermediate directory with search
# but no read permission is crossed exactly as upstream's lstat walk crosses it.
_O_PATH: Final = getattr(os, "O_PATH", 0)
_READ_FLAGS: Final = os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC
_TRAVERSE_FLAGS: Final = (_O_PATH or os.O_RDONLY) | _O_DIRECTORY | _O_CLOEXEC

USE_DESCRIPTORS: bool = bool(
    _O_NOFOLLOW
    and _O_DIRECTORY
    and os.open in os.supports_dir_fd
    and os.scandir in os.supports_fd
    and os.stat in os.supports_dir_fd
)
"""Whether the race-free descriptor walk is available (POSIX); otherwise upstream's lstat walk.
Read at call time, so tests can exercise the fallback on POSIX too."""

_ERRORS: Final = (OSError, ValueError)  # ValueError: NUL or unencodable characters in a path
_MAX_IGNORE_FILE_BYTES: Final = 1 << 20


def close_directory(handle: DirectoryHandle) -> None:
    """Release a handle returned by this module."""
    if isinstance(handle, int):
        os.close(handle)


def open_root(root: str) -> DirectoryHandle | None:
    """Open the root itself for reading, following links ("used as given", spec §4.1)."""
    if not USE_DESCRIPTORS:
        return root if os.path.isdir(root) else None
    try:
        return os.open(root, _READ_FLAGS)
    except _ERRORS:
        return None


def open_beneath(root: str, segments: tuple[str, ...]) -> DirectoryHandle | None:
    """Open the directory ``root/segments...`` for reading, refusing to cross any link.

    "Walk every segment of that relative path from the root downward and lstat each prefix: if
    any is a symbolic link (junctions count) or not a directory, or cannot be stat'ed, return
    empty" (spec §4.3 step 4).

    Returns:
        A handle, or ``None`` when a segment is a link, not a directory, or unreadable.
    """
    if not segments:
        return open_root(root)
    if not USE_DESCRIPTORS:
        return _open_beneath_by_path(root, segments)
    try:
        current = os.open(root, _TRAVERSE_FLAGS)
    except _ERRORS:
        return None
    try:
        for depth, name in enumerate(segments):
            last = depth == len(segments) - 1
            flags = (_READ_FLAGS if last else _TRAVERSE_FLAGS) | _O_NOFOLLOW
            # With O_NOFOLLOW | O_DIRECTORY a link fails (ELOOP or ENOTDIR), as does a file.
            child = os.open(name, flags, dir_fd=current)
            os.close(current)
            current = child
    except _ERRORS:
        os.close(current)
        return None
    return current


def _open_beneath_by_path(root: str, segments: tuple[str, ...]) -> str | None:
    path = root
    for name in segments:
        path = os.path.join(path, name)
        try:
            info = os.lstat(path)
        except _ERRORS:
            return None
        if not stat.S_ISDIR(info.st_mode) or _is_link_like(info):
            return None
    return path


def _is_link_like(info: os.stat_result) -> bool:
    # Windows junctions are reparse points that lstat does not report as links.
    attributes = getattr(info, "st_file_attributes", 0)
    return stat.S_ISLNK(info.st_mode) or bool(
        attributes & getattr(stat, "FILE_ATTRIBUTE_REPARSE_POINT", 0)
    )


def open_subdirectory(
    root: str, relative: str, identity: Identity | None
) -> DirectoryHandle | None:
    """Open an indexed subdirectory for reading, only if it is still the directory we listed.

    The index queues paths, not descriptors (a breadth-first queue may hold thousands); so the
    final component is opened with ``O_NOFOLLOW`` and the directory's ``(dev, inode)`` must equal
    what its parent's listing recorded (the parent's device and the entry's ``d_ino``, which costs
    no system call), which defeats a parent swapped for a link meanwhile. A mismatch is either
    such a race or a mount point (whose ``d_ino`` is the covered directory's): then the path is
    opened again one component at a time without following links (:func:`open_beneath`), which
    accepts a mount point and refuses a link.

    Args:
        root: the absolute root.
        relative: the directory's root-relative, ``/``-separated path.
        identity: ``(dev, ino)`` recorded when the parent was listed, or ``None``.
    """
    path = os.path.join(root, relative.replace("/", os.sep))
    if not USE_DESCRIPTORS:
        try:
            info = os.lstat(path)
        except _ERRORS:
            return None
        if not stat.S_ISDIR(info.st_mode) or _is_link_like(info):
            return None
        if identity is not None and (info.st_dev, info.st_ino) != identity:
            return _open_beneath_by_path(root, tuple(relative.split("/")))
        return path
    try:
        handle = os.open(path, _READ_FLAGS | _O_NOFOLLOW)
    except _ERRORS:
        return None
    try:
        info = os.fstat(handle)
    except OSError:
        os.close(handle)
        return None
    if identity is not None and (info.st_dev, info.st_ino) != identity:
        os.close(handle)
        return open_beneath(root, tuple(relative.split("/")))
    return handle


def device_of(handle: DirectoryHandle) -> int | None:
    """The device of an open directory (the first half of its children's identities)."""
    try:
        if isinstance(handle, int):
            return os.fstat(handle).st_dev
        return os.lstat(handle).st_dev
    except _ERRORS:
        return None


def read_entries(
    handle: DirectoryHandle, *, identities: bool = False, device: int | None = None
) -> list[ListedEntry]:
    """List real directories and regular files of an open directory, in no particular order.

    "anything else — symbolic links to files or directories, broken links, sockets, FIFOs,
    devices, junctions — is ignored" (spec §4.2). Names that are not valid UTF-8 are skipped too:
    they cannot be typed in a query nor sent on the wire (spec §9.10). The types come from the
    directory entries themselves (``d_type``), so no entry costs a ``stat`` on POSIX.

    Args:
        handle: from :func:`open_root`, :func:`open_beneath` or :func:`open_subdirectory`; left
            open (the entries' type checks use it until this returns).
        identities: also record each directory's ``(dev, inode)``: the listed directory's device
            and the entry's ``d_ino``.
        device: the listed directory's device when the caller knows it (saves an ``fstat``).
    """
    listed: list[ListedEntry] = []
    if identities and device is None:
        device = device_of(handle)
    elif not identities:
        device = None
    windows = os.name == "nt"
    append = listed.append
    try:
        with os.scandir(handle) as iterator:
            for entry in iterator:
                name = entry.name
                if not name.isascii() and not _is_utf8(name):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if windows and _is_link_like(entry.stat(follow_symlinks=False)):
                            continue  # a junction: "reported as links and therefore skipped"
                        if device is None:
                            append((name, True, None))
                        else:
                            append((name, True, (device, entry.inode())))
                    elif entry.is_file(follow_symlinks=False):
                        append((name, False, None))
                except OSError:
                    continue  # vanished or unreadable entry: it contributes nothing
    except _ERRORS:
        return []
    return listed


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_small_text(handle: DirectoryHandle, name: str) -> str | None:
    """Read a small text file (an ignore file) of an open directory without following links.

    Returns:
        The decoded text, or ``None`` when it is missing, a link, unreadable or over 1 MiB.
    """
    try:
        if isinstance(handle, int):
            file = os.open(name, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=handle)
        else:
            path = os.path.join(handle, name)
            if _is_link_like(os.lstat(path)):
                return None
            file = os.open(path, os.O_RDONLY | _O_CLOEXEC)
    except _ERRORS:
        return None
    try:
        if not stat.S_ISREG(os.fstat(file).st_mode):
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= _MAX_IGNORE_FILE_BYTES:
            chunk = os.read(file, _MAX_IGNORE_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(file)
    if len(data) > _MAX_IGNORE_FILE_BYTES:
        return None
    return data.decode("utf-8", errors="replace")
