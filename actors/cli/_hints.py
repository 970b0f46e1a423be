"""What ``agent-actors call`` suggests after a server's error: plain functions of the error, the
command's items and (when it helps) the server's ``system/describe``.

- ``unknown-endpoint``: the close names the server describes ("did you mean sessions/list?");
- ``arguments-invalid``: ``limit:=10`` for ``limit=10`` on a non-string parameter, ``--agent``
  for a missing ``agentId``, the close parameter names for an unknown argument.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["error_hints", "needs_describe", "text_items"]

_AGENT_HINT = "pass the agent (session) id with --agent ID (it is sent as agentId)"


def text_items(items: Sequence[str]) -> dict[str, str]:
    """The ``key=text`` items (not ``key:=json``) by key, as ``parse_items`` splits them."""
    out: dict[str, str] = {}
    for item in items:
        json_key, json_sep, _ = item.partition(":=")
        text_key, text_sep, text_value = item.partition("=")
        if json_sep and len(json_key) < len(text_key):
            out.pop(json_key, None)
        elif text_sep and text_key:
            out[text_key] = text_value
    return out


def needs_describe(code: str, message: str) -> bool:
    """Whether the hints for this error need the server's ``system/describe``."""
    return code == "unknown-endpoint" or (
        code == "arguments-invalid" and "unknown argument" in message
    )


def error_hints(
    code: str,
    message: str,
    details: Mapping[str, Any],
    *,
    method: str,
    items: Sequence[str],
    described: Mapping[str, Any] | None = None,
) -> list[str]:
    """What to try after the server answered ``code: message`` to ``call METHOD ITEMS…``."""
    if code == "unknown-endpoint":
        return _endpoint_hints(method, described)
    if code != "arguments-invalid":
        return []
    path = details.get("path")
    key = re.split(r"[.\[]", path, maxsplit=1)[0] if isinstance(path, str) else None
    if "unknown argument" in message:
        return _unknown_argument_hints(message, method, described)
    if key == "agentId" and "missing" in message:
        return [_AGENT_HINT]
    if key is None:
        return []
    texts = text_items(items)
    if "got a string" in message and key in texts:
        return [_as_json_hint(key, texts[key])]
    if "expected a string" in message and key not in texts:
        return [f"`{key}:=…` passes a JSON value; write `{key}=TEXT` to pass text"]
    return []


def _as_json_hint(key: str, text: str) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if value is not None and not isinstance(value, str):
        return f"`{key}={text}` passes the text {text!r}; write `{key}:={text}` to pass it as JSON"
    return f"`{key}=…` passes text; write `{key}:=JSON` for a number, boolean, list, object or null"


def _names(described: Mapping[str, Any] | None) -> list[str]:
    if described is None:
        return []
    endpoints = described.get("endpoints")
    if not isinstance(endpoints, list):
        return []
    return [str(e["name"]) for e in endpoints if isinstance(e, Mapping) and "name" in e]


def _endpoint_hints(method: str, described: Mapping[str, Any] | None) -> list[str]:
    names = _names(described)
    close = _closest(method, names)
    if not close:
        # "list" or "sesions/list": match the method part alone.
        wanted = method.rpartition("/")[2]
        close = [n for n in names if n.rpartition("/")[2] == wanted]
    if close:
        return [f"did you mean {' or '.join(close)}?"]
    listing = "`agent-actors call ENDPOINT system/describe` lists the server's endpoints"
    if "/" not in method:
        return [f"endpoints are named NAMESPACE/METHOD; {listing}"]
    return [listing]


def _unknown_argument_hints(
    message: str, method: str, described: Mapping[str, Any] | None
) -> list[str]:
    params = _params(described, method)
    if params is None:
        return []
    unknown = re.findall(r"'([^']*)'", message.partition("unknown argument")[2])
    hints = []
    for name in unknown:
        close = _closest(name, params)[:1]
        if close:
            hints.append(f"did you mean {close[0]} (not {name})?")
    if "agentId" in unknown and "agentId" not in params:
        hints.append(f"{method} takes no agent: drop --agent")
    hints.append(
        f"{method} takes {', '.join(params)}" if params else f"{method} takes no arguments"
    )
    return hints


def _closest(word: str, candidates: list[str]) -> list[str]:
    """The candidates close to ``word`` (difflib's ratio at least 0.6), only the best of them:
    those within 0.1 of the closest, at most three."""
    scored = sorted(
        ((difflib.SequenceMatcher(None, word, c).ratio(), c) for c in candidates), reverse=True
    )
    best = scored[0][0] if scored else 0.0
    return [c for ratio, c in scored if ratio >= max(0.6, best - 0.1)][:3]


def _params(described: Mapping[str, Any] | None, method: str) -> list[str] | None:
    """The parameter names of ``method`` as the server describes it (``None``: not found)."""
    for endpoint in (described or {}).get("endpoints") or []:
        if isinstance(endpoint, Mapping) and endpoint.get("name") == method:
            return [str(p["name"]) for p in endpoint.get("params") or [] if "name" in p]
    return None
