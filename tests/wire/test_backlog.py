"""Held frames (``wire/_backlog.py``): retried oldest first, and given up at once for a peer
that is gone."""

from __future__ import annotations

from wire._backlog import HeldFrames


def held(peers: dict[bytes, int]) -> HeldFrames:
    frames = HeldFrames(max_frames=100_000, max_bytes=1 << 30, on_stuck=lambda peer: None)
    for peer, count in peers.items():
        for n in range(count):
            frames.hold(peer, b"%d" % n)
    return frames


def test_retry_sends_oldest_first_and_stops_where_a_pipe_is_full() -> None:
    frames = held({b"a": 5})
    sent: list[bytes] = []

    def send(peer: bytes, frame: bytes) -> bool:
        if len(sent) == 3:
            return False
        sent.append(frame)
        return True

    frames.retry(send)
    assert sent == [b"0", b"1", b"2"]
    assert frames.held_for(b"a") == (2, 2)


def test_a_peer_found_gone_while_retrying_costs_one_send_not_one_per_frame() -> None:
    """A send finds the peer unreachable and the pump forgets it (``on_unreachable``): its
    other held frames are moot, and another peer's frames still go out. (Trying each one
    again cost an exception apiece: with 10,000 held, a stall of every other client.)"""
    frames = held({b"gone": 10_000, b"other": 3})
    tries: list[bytes] = []

    def send(peer: bytes, frame: bytes) -> bool:
        tries.append(peer)
        if peer == b"gone":
            frames.forget(peer)  # what the pump's on_unreachable leads to
        return True  # the frame is moot, as the pump's send says

    frames.retry(send)
    assert tries.count(b"gone") == 1
    assert tries.count(b"other") == 3
    assert frames.held_for(b"gone") is None and frames.held_for(b"other") is None
    assert frames.frame_count() == 0
