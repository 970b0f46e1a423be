"""Frames held for peers whose pipe is full: bounded per peer in frames and in bytes.

A send that would block is never dropped: the socket pump keeps the frame here, in order, and
retries it. A peer that stops reading would make that grow without bound, so each peer's held
frames are bounded twice (``docs/protocol.md`` § 11.3): in frames, and in bytes, since frames
alone did not bound memory (100,000 unread ``system/describe`` replies of 6.5 KB held 600 MB).
Past either bound the owner is told once, through ``on_stuck``.

Freed frames stay resident under glibc, which returns heap pages to the system only from the
top of the heap; so once a peer's held frames are gone (sent or forgotten) and enough bytes were
released, :attr:`HeldFrames.trim_due` asks the pump to hand the free pages back
(:func:`~wire._memory.release_memory`) at a moment when nothing still references them.

No socket and no clock: the pump passes a ``send`` callable in.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

from wire._errors import OverloadedError

__all__ = ["HeldFrames"]

#: Bytes released (sent or forgotten) after which the heap is trimmed, once the held frames
#: are gone. A trim costs about 5 ms per 64 MiB freed, so the few frames held through a
#: burst, which come and go, never pay for one.
_TRIM_AFTER = 8 * 1024 * 1024


class _Backlog(collections.deque[bytes]):
    """One peer's held frames, oldest first, with their total size."""

    def __init__(self) -> None:
        super().__init__()
        #: Bytes of the frames held.
        self.size = 0
        #: Whether ``on_stuck`` was called for this backlog (it is called once).
        self.stuck = False


class HeldFrames:
    """Every peer's held frames.

    Args:
        max_frames: Frames held per peer before ``on_stuck``.
        max_bytes: Bytes held per peer before ``on_stuck``.
        on_stuck: ``(peer)`` once, when ``peer``'s frames pass either bound.
    """

    def __init__(
        self, *, max_frames: int, max_bytes: int, on_stuck: Callable[[bytes], None]
    ) -> None:
        self._max_frames = max_frames
        self._max_bytes = max_bytes
        self._on_stuck = on_stuck
        #: Peer → its held frames; a peer is here only while it has some. The pump reads it
        #: directly on its hot path (a dict's truth value costs no call).
        self.by_peer: dict[bytes, _Backlog] = {}
        #: Bytes released since the heap was last trimmed.
        self._released = 0
        #: Whether enough was released to trim the heap; the pump trims and clears it.
        self.trim_due = False

    def hold(self, peer: bytes, frame: bytes) -> None:
        """Keep ``frame`` for ``peer``, after any frames held for it."""
        backlog = self.by_peer.get(peer)
        if backlog is None:
            backlog = self.by_peer[peer] = _Backlog()
        backlog.append(frame)
        backlog.size += len(frame)
        if not backlog.stuck and (
            len(backlog) > self._max_frames or backlog.size > self._max_bytes
        ):
            backlog.stuck = True
            self._on_stuck(peer)

    def refusal(self, peer: bytes) -> OverloadedError | None:
        """Why no more frames may be queued for ``peer`` (``None``: they may): its held frames
        reached a bound."""
        backlog = self.by_peer.get(peer)
        if backlog is None:
            return None
        if len(backlog) >= self._max_frames:
            return OverloadedError(
                f"peer is not reading: send backlog is full ({len(backlog)} frames)",
                details={"limit": self._max_frames},
            )
        if backlog.size >= self._max_bytes:
            return OverloadedError(
                f"peer is not reading: send backlog is full ({backlog.size} bytes)",
                details={"limit": self._max_bytes},
            )
        return None

    def held_for(self, peer: bytes) -> tuple[int, int] | None:
        """Frames and bytes held for ``peer``, or ``None`` when nothing is."""
        backlog = self.by_peer.get(peer) if self.by_peer else None
        return None if backlog is None else (len(backlog), backlog.size)

    def retry(self, send: Callable[[bytes, bytes], bool]) -> None:
        """Send held frames, oldest first per peer, while ``send(peer, frame)`` takes them."""
        by_peer = self.by_peer
        for peer, backlog in list(by_peer.items()):
            sent = 0
            while backlog and send(peer, backlog[0]):
                if by_peer.get(peer) is not backlog:
                    break  # the send found the peer gone: the rest is moot, tried or not
                sent += len(backlog.popleft())
            if by_peer.get(peer) is not backlog:
                continue  # forgotten meanwhile (it became unreachable), and counted then
            backlog.size -= sent
            self._released += sent
            if not backlog:
                del by_peer[peer]
                self._note_release()

    def forget(self, peer: bytes) -> None:
        """Discard what is held for ``peer``."""
        backlog = self.by_peer.pop(peer, None)
        if backlog is not None:
            self._released += backlog.size
            self._note_release()

    def frame_count(self) -> int:
        """Frames held, all peers together."""
        return sum(len(b) for b in self.by_peer.values())

    def byte_count(self) -> int:
        """Bytes held, all peers together."""
        return sum(b.size for b in self.by_peer.values())

    def _note_release(self) -> None:
        if self._released >= _TRIM_AFTER:
            self._released = 0
            self.trim_due = True
