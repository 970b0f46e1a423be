"""system/describe of a real server carries the DSH types as JSON Schema, and real answers
match them (issue 20, item 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trio

from actors._serve import describe_builtin
from actors.session_references import format_session_reference_mention as mention
from wire import SCHEMA_DIALECT, SessionReferenceError, open_client

#: The DSH records every server must describe under their DSH names.
DSH_TYPES = {
    "FileReferenceCandidate",
    "SessionReferenceInput",
    "SessionReferenceMentionCandidate",
    "PreparedReferencedMessage",
    "SessionReferenceSource",
    "SessionReferenceErrorCode",
    "ContentBlock",
}


def checker(described: dict[str, Any], schema: dict[str, Any]) -> jsonschema.Validator:
    document = {"$schema": SCHEMA_DIALECT, "$defs": described["$defs"], **schema}
    jsonschema.Draft202012Validator.check_schema(document)
    return jsonschema.Draft202012Validator(document)


async def test_live_describe_matches_the_package_and_validates_real_answers(
    server_process: tuple[trio.Process, str], tmp_path: Path
) -> None:
    """A real server describes exactly what the installed package does; every schema is a
    valid 2020-12 schema; and the answers of the DSH endpoints (and their own errors) validate
    against the schemas it published."""
    _, address = server_process
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "main.py").write_text("print('hi')\n")
    with trio.fail_after(60):
        async with open_client(address) as client:
            described = await client.call("system/describe")
    assert described == describe_builtin()
    assert DSH_TYPES <= set(described["$defs"])
    endpoints = {e["name"]: e for e in described["endpoints"]}
    # Checking every schema against the meta-schema takes seconds of CPU (1.9 s on an idle
    # 2-core box), all of it on the event loop: with a connection open, its client answers no
    # heartbeat meanwhile and a loaded machine makes the server forget it (protocol §11).
    validators = {
        (name, part): checker(described, schema)
        for name, endpoint in endpoints.items()
        for part, schema in endpoint["schema"].items()
    }
    with trio.fail_after(60):
        async with open_client(address) as client:
            source = await client.call("sessions/create", {"cwd": str(work)})
            await client.call(
                "sessions/setTitle", {"agentId": source["sessionId"], "title": "Source"}
            )
            await client.call(
                "sessions/append",
                {
                    "agentId": source["sessionId"],
                    "events": [
                        {
                            "type": "user/message",
                            "data": {
                                "id": "m1",
                                "role": "user",
                                "content": [{"type": "text", "text": "hello"}],
                                "source": {"kind": "user"},
                            },
                            "surfaceOp": "append",
                        }
                    ],
                },
            )
            target = await client.call("sessions/create", {"cwd": str(work)})
            agent = target["sessionId"]
            calls: list[tuple[str, dict[str, Any]]] = [
                ("fileReferences/list", {"agentId": agent, "query": "src/"}),
                ("sessionReferenceResolver/candidates", {"agentId": agent, "query": ""}),
                (
                    "sessionReferenceResolver/parseMentions",
                    {"agentId": agent, "text": f"see {mention(source['sessionId'], 'Source')} now"},
                ),
                (
                    "sessionReferenceResolver/prepare",
                    {
                        "agentId": agent,
                        "content": [{"type": "text", "text": "see @Source"}],
                        "references": [{"sessionId": source["sessionId"], "label": "Source"}],
                    },
                ),
                ("sessions/info", {"agentId": source["sessionId"]}),
                ("sessions/list", {}),
                ("system/stats", {}),
            ]
            for name, args in calls:
                validators[name, "args"].validate(args)
                result = await client.call(name, args)
                validators[name, "result"].validate(result)
                assert result, f"{name} answered nothing worth checking"

            prepared = await client.call(*calls[3])
            assert prepared["additionalContext"]["source"]["references"][0]["label"] == "Source"
            candidates = await client.call(*calls[1])
            assert [c["sessionId"] for c in candidates] == [source["sessionId"]]

            prepare = endpoints["sessionReferenceResolver/prepare"]
            with pytest.raises(SessionReferenceError) as refused:
                await client.call(
                    "sessionReferenceResolver/prepare",
                    {"agentId": agent, "content": "x", "references": [{"sessionId": agent}]},
                )
            validators[prepare["name"], "errors"].validate(refused.value.code)
            assert refused.value.code in prepare["errors"]
