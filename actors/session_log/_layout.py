"""Directory layout and path encodings of a DSH sessions root.

`session-log-format` §2: one directory per normalised cwd, one directory per session,
one transcript per session at a fixed name::

    <root>/--<project-key>--/<encoded-session-id>/session.jsonl.zstd   (or session.jsonl)

A root holds one encoding; the retired flat layout (a transcript file directly inside a
project directory) is an error, not ignored.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from actors.session_log._errors import LogLayoutError

__all__ = [
    "MAX_SEGMENT_BYTES",
    "NO_CWD_DIR",
    "Compression",
    "compression_of",
    "decode_segment",
    "encode_segment",
    "find_session_log",
    "fits_one_segment",
    "iter_session_logs",
    "log_path",
    "log_suffix",
    "project_dir",
    "project_key",
    "session_dir",
]

Compression = Literal["zstd", "none"]
"""Physical encoding of a transcript: checksummed zstd frames (default) or plain JSONL."""

NO_CWD_DIR = "_no-cwd"
"""Project directory of sessions whose header has no cwd."""

MAX_SEGMENT_BYTES = 255
"""Longest file name Linux and macOS file systems take (``NAME_MAX``): a session id whose
encoded segment is longer cannot have a session directory, so no log of it can exist."""

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_SEPARATORS = frozenset("/\\:")


def log_suffix(compression: Compression) -> str:
    """Return the transcript suffix for `compression` (``.jsonl.zstd`` or ``.jsonl``)."""
    return ".jsonl.zstd" if compression == "zstd" else ".jsonl"


def compression_of(path: str | Path) -> Compression | None:
    """Return the encoding a transcript's file name declares, or None if it declares none."""
    name = os.fspath(path)
    if name.endswith(".jsonl.zstd"):
        return "zstd"
    if name.endswith(".jsonl"):
        return "none"
    return None


def _utf16_units(text: str) -> Iterator[int]:
    # Upstream walks JavaScript strings, i.e. UTF-16 code units: a non-BMP character is
    # two units (a surrogate pair); a lone surrogate is one unit.
    for char in text:
        point = ord(char)
        if point > 0xFFFF:
            point -= 0x10000
            yield 0xD800 | (point >> 10)
            yield 0xDC00 | (point & 0x3FF)
        else:
            yield point


def _escape(unit: int) -> str:
    return f"~{unit:04X}"


def encode_segment(raw: str) -> str:
    """Encode a session id as one safe, injective path segment (§2.2 `encodeSegment`).

    Raises:
        ValueError: `raw` is empty.
    """
    if raw == "":
        raise ValueError("cannot encode an empty path segment")
    if raw == ".":
        return "~002E"
    if raw == "..":
        return "~002E~002E"
    parts: list[str] = []
    for unit in _utf16_units(raw):
        char = chr(unit)
        # "~" itself is escaped so the mapping stays injective.
        parts.append(char if char in _SAFE else _escape(unit))
    return "".join(parts)


def fits_one_segment(session_id: str) -> bool:
    """Whether `session_id` can name a session directory: its encoded segment is a legal file
    name (at most `MAX_SEGMENT_BYTES`)."""
    return session_id != "" and len(encode_segment(session_id).encode()) <= MAX_SEGMENT_BYTES


def decode_segment(segment: str) -> str:
    """The session id a path segment encodes: the inverse of `encode_segment`."""
    units: list[int] = []
    i = 0
    while i < len(segment):
        if segment[i] == "~" and i + 5 <= len(segment):
            units.append(int(segment[i + 1 : i + 5], 16))
            i += 5
        else:
            units.append(ord(segment[i]))
            i += 1
    raw = b"".join(unit.to_bytes(2, "little") for unit in units)
    return raw.decode("utf-16-le", errors="surrogatepass")


def project_key(cwd: str) -> str:
    """Return the (lossy) project directory name for `cwd` (§2.2 `projectKey`).

    Raises:
        ValueError: `cwd` is empty.
    """
    if cwd == "":
        raise ValueError("cannot encode an empty project path")
    parts: list[str] = []
    in_separator_run = False
    for unit in _utf16_units(cwd):
        char = chr(unit)
        if char in _SEPARATORS:
            # "each run of one or more /, \ or : becomes a single -"
            if not in_separator_run:
                parts.append("-")
            in_separator_run = True
            continue
        in_separator_run = False
        parts.append(char if char in _SAFE else _escape(unit))
    slug = "".join(parts).lstrip("-") or "root"
    # "cut to its first 251 characters (the cut may split an escape)"
    return f"--{slug[:251]}--"


def project_dir(root: str | Path, cwd: str | None) -> Path:
    """Return the project directory for `cwd` under `root` (``_no-cwd`` when absent)."""
    return Path(root) / (NO_CWD_DIR if cwd is None else project_key(cwd))


def session_dir(root: str | Path, cwd: str | None, session_id: str) -> Path:
    """Return the directory owned by one session."""
    return project_dir(root, cwd) / encode_segment(session_id)


def log_path(
    root: str | Path, cwd: str | None, session_id: str, compression: Compression = "zstd"
) -> Path:
    """Return the transcript path of a session (§2.1).

    Example (§2.2): cwd ``/projects/my app``, id ``sess/../x~1``, root ``/r`` gives
    ``/r/--projects-my~0020app--/sess~002F..~002Fx~007E1/session.jsonl.zstd``.
    """
    return session_dir(root, cwd, session_id) / f"session{log_suffix(compression)}"


def _opposite(compression: Compression) -> Compression:
    return "none" if compression == "zstd" else "zstd"


def _encoding_mismatch(path: Path, compression: Compression) -> LogLayoutError:
    found = log_suffix(_opposite(compression))
    return LogLayoutError(
        f"session log {path.name} uses {found}, but this backend is configured for "
        f"compression {compression!r}",
        path=path,
    )


def _project_dirs(root: Path) -> list[Path]:
    try:
        entries = sorted(root.iterdir())
    except FileNotFoundError:
        return []
    return [entry for entry in entries if entry.is_dir()]


def _reject_flat_files(project: Path) -> None:
    for entry in sorted(project.iterdir()):
        if entry.is_file() and compression_of(entry.name) is not None:
            raise LogLayoutError(
                "session log uses the retired flat layout (a transcript directly inside a "
                "project directory)",
                path=entry,
            )


def iter_session_logs(root: str | Path, compression: Compression = "zstd") -> Iterator[Path]:
    """Yield every transcript path under `root`, in sorted directory order.

    Raises:
        LogLayoutError: a session directory holds the other encoding's transcript, or a
            project directory holds a flat-layout transcript file.
    """
    for project in _project_dirs(Path(root)):
        _reject_flat_files(project)
        for directory in sorted(project.iterdir()):
            if not directory.is_dir():
                continue
            opposite = directory / f"session{log_suffix(_opposite(compression))}"
            if opposite.exists():
                raise _encoding_mismatch(opposite, compression)
            path = directory / f"session{log_suffix(compression)}"
            if path.is_file():
                yield path


def find_session_log(
    root: str | Path, session_id: str, compression: Compression = "zstd"
) -> Path | None:
    """Find the unique transcript of `session_id` across all project directories (§2.3).

    Returns:
        The transcript path, or None when no project directory holds one.

    Raises:
        LogLayoutError: the id appears in several project directories, a directory holds
            the other encoding, or a flat-layout file is present.
        ValueError: `session_id` is empty.
    """
    if not fits_one_segment(session_id):
        encode_segment(session_id)  # raises for the empty id
        return None  # no directory can have this name; asking the OS would fail ENAMETOOLONG
    segment = encode_segment(session_id)
    matches: list[Path] = []
    for project in _project_dirs(Path(root)):
        _reject_flat_files(project)
        directory = project / segment
        opposite = directory / f"session{log_suffix(_opposite(compression))}"
        if opposite.exists():
            raise _encoding_mismatch(opposite, compression)
        path = directory / f"session{log_suffix(compression)}"
        if path.is_file():
            matches.append(path)
    if len(matches) > 1:
        raise LogLayoutError(
            f'duplicate JSONL session id "{session_id}" appears in multiple project directories',
            path=matches[1],
        )
    return matches[0] if matches else None
