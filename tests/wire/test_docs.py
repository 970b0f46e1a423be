"""docs/protocol.md stays true to the implementation.

Like trio's ``test_exports.py`` and h11's diagram script: every message type, every wire field
the codec writes, every error code, cancel reason and call state of the implementation must
appear in the normative protocol document, in backticks, so adding one without documenting it
fails here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgpack
import pytest

from wire import (
    Bye,
    Call,
    Cancel,
    CancelReason,
    Error,
    ErrorCode,
    Hello,
    Message,
    Ping,
    Pong,
    Result,
    Welcome,
    encode,
)
from wire._messages import MESSAGE_TYPES
from wire._state import CallInput, CallState

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"

#: One instance of each message with every optional field set, so the codec writes every key.
SAMPLES: dict[str, Message] = {
    "hello": Hello(versions=(1,), name="client"),
    "welcome": Welcome(
        name="server",
        heartbeat_ms=1000,
        peer_timeout_ms=2500,
        max_frame_bytes=1024,
        max_in_flight=8,
    ),
    "call": Call(id=1, endpoint="a/b", args={"x": 1}, deadline_ms=5.0, supersede="key"),
    "cancel": Cancel(id=1, reason=CancelReason.SUPERSEDED),
    "result": Result(id=1, value=[1, 2]),
    "error": Error.of(1, ErrorCode.INTERNAL, "boom", extra=1),
    "ping": Ping(),
    "pong": Pong(),
    "bye": Bye(),
}


@pytest.fixture(scope="module")
def doc() -> str:
    if not DOC.is_file():
        pytest.fail(f"normative protocol document missing: {DOC}")
    return DOC.read_text(encoding="utf-8")


def _backticked(doc: str) -> set[str]:
    return set(re.findall(r"`([^`\n]+)`", doc))


def _section(doc: str, kind: str) -> str:
    """The text of the ``### 3.x `kind` ...`` heading's section, up to the next heading."""
    match = re.search(rf"^### [\d.]+ .*`{re.escape(kind)}`.*$", doc, flags=re.MULTILINE)
    assert match is not None, f"no '### …`{kind}`…' section in {DOC.name}"
    rest = doc[match.end() :]
    following = re.search(r"^#{1,3} ", rest, flags=re.MULTILINE)
    return rest[: following.start()] if following else rest


def _wire_fields(message: Message) -> list[str]:
    decoded: Any = msgpack.unpackb(encode(message), raw=False)
    assert isinstance(decoded, dict)
    return sorted(decoded)


def test_samples_cover_every_message_type() -> None:
    """The samples below cover exactly the message types the codec knows."""
    assert set(SAMPLES) == set(MESSAGE_TYPES)
    for kind, message in SAMPLES.items():
        assert type(message) is MESSAGE_TYPES[kind]


@pytest.mark.parametrize("kind", sorted(MESSAGE_TYPES))
def test_message_type_is_documented(doc: str, kind: str) -> None:
    """Every message ``type`` appears in backticks in the document."""
    assert kind in _backticked(doc), f"message type `{kind}` is not documented"


@pytest.mark.parametrize("kind", sorted(MESSAGE_TYPES))
def test_message_fields_are_documented_in_its_section(doc: str, kind: str) -> None:
    """Every key the codec writes for a message type has a row in its section's field table."""
    section = _section(doc, kind)
    missing = [
        name
        for name in _wire_fields(SAMPLES[kind])
        if not re.search(rf"^\| `{re.escape(name)}` \|", section, flags=re.MULTILINE)
    ]
    assert not missing, f"`{kind}` fields missing from its section's table: {missing}"


@pytest.mark.parametrize("code", [c.value for c in ErrorCode])
def test_error_code_is_documented(doc: str, code: str) -> None:
    """Every error code appears in backticks, and in a row of the error table."""
    assert code in _backticked(doc), f"error code `{code}` is not documented"
    assert re.search(rf"^\| `{re.escape(code)}` \|", doc, flags=re.MULTILINE), (
        f"error code `{code}` has no row in the error table"
    )


@pytest.mark.parametrize("reason", [r.value for r in CancelReason])
def test_cancel_reason_is_documented(doc: str, reason: str) -> None:
    """Every cancel reason has a row in the cancel-reason table."""
    assert re.search(rf"^\| `{re.escape(reason)}` \|", doc, flags=re.MULTILINE), (
        f"cancel reason `{reason}` has no table row"
    )


@pytest.mark.parametrize("state", [s.value for s in CallState])
def test_call_state_is_documented(doc: str, state: str) -> None:
    """Every per-call state has a row in the state machine tables."""
    assert re.search(rf"^\| `{re.escape(state)}` \|", doc, flags=re.MULTILINE), (
        f"call state `{state}` has no table row"
    )


def test_call_inputs_are_documented(doc: str) -> None:
    """Every input of the per-call state machine is a column of the transition table."""
    header = f"| from \\ input | {' | '.join(f'`{i.value}`' for i in CallInput)} |"
    assert header in doc
