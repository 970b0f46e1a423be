"""The session header: the immutable first line of every DSH session log.

`session-log-format` §4. The header carries no title and no subagent label (both are
log events). Unknown keys are dropped on read, except the retired `sandboxMode` /
`approvalPolicy`, whose presence rejects the log.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from actors.session_log._idempotency import CreationKey
from actors.session_log._json import is_negative_zero, safe_int

__all__ = ["RETIRED_KEYS_REASON", "SESSION_FORMAT_VERSION", "HeaderError", "SessionHeader"]

SESSION_FORMAT_VERSION = 0
"""The only header `version` this build reads and writes (§4.3)."""

_RETIRED_KEYS = ("sandboxMode", "approvalPolicy")
RETIRED_KEYS_REASON = "session header uses retired policy baseline fields"
"""§4.1: the text that rejects a header carrying `sandboxMode` or `approvalPolicy`."""


HeaderErrorKind = Literal["shape", "retired", "restore"]


class HeaderError(ValueError):
    """A header record fails validation.

    Attributes:
        kind: which rule failed. ``"shape"``: the JSONL shape check (§4.2 layer 1; the log
            is not listed and a direct read reports "first line is not a session header").
            ``"retired"``: the retired policy keys (§4.1; the read fails). ``"restore"``:
            the restore-validation layer (§4.2 layer 2; "failed validation").
    """

    def __init__(self, detail: str, *, kind: HeaderErrorKind) -> None:
        self.kind: HeaderErrorKind = kind
        super().__init__(detail)


def _non_negative_safe_int(value: object, name: str, *, kind: HeaderErrorKind) -> int:
    number = safe_int(value)
    if number is None or number < 0 or is_negative_zero(value):
        raise HeaderError(f"session header {name} must be a non-negative safe integer", kind=kind)
    return number


def _optional_str(record: Mapping[str, Any], key: str) -> str | None:
    value = record.get(key)
    if value is None and key not in record:
        return None
    if not isinstance(value, str):
        raise HeaderError(f"session header {key} must be a string", kind="restore")
    return value


@attrs.frozen(kw_only=True)
class SessionHeader:
    """Immutable session metadata, stored as the log's first line.

    Field names are snake_case; `to_record` gives the on-disk camelCase record.
    """

    id: str
    """Opaque session id (any string)."""
    created_at: int
    """Creation time, Unix epoch milliseconds (non-negative)."""
    cwd: str | None = None
    """Absolute working directory; None when the session has none (``_no-cwd``)."""
    parent_session: str | None = None
    """Fork or subagent parent id."""
    seed_length: int | None = None
    """Number of leading events inherited from the parent through a fork seed."""
    origin: Literal["subagent"] | None = None
    """Presentation marker for subagent children."""
    delegation_depth: int = 0
    """Subagent nesting depth; 0 for top-level sessions (required on disk)."""
    agent_preset: str | None = None
    """Agent preset the session was composed from."""
    version: int = SESSION_FORMAT_VERSION
    """Log format version; always 0 for headers this build reads or writes."""
    idempotency: CreationKey | None = None
    """The idempotency key the session was created with (header ``"idempotency"``, an
    extension upstream drops on read; `actors.session_log._idempotency`)."""

    @classmethod
    def from_record(cls, record: object) -> SessionHeader:
        """Build a header from a parsed header line (§4.2).

        Applies the JSONL shape check, drops unknown keys, rejects the retired policy
        keys, and type-checks the optional fields. The semantic restore rules that do
        not concern types (version 0, absolute cwd) are in `validate_for_restore`; the
        version refusal (§4.3) is the reader's job, since it precedes the shape check.

        Raises:
            HeaderError: the record is not a well-formed header.
        """
        if not isinstance(record, Mapping) or record.get("type") != "session":
            raise HeaderError('record is not an object with type "session"', kind="shape")
        version = record.get("version")
        if type(version) not in (int, float):
            raise HeaderError("session header version must be a number", kind="shape")
        session_id = record.get("id")
        if not isinstance(session_id, str):
            raise HeaderError("session header id must be a string", kind="shape")
        created_at = _non_negative_safe_int(record.get("createdAt"), "createdAt", kind="shape")
        if "delegationDepth" not in record:
            # §4.2: a header without delegationDepth is invisible to the JSONL backend.
            raise HeaderError("session header lacks delegationDepth", kind="shape")
        depth = _non_negative_safe_int(record["delegationDepth"], "delegationDepth", kind="shape")
        origin = record.get("origin")
        if origin is not None or "origin" in record:
            if origin != "subagent":
                raise HeaderError('session header origin must be "subagent"', kind="shape")
        agent_preset = record.get("agentPreset")
        if "agentPreset" in record and not isinstance(agent_preset, str):
            raise HeaderError("session header agentPreset must be a string", kind="shape")
        if any(key in record for key in _RETIRED_KEYS):
            raise HeaderError(RETIRED_KEYS_REASON, kind="retired")
        number = safe_int(version)
        if number is None:
            raise HeaderError(
                f"session header version must be {SESSION_FORMAT_VERSION}, got {version}",
                kind="restore",
            )
        seed_length = None
        if "seedLength" in record:
            seed_length = _non_negative_safe_int(record["seedLength"], "seedLength", kind="restore")
        return cls(
            id=session_id,
            created_at=created_at,
            cwd=_optional_str(record, "cwd"),
            parent_session=_optional_str(record, "parentSession"),
            seed_length=seed_length,
            origin="subagent" if origin is not None else None,
            delegation_depth=depth,
            agent_preset=agent_preset if isinstance(agent_preset, str) else None,
            version=number,
            idempotency=CreationKey.from_record(record.get("idempotency")),
        )

    def validate_for_restore(self) -> None:
        """Apply the restore-only header rules (§4.2 layer 2).

        Raises:
            HeaderError: version is not 0 or cwd is not absolute (``kind="restore"``).
        """
        if self.version != SESSION_FORMAT_VERSION:
            raise HeaderError(
                f"session header version must be {SESSION_FORMAT_VERSION}, got {self.version}",
                kind="restore",
            )
        if self.cwd is not None and not os.path.isabs(self.cwd):
            raise HeaderError(
                f'session header cwd must be an absolute path, got "{self.cwd}"', kind="restore"
            )

    def to_record(self) -> dict[str, Any]:
        """Return the on-disk header record, in upstream's key order (§3)."""
        record: dict[str, Any] = {
            "type": "session",
            "version": self.version,
            "id": self.id,
            "createdAt": self.created_at,
        }
        if self.cwd is not None:
            record["cwd"] = self.cwd
        if self.parent_session is not None:
            record["parentSession"] = self.parent_session
        if self.seed_length is not None:
            record["seedLength"] = self.seed_length
        if self.origin is not None:
            record["origin"] = self.origin
        record["delegationDepth"] = self.delegation_depth
        if self.agent_preset is not None:
            record["agentPreset"] = self.agent_preset
        if self.idempotency is not None:
            record["idempotency"] = self.idempotency.to_record()
        return record
