"""The plain functions behind the command's messages: the endpoint checks, a call error's hints
and the JSON log formatter (their use by the real command: tests/system/test_cli_errors.py)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from actors.cli._addresses import check_endpoint
from actors.cli._errors import CliError
from actors.cli._hints import error_hints, text_items
from actors.cli._logging import JsonFormatter, TextFormatter

DESCRIBED: dict[str, Any] = {
    "endpoints": [
        {"name": "sessions/list", "params": [{"name": "limit"}, {"name": "after"}]},
        {"name": "sessions/info", "params": [{"name": "agentId"}]},
        {"name": "fileReferences/list", "params": [{"name": "agentId"}, {"name": "query"}]},
        {"name": "system/stats", "params": []},
    ]
}


@pytest.mark.parametrize(
    ("endpoint", "bind"),
    [
        ("tcp://127.0.0.1:0", True),
        ("tcp://*:7555", True),
        ("tcp://127.0.0.1:*", True),
        ("tcp://[::1]:7555", False),
        ("tcp://localhost:7555", False),
        ("ipc://@abstract-name", True),
        ("ipc://*", True),
    ],
)
def test_accepted_endpoints(endpoint: str, bind: bool) -> None:
    """Every form ZeroMQ binds or connects and the command serves passes the checks."""
    check_endpoint(endpoint, bind=bind)


@pytest.mark.parametrize(
    ("endpoint", "bind", "hint"),
    [
        ("7555", True, "write tcp://127.0.0.1:7555"),
        ("/run/s.sock", True, "write ipc:///run/s.sock"),
        ("zmq://host:1", False, "write tcp://host:1"),
        ("tcp://host:0", False, None),
        ("tcp://host:*", False, None),
        ("ipc://", True, "write ipc:///PATH/TO.sock"),
        (f"ipc:///{'x' * 120}", True, "choose a shorter path"),
    ],
)
def test_refused_endpoints(endpoint: str, bind: bool, hint: str | None) -> None:
    """A malformed endpoint is a usage error (status 2) with the form to write instead."""
    with pytest.raises(CliError) as raised:
        check_endpoint(endpoint, bind=bind)
    assert raised.value.status == 2
    if hint is not None:
        assert hint in raised.value.hints


def test_text_items_are_told_from_json_items() -> None:
    """Only ``key=text`` items count as text; a later ``key:=json`` replaces one."""
    assert text_items(["a=1", "b:=2", "c=x:=y", "a:=3"]) == {"c": "x:=y"}


@pytest.mark.parametrize(
    ("message", "items", "details", "expected"),
    [
        (
            "sessions/list: limit: expected an integer, got a string",
            ["limit=ten"],
            {"path": "limit"},
            "`limit=…` passes text; write `limit:=JSON` for a number, boolean, list, object "
            "or null",
        ),
        (
            "sessions/setTitle: title: expected a string, got an integer",
            ["title:=5"],
            {"path": "title"},
            "`title:=…` passes a JSON value; write `title=TEXT` to pass text",
        ),
        (
            "sessions/list: after.createdAt: expected an integer, got a string",
            ["after=5"],
            {"path": "after.createdAt"},
            "`after=5` passes the text '5'; write `after:=5` to pass it as JSON",
        ),
    ],
)
def test_argument_hints(
    message: str, items: list[str], details: dict[str, str], expected: str
) -> None:
    """A type mismatch on an item points at the item form that passes the other type."""
    hints = error_hints("arguments-invalid", message, details, method="m/n", items=items)
    assert hints == [expected]


def test_endpoint_hints_without_a_close_name() -> None:
    """A name close to none the server describes points at system/describe; a name without a
    namespace says endpoints have one."""
    far = error_hints("unknown-endpoint", "", {}, method="x/y", items=[], described=DESCRIBED)
    assert far == ["`agent-actors call ENDPOINT system/describe` lists the server's endpoints"]
    bare = error_hints("unknown-endpoint", "", {}, method="stat", items=[], described=DESCRIBED)
    assert bare[0].startswith("endpoints are named NAMESPACE/METHOD")
    assert error_hints(
        "unknown-endpoint", "", {}, method="list", items=[], described=DESCRIBED
    ) == ["did you mean sessions/list or fileReferences/list?"]


def test_hints_stay_quiet_for_other_errors() -> None:
    """Errors the command has no advice for get no hint."""
    assert error_hints("session-not-found", "no session", {}, method="m", items=[]) == []


def _record(**extra: Any) -> logging.LogRecord:
    try:
        raise ValueError("inner")
    except ValueError:
        exc_info = sys.exc_info()
    record = logging.LogRecord(
        "wire.server", logging.WARNING, __file__, 1, "peer %s", ("ab",), exc_info
    )
    record.__dict__.update(extra)
    return record


def test_json_formatter_writes_one_object_per_line() -> None:
    """A record is one line of JSON: time, level, logger, message, its extra fields (bytes as
    hex, other values as text, None left out) and its exception."""
    line = JsonFormatter().format(
        _record(peer=b"\x01\xff", path=Path("/x"), call_id=7, agent_id=None)
    )
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "WARNING" and entry["logger"] == "wire.server"
    assert entry["message"] == "peer ab" and entry["time"].endswith("Z")
    assert (entry["peer"], entry["path"], entry["call_id"]) == ("01ff", "/x", 7)
    assert "agent_id" not in entry
    assert "ValueError: inner" in entry["exception"]


def test_text_formatter_names_the_logger_and_fields() -> None:
    """A record in text is ``agent-actors: level: message [logger] key=value``."""
    first = TextFormatter().format(_record(call_id=7, outcome="ok")).splitlines()[0]
    assert first == "agent-actors: warning: peer ab [wire.server] call_id=7 outcome=ok"


def test_constants_spelled_out_for_a_fast_help_agree() -> None:
    """The values the command spells out (so ``--help`` imports no ``wire``) are the library's."""
    import actors._keys
    import wire
    from actors.cli import _cluster, _security

    assert _cluster.IO_THREAD_POLICIES == wire.IO_THREAD_POLICIES
    assert _security.ENV_SERVER_KEY == actors._keys.ENV_SERVER_KEY
    assert _security.ENV_CLIENT_KEY == actors._keys.ENV_CLIENT_KEY
