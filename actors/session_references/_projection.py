"""Surface snapshot -> conversation items (session-reference §4.4, newer §2.1).

Only direct human prompts, compaction checkpoints and assistant text are projected;
tool results, system messages, reasoning, tool calls, images and every injected context
(plugins, goals, skills, earlier session references, ...) are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from actors.session_references._jstext import js_canonical

__all__ = [
    "ProjectedItem",
    "ProjectionError",
    "SourceSnapshot",
    "is_compact_checkpoint_source",
    "project_conversation",
]

Role = Literal["user", "assistant"]


class ProjectionError(ValueError):
    """A surface snapshot holds an event that cannot be on a surface."""


def _plain_int(value: object) -> object:
    # JSON may spell integers as `5.0`; JavaScript prints those as `5`.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


@attrs.frozen(kw_only=True)
class SourceSnapshot:
    """One observation of a source session's current surface (``readSurface``).

    ``events`` are the decoded DSH event envelopes (plain dicts) of the current surface,
    in surface order, after the surface fold of session-log-format §6.6.
    """

    #: The session header (``id``, ``version``, ``createdAt``, ``cwd``? ...).
    header: Mapping[str, Any]
    #: Seq of the last raw event of the whole log, or ``None`` for an empty log.
    captured_through_seq: int | None
    #: Current-surface events in surface order.
    events: Sequence[Mapping[str, Any]]

    @classmethod
    def from_surface(cls, surface: Any) -> SourceSnapshot:
        """Adapt a surface observation that carries its header as an object.

        ``surface`` needs ``session`` (a mapping, or an object with ``id``, ``version``,
        ``created_at`` and ``cwd``), ``captured_through_seq`` and ``events``, like the log
        reader's ``SurfaceSnapshot``.
        """
        session = surface.session
        header: Mapping[str, Any]
        if isinstance(session, Mapping):
            header = session
        else:
            header = {
                "type": "session",
                "version": session.version,
                "id": session.id,
                "createdAt": session.created_at,
            }
            if session.cwd is not None:
                header = {**header, "cwd": session.cwd}
        return cls(
            header=header,
            captured_through_seq=surface.captured_through_seq,
            events=tuple(surface.events),
        )

    @property
    def session_id(self) -> str:
        """The header id (what the prompt and the source record name)."""
        session_id = self.header.get("id")
        if not isinstance(session_id, str):
            raise ProjectionError(f"snapshot header has no string id: {session_id!r}")
        return session_id

    @property
    def cwd(self) -> str | None:
        """The header cwd, ``None`` when absent."""
        cwd = self.header.get("cwd")
        return cwd if isinstance(cwd, str) else None

    @property
    def through_seq(self) -> int | None:
        """``captured_through_seq`` with an integral float normalized to ``int``."""
        seq = _plain_int(self.captured_through_seq)
        return seq if isinstance(seq, int) else None

    @property
    def format_version(self) -> object:
        """The header ``version``, verbatim; ``None`` when the header lacks it.

        Upstream writes ``snapshot.session.version`` as ``capturedFormatVersion``; an
        absent value is omitted from the record ("absence identifies version 0").
        """
        return _plain_int(self.header.get("version"))


@attrs.frozen(kw_only=True)
class ProjectedItem:
    """One projected conversation message."""

    #: ``user`` (direct prompt or checkpoint) or ``assistant``.
    role: Role
    #: Text blocks joined with ``\\n`` (never empty).
    text: str
    #: Whether it is a compaction checkpoint (never dropped by retention).
    checkpoint: bool


def is_compact_checkpoint_source(source: object) -> bool:
    """Recognize the compaction checkpoint marker: ``kind == 'plugin'``, ``plugin == 'compact'``.

    ``compactionId`` and the surface op are deliberately not checked (upstream).
    """
    return (
        isinstance(source, Mapping)
        and source.get("kind") == "plugin"
        and source.get("plugin") == "compact"
    )


def _text_of(content: object) -> str:
    """Join the string ``text`` of every ``text`` block with ``\\n``; ignore the rest."""
    # ``type(...) is`` first: decoded JSON is plain lists and dicts, and the ABC checks
    # behind ``isinstance(..., Sequence)`` cost more than the rest of the projection.
    if type(content) is not list and (
        not isinstance(content, Sequence) or isinstance(content, str | bytes)
    ):
        return ""
    texts = [
        block["text"]
        for block in content
        if (type(block) is dict or isinstance(block, Mapping))
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    return js_canonical("\n".join(texts))


def project_conversation(events: Sequence[Mapping[str, Any]]) -> list[ProjectedItem]:
    """Project current-surface events to conversation items, in surface order.

    ``user/message`` is kept when its source is ``{kind: 'user'}`` or the compaction
    checkpoint marker; ``assistant/message`` contributes the text blocks of
    ``data.message.content`` (interrupted messages included); ``tool/result`` and
    ``system/message`` are skipped. Empty texts are skipped (two empty blocks join to
    ``"\\n"``, which is kept).

    Raises:
        ProjectionError: An event type that cannot be on a surface (upstream asserts
            this unreachable); the message names the event's seq and type.
    """
    items: list[ProjectedItem] = []
    for event in events:
        kind = event.get("type")
        data = event.get("data")
        data = data if type(data) is dict or isinstance(data, Mapping) else {}
        if kind == "user/message":
            source = data.get("source")
            user = (type(source) is dict or isinstance(source, Mapping)) and source.get(
                "kind"
            ) == "user"
            checkpoint = not user and is_compact_checkpoint_source(source)
            if not (user or checkpoint):
                continue
            text = _text_of(data.get("content"))
            if text:
                items.append(ProjectedItem(role="user", text=text, checkpoint=checkpoint))
        elif kind == "assistant/message":
            message = data.get("message")
            content = (
                message.get("content")
                if type(message) is dict or isinstance(message, Mapping)
                else None
            )
            text = _text_of(content)
            if text:
                items.append(ProjectedItem(role="assistant", text=text, checkpoint=False))
        elif kind in ("tool/result", "system/message"):
            continue
        else:
            raise ProjectionError(
                f"event seq {event.get('seq')!r} of type {kind!r} cannot be on a session surface"
            )
    return items
