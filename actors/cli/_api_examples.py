"""What ``docs/api.md`` says that the schema cannot: example calls and what error codes mean.

The examples are written by hand (realistic values, not values guessed from the types) and
``tests/actors/cli/test_api_doc.py`` runs every one of them against a real server. A value
that the reader supplies (an agent's id, a second session, a directory) is a
:class:`Placeholder`, spelled as a shell variable in the shell example and as an expression in
the TypeScript one. The meanings of the error codes follow ``docs/protocol.md`` §12.2 and the
effect table of §12.3.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = [
    "AGENT",
    "CODE_MEANINGS",
    "CWD",
    "EXAMPLES",
    "NAMESPACES",
    "SESSION_REFERENCE_MEANINGS",
    "SOURCE",
    "CodeMeaning",
    "Example",
    "Placeholder",
]


@attrs.frozen
class Placeholder:
    """A value the reader supplies: its shell variable and its TypeScript expression."""

    shell: str
    typescript: str


#: The agent the call is for (``--agent``; ``client.agent(id)``).
AGENT = Placeholder("$AGENT", "agentId")
#: A second session, which ``$AGENT`` may reference.
SOURCE = Placeholder("$SOURCE", "sourceId")
#: A project directory (the agent's cwd).
CWD = Placeholder("$PWD", "process.cwd()")


@attrs.frozen
class Example:
    """One example call: its arguments by wire name (without ``agentId``) and, when the call
    needs more than an agent, a sentence that says what."""

    args: Mapping[str, Any] = attrs.field(factory=dict)
    note: str = ""


_MESSAGE = {
    "type": "user/message",
    "data": {
        "id": "u1",
        "role": "user",
        "content": [{"type": "text", "text": "Where does the tokenizer live?"}],
        "source": {"kind": "user"},
    },
    "surfaceOp": "append",
}

#: Endpoint name → its example.
EXAMPLES: dict[str, Example] = {
    "agents/create": Example({"title": "Refactor the parser", "cwd": CWD}),
    "diagnostics/echo": Example({"payload": {"ping": 1, "tags": ["a", "b"]}}),
    "diagnostics/echoRaw": Example({"payload": "hello"}),
    "diagnostics/echoSync": Example({"payload": {"ping": 1}}),
    "diagnostics/endings": Example(
        note="It lists the `diagnostics/sleep` calls that ended, with how they ended."
    ),
    "diagnostics/note": Example({"text": "Read the tokenizer first"}),
    "diagnostics/notes": Example(),
    "diagnostics/publish": Example(
        {"path": "report.txt", "marker": "report.started", "workSeconds": 0.1, "holdSeconds": 0},
        note="Both files are written under the server's `<data>/diagnostics` directory.",
    ),
    "diagnostics/sleep": Example({"seconds": 0.5, "label": "warm-up"}),
    "fileReferences/list": Example(
        {"query": "src/ma"},
        note="It completes paths inside the agent's cwd, so create the agent with `cwd` set "
        "to a directory that holds files; the query matches paths that start with `src/ma`.",
    ),
    "sessionReferenceResolver/candidates": Example(
        {"query": "parser"},
        note="It lists the other sessions; `$SOURCE`, created as above, is one of them.",
    ),
    "sessionReferenceResolver/parseMentions": Example(
        {"text": "Compare with @[Parser notes](dsh-session:InNvdXJjZSI)"},
        note="The mention names the session `source`; parsing does not need it to exist.",
    ),
    "sessionReferenceResolver/prepare": Example(
        {
            "content": "Compare with @Parser notes",
            "references": [{"sessionId": SOURCE, "label": "Parser notes"}],
        },
        note="It needs a second session, `$SOURCE`, for `$AGENT` to reference (a session "
        "cannot reference itself); its messages become the context message.",
    ),
    "sessions/append": Example(
        {"events": [_MESSAGE], "idempotencyKey": "7d9e5b9c-1f1e-4d7a-9a53-2f1c0b8e6a41"},
        note="Give each logical append its own idempotency key (a fresh UUID): a retry with "
        "the same key and events writes nothing again.",
    ),
    "sessions/create": Example({"cwd": CWD}),
    "sessions/info": Example(),
    "sessions/list": Example({"limit": 20}),
    "sessions/modelRoute": Example(),
    "sessions/setModelRoute": Example(
        {"provider": "anthropic", "model": "claude-sonnet-4-5", "contextWindow": 200000}
    ),
    "sessions/setTitle": Example({"title": "Parser refactor, part 2"}),
    "sessions/snapshot": Example(),
    "system/describe": Example(),
    "system/metrics": Example(
        note="The same families `serve --metrics` exposes to Prometheus "
        "([operations.md](operations.md)), as data."
    ),
    "system/stats": Example(),
}

#: Namespace → one line on what its endpoints are for.
NAMESPACES: dict[str, str] = {
    "agents": "Create agents: a session with a title, ready for calls.",
    "diagnostics": "Endpoints for the demo, the tests and the benchmarks; not part of the "
    "protocol.",
    "fileReferences": "`@`-completion of paths in the agent's working directory.",
    "sessionReferenceResolver": "DSH session references: candidates to mention, mentions "
    "parsed out of text, and referenced sessions prepared as a context message.",
    "sessions": "The DSH session of each agent: create, append, read, title, model route, list.",
    "system": "Built into every server ([protocol §15](protocol.md#15-built-in-endpoints)).",
}


@attrs.frozen
class CodeMeaning:
    """What an error code means, whether the call took effect, and what a client should do."""

    means: str
    effect: str
    then: str


#: The wire codes an endpoint may end with (``docs/protocol.md`` §12.2, §12.3).
CODE_MEANINGS: dict[str, CodeMeaning] = {
    "arguments-invalid": CodeMeaning(
        "An argument is missing, unknown, of the wrong type or outside its constraints "
        "(`details.path` names it), or the handler refused its value (an id that exists, an "
        "idempotency key reused with other arguments).",
        "no",
        "Fix the call; do not send it unchanged.",
    ),
    "cancelled": CodeMeaning(
        "The call was cancelled: by the caller, by a newer call with the same `supersede` "
        "key, or by a server shutting down (`details.reason`, `details.state`).",
        "no",
        "Safe to send again as a new call.",
    ),
    "deadline-exceeded": CodeMeaning(
        "The call's deadline passed before it finished.",
        "no",
        "Safe to send again, with a new deadline.",
    ),
    "overloaded": CodeMeaning(
        "Too many calls in flight (`maxInFlight`, `maxInFlightTotal`), or frames are held "
        "back because the client is not reading.",
        "no",
        "Wait, then send it again.",
    ),
    "too-large": CodeMeaning(
        "A frame exceeds `maxFrameBytes` (`details.limit`).",
        "no",
        "Send less (a smaller batch or page); do not send it unchanged.",
    ),
    "unauthorized": CodeMeaning(
        "The caller's CURVE key may not call this endpoint (a `read` key and an endpoint "
        "that needs `write`), or the key left the allowlist.",
        "no",
        "Call with a key of the right role.",
    ),
    "unavailable": CodeMeaning(
        "The server is shutting down, the disk refused a write (`details.reason`: "
        "`no-space`, `read-only`, `io-error`), or under `--workers` the agent's owner was "
        "unreachable.",
        'no; unknown when `details.outcome` is `"unknown"` or the owner died mid-call',
        "Retry later; when the outcome is unknown, retry with the same `idempotencyKey`.",
    ),
    "peer-lost": CodeMeaning(
        "The connection was lost: the server went silent, restarted or forgot this client, "
        "or the client said `hello` again.",
        "unknown",
        "Reconnect, then retry with the same `idempotencyKey`.",
    ),
    "internal": CodeMeaning(
        "The handler failed unexpectedly (the message is kept, the traceback is in the "
        "server log).",
        "unknown in principle; the mutating session endpoints write all or nothing",
        "Report it; retry with the same `idempotencyKey`.",
    ),
    "session-not-found": CodeMeaning(
        "`agentId` names no session (`details.agentId`).",
        "no",
        "Create the session, or fix the id.",
    ),
    "agent-busy": CodeMeaning(
        "Reserved: the agent cannot take the call now. This server version never sends it.",
        "no",
        "Retry later.",
    ),
    "moved": CodeMeaning(
        "Only from a worker of `serve --workers` called directly: another worker owns the "
        "agent's shard (`details.endpoint`, `details.owner`).",
        "no",
        "Send it to `details.endpoint`, or through the supervisor, which retries on its own.",
    ),
}

_FIX = "Fix the references; do not send it unchanged."

#: The session-reference codes, upstream DSH's (``docs/protocol.md`` §12.2). None of them
#: changes a session.
SESSION_REFERENCE_MEANINGS: dict[str, CodeMeaning] = {
    "SESSION_REFERENCE_INVALID_CONFIG": CodeMeaning(
        "A `[sessionReferences]` setting of the server is out of range (normally reported "
        "when the server starts).",
        "no",
        "Fix the server's configuration.",
    ),
    "SESSION_REFERENCE_INVALID_REFERENCE": CodeMeaning(
        "A candidate limit, a reference or a mention URI is malformed.", "no", _FIX
    ),
    "SESSION_REFERENCE_SELF_REFERENCE": CodeMeaning(
        "The message references the session that receives it.", "no", _FIX
    ),
    "SESSION_REFERENCE_TOO_MANY": CodeMeaning(
        "More distinct sessions are referenced than `maxReferences` allows.", "no", _FIX
    ),
    "SESSION_REFERENCE_READ_FAILED": CodeMeaning(
        "A referenced session could not be read.", "no", _FIX
    ),
    "SESSION_REFERENCE_BUDGET_EXCEEDED": CodeMeaning(
        "A referenced session cannot be kept within the per-source byte budget.", "no", _FIX
    ),
    "SESSION_REFERENCE_CANCELLED": CodeMeaning(
        "The call's own cancel or deadline, as the session-reference service reports it.",
        "no",
        "Treat it like `cancelled`: safe to send again.",
    ),
}
