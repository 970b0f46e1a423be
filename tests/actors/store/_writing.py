"""A session being written, for the tests of an append's way to its reply."""

from __future__ import annotations

from actors._store_services import SessionServices
from actors.session_log._header import SessionHeader
from actors.store._events import EventInput
from actors.store._state import SessionState


def prompt(text: str) -> list[EventInput]:
    """One ``user/message`` whose id is ``text``."""
    message = {
        "id": text,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }
    return [EventInput(type="user/message", data=message, surface_op="append")]


async def writing_session(services: SessionServices) -> SessionState:
    """Session ``s1`` with its writer open and its listed facts recorded (seq 0 written)."""
    store = services.directory
    await store.create(SessionHeader(id="s1", created_at=1_767_225_600_000, cwd="/w"))
    state = await store.load("s1")
    assert state is not None
    await state.append(prompt("first"))
    return state
