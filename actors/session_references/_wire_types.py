"""The DSH records this service exchanges, as ``TypedDict`` s under their DSH names.

They are what ``system/describe`` publishes (JSON Schema, see ``wire/_schema.py``) and what
``agent-actors schema --format typescript`` turns back into the DSH interfaces, field for field:
the key names, their order (the order values are built in, which upstream's byte-exact output
depends on), which keys are optional (``NotRequired``: the key is absent, never null) and the
literal unions. Values are plain dicts at run time.

Sources: session-reference §1.2–§1.8 and session-reference-newer §2.2–§2.3 (the DSH
session-reference contract), file-reference §1 for ``FileReferenceCandidate`` (an attrs
class in ``actors.file_references``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from wire import Named

__all__ = [
    "ContentBlock",
    "ImageContent",
    "PreparedReferencedMessage",
    "ReasoningContent",
    "SessionReferenceCandidate",
    "SessionReferenceMentionCandidate",
    "SessionReferenceSource",
    "SessionReferenceSourceReference",
    "TextContent",
    "ToolCallContent",
    "ToolResultContent",
    "UserMessage",
]


class SessionReferenceCandidate(TypedDict):
    """A session the agent may mention (discovery result)."""

    sessionId: str
    #: Projected title, else the session id.
    label: str
    #: A subagent's creation label, else ``label``; this service always sends it.
    displayTitle: NotRequired[str]
    #: The source header's cwd; absent when the header has none.
    cwd: NotRequired[str]
    #: The candidate's cwd is exactly the requesting agent's cwd.
    sameWorkspace: bool
    #: Header creation time, epoch milliseconds.
    createdAt: int


class SessionReferenceMentionCandidate(SessionReferenceCandidate):
    """A candidate with its canonical mention ``@[displayTitle ?? label](dsh-session:…)``."""

    mention: str


class TextContent(TypedDict):
    """A text block of a message."""

    type: Literal["text"]
    text: str


class ReasoningContent(TypedDict):
    """A reasoning block of a message."""

    type: Literal["reasoning"]
    text: str


class ImageContent(TypedDict):
    """An image block of a message (the attachment is the host's)."""

    type: Literal["image"]
    attachment: Any


class ToolCallContent(TypedDict):
    """A tool call requested by the model."""

    type: Literal["tool-call"]
    id: str
    name: str
    arguments: Any


class ToolResultContent(TypedDict):
    """The result of a tool call."""

    type: Literal["tool-result"]
    toolCallId: str
    content: Any
    isError: NotRequired[bool]


#: One block of a message's content (DSH's content blocks, tagged by ``type``).
ContentBlock = Annotated[
    TextContent | ReasoningContent | ImageContent | ToolCallContent | ToolResultContent,
    Named("ContentBlock"),
]


class SessionReferenceSourceReference(TypedDict):
    """One referenced session in a context message's source record."""

    sessionId: str
    #: The normalized label (``label ?? sessionId``).
    label: str
    #: The source's log format generation; absent in records of older versions (version 0).
    capturedFormatVersion: NotRequired[int]
    #: The last surface seq the snapshot saw (``null``: an empty surface).
    capturedThroughSeq: int | None
    compacted: bool
    originalMessages: int
    retainedMessages: int
    omittedMessages: int
    omittedBytes: int
    truncated: bool
    #: Position in the de-duplicated reference list.
    inputIndex: int


class SessionReferenceSource(TypedDict):
    """The durable source of a prepared context message (metadata, not model-visible)."""

    kind: Literal["session-reference"]
    form: Literal["recall"]
    version: Literal[1]
    references: list[SessionReferenceSourceReference]


class UserMessage(TypedDict):
    """The context message ``prepare`` produces: a user message whose source is the record."""

    source: SessionReferenceSource
    #: Exactly one text block holding the rendered references.
    content: list[ContentBlock]
    role: Literal["user"]
    id: str


class PreparedReferencedMessage(TypedDict):
    """The result of ``prepare``: the content, and the context message when there were
    references."""

    #: A deep copy of the ``content`` argument.
    content: str | list[ContentBlock]
    additionalContext: NotRequired[UserMessage]
