"""Session references: one import point for the domain of ``sessionReferenceResolver``.

The implementation is split by job into private modules; this module
re-exports their public names for the actor runtime and the wire faces.

The mention codec (session-reference §2) is public API for hosts:
`encode_session_reference_uri` / `decode_session_reference_uri` (the canonical
``dsh-session:`` URI and its strict decoding), `format_session_reference_mention`
(``@[label](uri)``) and `parse_session_reference_text` (text to readable text plus
`MentionReference` values, ready for `prepare`). A host without the codec asks the server
(``sessionReferenceResolver/parseMentions``). ``tests/actors/session_references/
mention_vectors.json`` holds the vectors every implementation of the codec must pass.
"""

from __future__ import annotations

from actors.session_references._budget import (
    NO_ADAPTER,
    LookupModelRoute,
    ModelAdapterMissingError,
    ModelRoute,
    budget_from_context_window,
    resolve_reference_budget,
)
from actors.session_references._candidates import (
    Candidate,
    SessionSummary,
    candidate_rank,
    list_candidates,
    list_candidates_async,
    listing_order,
    remote_candidates,
    to_mention_candidates,
)
from actors.session_references._config import (
    DEFAULT_CANDIDATE_LIMIT,
    DEFAULT_MAX_REFERENCE_BYTES,
    DEFAULT_REFERENCE_CONTEXT_FRACTION,
    MAX_REFERENCES,
    SessionReferenceConfig,
)
from actors.session_references._errors import (
    SessionReferenceError,
    SessionReferenceErrorCode,
    cancellation_as_error,
)
from actors.session_references._index import CandidateIndex
from actors.session_references._inputs import (
    AgentView,
    NormalizedReference,
    SessionReferenceInput,
    normalize_references,
)
from actors.session_references._prepare import (
    PreparedMessage,
    ReadSnapshot,
    discard_spills,
    prepare,
)
from actors.session_references._projection import (
    ProjectedItem,
    ProjectionError,
    SourceSnapshot,
    project_conversation,
)
from actors.session_references._prompt import (
    ContextMessage,
    OmissionNotice,
    ReferenceRecord,
    SourceRecord,
)
from actors.session_references._retention import (
    ReferencedSessionData,
    RetainedSource,
    RetentionStats,
    retain_referenced_session,
    truncate_with_notice,
)
from actors.session_references._spill import (
    LocalSpillStore,
    SaveTextSpill,
    SpillRef,
    SpillStore,
    render_transcript,
)
from actors.session_references._uri import (
    SESSION_REFERENCE_SCHEME,
    MentionReference,
    ParsedSessionReferenceText,
    decode_session_reference_uri,
    encode_session_reference_uri,
    format_session_reference_mention,
    parse_session_reference_text,
)
from actors.session_references._wire_types import (
    ContentBlock,
    ImageContent,
    PreparedReferencedMessage,
    ReasoningContent,
    SessionReferenceCandidate,
    SessionReferenceMentionCandidate,
    SessionReferenceSource,
    SessionReferenceSourceReference,
    TextContent,
    ToolCallContent,
    ToolResultContent,
    UserMessage,
)

__all__ = [
    "DEFAULT_CANDIDATE_LIMIT",
    "DEFAULT_MAX_REFERENCE_BYTES",
    "DEFAULT_REFERENCE_CONTEXT_FRACTION",
    "MAX_REFERENCES",
    "NO_ADAPTER",
    "SESSION_REFERENCE_SCHEME",
    "AgentView",
    "Candidate",
    "CandidateIndex",
    "ContentBlock",
    "ContextMessage",
    "ImageContent",
    "LocalSpillStore",
    "LookupModelRoute",
    "MentionReference",
    "ModelAdapterMissingError",
    "ModelRoute",
    "NormalizedReference",
    "OmissionNotice",
    "ParsedSessionReferenceText",
    "PreparedMessage",
    "PreparedReferencedMessage",
    "ProjectedItem",
    "ProjectionError",
    "ReadSnapshot",
    "ReasoningContent",
    "ReferenceRecord",
    "ReferencedSessionData",
    "RetainedSource",
    "RetentionStats",
    "SaveTextSpill",
    "SessionReferenceCandidate",
    "SessionReferenceConfig",
    "SessionReferenceError",
    "SessionReferenceErrorCode",
    "SessionReferenceInput",
    "SessionReferenceMentionCandidate",
    "SessionReferenceSource",
    "SessionReferenceSourceReference",
    "SessionSummary",
    "SourceRecord",
    "SourceSnapshot",
    "SpillRef",
    "SpillStore",
    "TextContent",
    "ToolCallContent",
    "ToolResultContent",
    "UserMessage",
    "budget_from_context_window",
    "cancellation_as_error",
    "candidate_rank",
    "decode_session_reference_uri",
    "discard_spills",
    "encode_session_reference_uri",
    "format_session_reference_mention",
    "list_candidates",
    "list_candidates_async",
    "listing_order",
    "normalize_references",
    "parse_session_reference_text",
    "prepare",
    "project_conversation",
    "remote_candidates",
    "render_transcript",
    "resolve_reference_budget",
    "retain_referenced_session",
    "to_mention_candidates",
    "truncate_with_notice",
]
