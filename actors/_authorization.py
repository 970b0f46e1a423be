"""Roles of CURVE client keys: ``read`` or ``write``, and which endpoints each may call.

A ``read`` client may list, complete, prepare and describe: every endpoint that neither
changes an agent's state (``mutates=False``) nor creates anything. A ``write`` client may
also create sessions and agents, append, and set titles and model routes. The decision is
made per call, against the allowlist as it is *now*, so removing a key (or demoting it to
``read``) takes effect on that client's next call, not only on its next connection.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping

from wire import EndpointSpec

__all__ = ["CREATING_ENDPOINTS", "Role", "authorizer", "required_role"]


class Role(enum.StrEnum):
    """What a client key may do."""

    #: Read-only endpoints: list, candidates, prepare, describe, snapshots, stats.
    READ = "read"
    #: Everything ``read`` may, plus endpoints that create or change state.
    WRITE = "write"


#: Endpoints that create or write something although they have no agent to mutate (so their
#: ``mutates`` flag is informative only, docs/protocol.md § 14): they need ``write`` too.
CREATING_ENDPOINTS = frozenset(
    {
        "agents/create",
        "sessions/create",
        # Writes files (inside <data>/diagnostics) that the caller names: a test and demo aid.
        "diagnostics/publish",
    }
)


def required_role(spec: EndpointSpec) -> Role:
    """The role an endpoint needs: ``write`` if it changes or creates state, else ``read``."""
    if spec.mutates or spec.name in CREATING_ENDPOINTS:
        return Role.WRITE
    return Role.READ


def authorizer(
    roles: Callable[[], Mapping[str, Role]],
) -> Callable[[str | None, EndpointSpec], str | None]:
    """The :data:`wire._security.Authorizer` for the allowlist ``roles()`` returns.

    ``roles()`` maps client public keys (Z85) to roles and is read on every call (it may
    re-read a file that changed). A key no longer listed may call nothing.
    """

    def authorize(client_key: str | None, spec: EndpointSpec) -> str | None:
        role = roles().get(client_key) if client_key is not None else None
        if role is None:
            return f"{spec.name}: this client key is not (or no longer) allowed"
        needed = required_role(spec)
        if needed is Role.WRITE and role is not Role.WRITE:
            return f"{spec.name} changes state: a '{role.value}' client may not call it"
        return None

    return authorize
