"""An independent transcription of upstream's candidate listing, for tests to compare with.

It follows session-reference.md §1.1 (the listing: every session whose header passes the
JSONL shape check, newest first) and §3, as amended by session-reference-newer.md §3.1-§3.3
(labels from projections only, ``sameWorkspace``, ``displayTitle``, the mention labelled
``displayTitle ?? label``), over raw logs read by the simplest possible reader: the header is
the first line, the title the ``data.title`` of the last ``session/title`` line, the subagent
label the ``label`` of a version-2 ``subagent/descriptor`` line. It imports nothing from
``actors``: the URI and the mention are built here from §2.1 and §2.3 directly.

Upstream's projection cache answers only for sessions its loader could load (newer §3.2), so a
log the loader rejects is labelled by its id; which logs those are is the caller's input (the
fixture table of session-log-format.md §13 says it for the real fixtures).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

__all__ = [
    "ListedSession",
    "expected_candidates",
    "header_passes_shape_check",
    "list_sessions",
    "mention",
    "read_listed",
    "uri",
]

_SAFE = 2**53 - 1


@attrs.frozen(kw_only=True)
class ListedSession:
    """One session as upstream's listing and projections see it."""

    session_id: str
    created_at: int
    cwd: str | None
    #: The projected title; None when no projection answers (no title, or a rejected body).
    title: str | None
    #: The subagent creation label; None when there is none.
    subagent_label: str | None


def _safe_non_negative(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        return False
    if isinstance(value, float) and value == 0 and math.copysign(1.0, value) < 0:
        return False  # -0
    return 0 <= value <= _SAFE


def header_passes_shape_check(record: object) -> bool:
    """session-log-format.md §4.2 layer 1, the check listing applies."""
    if not isinstance(record, dict) or record.get("type") != "session":
        return False
    version = record.get("version")
    if isinstance(version, bool) or not isinstance(version, int | float):
        return False
    if not isinstance(record.get("id"), str):
        return False
    if not _safe_non_negative(record.get("createdAt")):
        return False
    if "delegationDepth" not in record or not _safe_non_negative(record["delegationDepth"]):
        return False
    if "origin" in record and record["origin"] != "subagent":
        return False
    return "agentPreset" not in record or isinstance(record["agentPreset"], str)


def read_listed(path: Path, *, body_loads: bool) -> ListedSession | None:
    """The listing entry of one raw log; None when its header fails the shape check."""
    lines = path.read_bytes().split(b"\n")
    try:
        header = json.loads(lines[0])
    except ValueError:
        return None
    if not header_passes_shape_check(header):
        return None
    title: str | None = None
    label: str | None = None
    if body_loads:
        for line in lines[1:]:
            if not line:
                continue
            event = json.loads(line)
            data = event.get("data")
            if event.get("type") == "session/title" and isinstance(data, dict):
                title = data.get("title") if isinstance(data.get("title"), str) else None
            elif event.get("type") == "subagent/descriptor" and isinstance(data, dict):
                if data.get("version") == 2 and isinstance(data.get("label"), str):
                    label = data["label"]
    cwd = header.get("cwd")
    return ListedSession(
        session_id=header["id"],
        created_at=int(header["createdAt"]),
        cwd=cwd if isinstance(cwd, str) else None,
        title=title,
        subagent_label=label,
    )


def list_sessions(sessions: Iterable[ListedSession]) -> list[ListedSession]:
    """§1.1: newest first, ties by id (``localeCompare``; code points for these ids)."""
    return sorted(sessions, key=lambda s: (-s.created_at, s.session_id))


def uri(session_id: str) -> str:
    """§2.1: ``dsh-session:`` + unpadded base64url of the UTF-8 JSON string literal."""
    literal = json.dumps(session_id, ensure_ascii=False).encode("utf-8")
    return "dsh-session:" + base64.urlsafe_b64encode(literal).rstrip(b"=").decode("ascii")


def mention(session_id: str, label: str) -> str:
    """§2.3: ``@[`` + label with ``\\`` and ``]`` backslash-escaped + ``](`` + URI + ``)``."""
    escaped = label.replace("\\", "\\\\").replace("]", "\\]")
    return f"@[{escaped}]({uri(session_id)})"


def expected_candidates(
    listing: Sequence[ListedSession],
    *,
    agent_id: str,
    agent_cwd: str | None,
    query: str,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """Newer §3.1 steps 2-8 and §3.3: the remote ``candidates`` result, wire keys in order."""
    needle = query.lower()
    others = [s for s in listing if s.session_id != agent_id]
    ranked: list[tuple[int, int, dict[str, Any]]] = []
    for index, session in enumerate(others):
        label = session.title if session.title is not None else session.session_id
        display = session.subagent_label if session.subagent_label is not None else label
        if needle and not (
            needle in session.session_id.lower()
            or (session.cwd is not None and needle in session.cwd.lower())
            or needle in label.lower()
            or needle in display.lower()
        ):
            continue
        if session.cwd is not None and agent_cwd is not None and session.cwd == agent_cwd:
            rank = 0
        elif session.cwd is None:
            rank = 1
        else:
            rank = 2
        element: dict[str, Any] = {
            "sessionId": session.session_id,
            "label": label,
            "displayTitle": display,
        }
        if session.cwd is not None:
            element["cwd"] = session.cwd
        element["sameWorkspace"] = rank == 0
        element["createdAt"] = session.created_at
        element["mention"] = mention(session.session_id, display)
        ranked.append((rank, index, element))
    ranked.sort(key=lambda entry: (entry[0], entry[1]))
    return [element for _rank, _index, element in ranked[:limit]]
