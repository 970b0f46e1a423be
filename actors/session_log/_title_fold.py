"""The title and subagent descriptor of a log, kept current while its writer appends (§7, §8).

A reader folds both once over a whole log (`session_title`, `fold_subagent_descriptor`); the
writer starts from that fold and updates it event by event, so it never reads its log again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actors.session_log._sequence import EventSequence
from actors.session_log._titles import (
    SessionTitle,
    SubagentDescriptor,
    SubagentDescriptorError,
    fold_subagent_descriptor,
    session_title,
)

__all__ = ["TitleFold"]


class TitleFold:
    """The current `session/title` and the first `subagent/descriptor` of a growing log.

    Args:
        title: the current title.
        descriptor: the first valid descriptor.
        descriptor_seen: whether the log holds any descriptor (valid or not: the first wins).
    """

    def __init__(
        self,
        *,
        title: SessionTitle | None = None,
        descriptor: SubagentDescriptor | None = None,
        descriptor_seen: bool = False,
    ) -> None:
        self._title = title
        self._descriptor = descriptor
        self._descriptor_seen = descriptor_seen

    @classmethod
    def of(cls, events: Sequence[Mapping[str, Any]]) -> TitleFold:
        """The fold of a loaded log's events."""
        try:
            descriptor = fold_subagent_descriptor(events)
        except SubagentDescriptorError:
            descriptor = None
        singles = events.singles() if isinstance(events, EventSequence) else iter(events)
        seen = any(event.get("type") == "subagent/descriptor" for event in singles)
        return cls(title=session_title(events), descriptor=descriptor, descriptor_seen=seen)

    def copy(self) -> TitleFold:
        """An independent copy (to go back to when a batch is discarded)."""
        return TitleFold(
            title=self._title, descriptor=self._descriptor, descriptor_seen=self._descriptor_seen
        )

    @property
    def title(self) -> SessionTitle | None:
        """The current title (last `session/title`)."""
        return self._title

    @property
    def descriptor(self) -> SubagentDescriptor | None:
        """The first valid `subagent/descriptor`, if any."""
        return self._descriptor

    def track(self, event: Mapping[str, Any]) -> None:
        """Fold one appended event."""
        kind = event["type"]
        if kind == "session/title":
            self._title = session_title((event,))
        elif kind == "subagent/descriptor" and not self._descriptor_seen:
            # §8: "folding takes the first descriptor event (first wins)".
            self._descriptor_seen = True
            try:
                self._descriptor = fold_subagent_descriptor((event,))
            except SubagentDescriptorError:
                self._descriptor = None
