"""The per-call transition table: every (state, input) pair either moves or raises."""

from __future__ import annotations

import itertools

import pytest

from wire import LocalProtocolError
from wire._state import CALL_TRANSITIONS, CallInput, CallState, next_call_state


@pytest.mark.parametrize(("state", "event"), list(itertools.product(CallState, CallInput)))
def test_every_pair(state: CallState, event: CallInput) -> None:
    """A pair in the table moves to its target; any other pair is a LocalProtocolError."""
    if (state, event) in CALL_TRANSITIONS:
        assert next_call_state(state, event) is CALL_TRANSITIONS[(state, event)]
    else:
        with pytest.raises(LocalProtocolError, match=rf"^can't handle {event.value} when"):
            next_call_state(state, event)


def test_done_is_final() -> None:
    """No input leaves DONE: a second terminal frame is impossible."""
    assert not any(state is CallState.DONE for state, _ in CALL_TRANSITIONS)


def test_only_finish_reaches_done() -> None:
    """Exactly the FINISH input produces the terminal state."""
    assert {
        event for (_, event), target in CALL_TRANSITIONS.items() if target is CallState.DONE
    } == {CallInput.FINISH}


def test_every_live_state_can_finish() -> None:
    """Every state but DONE has a way to its single terminal frame."""
    for state in CallState:
        if state is not CallState.DONE:
            assert (state, CallInput.FINISH) in CALL_TRANSITIONS
