"""The query-length limit of the completion endpoints.

``fileReferences/list`` and ``sessionReferenceResolver/candidates`` run at keystroke rate and
match their ``query`` against every candidate; a multi-megabyte query (the frame limit allows
8 MiB) would make each such call cost seconds. Endpoints with a string parameter named
``query`` therefore refuse a longer one with ``arguments-invalid`` before the handler runs
(``docs/protocol.md`` § 11.4), in the server's argument validation step, so no agent is
activated and no mailbox turn is taken for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from wire import ArgumentsInvalidError, Endpoint, Registry

__all__ = ["DEFAULT_MAX_QUERY_LENGTH", "QUERY_PARAMETER", "limit_queries"]

#: Longest ``query`` accepted, in characters (Unicode code points). A path-only
#: ``@``-completion query is at most a path; Linux's ``PATH_MAX`` is 4096 bytes.
DEFAULT_MAX_QUERY_LENGTH = 4096
#: Wire name of the limited parameter.
QUERY_PARAMETER = "query"


@attrs.frozen(kw_only=True)
class _QueryLimitedEndpoint(Endpoint):
    """An endpoint whose ``query`` argument is checked for length after validation."""

    max_query_length: int

    def bind(self, wire_args: Mapping[str, Any]) -> dict[str, Any]:
        bound = super().bind(wire_args)
        query = wire_args.get(QUERY_PARAMETER)
        if isinstance(query, str) and len(query) > self.max_query_length:
            raise ArgumentsInvalidError(
                f"{self.spec.name}: {QUERY_PARAMETER}: {len(query)} characters exceed the "
                f"limit of {self.max_query_length}",
                details={"path": QUERY_PARAMETER, "limit": self.max_query_length},
            )
        return bound


def limit_queries(registry: Registry, max_length: int = DEFAULT_MAX_QUERY_LENGTH) -> Registry:
    """A registry serving the same endpoints, with ``query`` limited to ``max_length``.

    Endpoints without a string ``query`` parameter are carried over unchanged.
    """
    limited = Registry()
    for endpoint in registry:
        has_query = any(
            p.wire_name == QUERY_PARAMETER and p.annotation is str for p in endpoint.spec.params
        )
        if has_query:
            # Every field carried over (the inline fast path included), plus the limit.
            fields = {f.name: getattr(endpoint, f.name) for f in attrs.fields(Endpoint) if f.init}
            endpoint = _QueryLimitedEndpoint(**fields, max_query_length=max_length)
        limited.add(endpoint)
    return limited
