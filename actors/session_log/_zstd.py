"""Zstandard frame primitives for `.jsonl.zstd` session logs.

`session-log-format` §9. A transcript is a plain concatenation of independent,
checksummed frames (RFC 8878): frame 1 holds exactly the header line, every later
frame one durable append batch. Frames are located structurally (without decoding),
so a torn final frame can be told apart from a damaged complete one.
"""

from __future__ import annotations

import threading

import zstandard

from actors.session_log._errors import LogCorruptError

__all__ = ["FrameScan", "compress_frame", "decode_frame", "decode_torn_prefix", "scan_frames"]

_MAGIC = b"\x28\xb5\x2f\xfd"


class _Codecs(threading.local):
    """One compressor and one decompressor per thread.

    python-zstandard: "assume that no two methods of ZstdCompressor instances can be called
    from multiple Python threads simultaneously" (the same holds for decompressors). The
    store compresses and decodes in worker threads, several sessions at once; with one shared
    instance, concurrent calls crash the interpreter (SIGSEGV).
    """

    def __init__(self) -> None:
        self.compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
        self.decompressor = zstandard.ZstdDecompressor()


_CODECS = _Codecs()


class FrameScan:
    """Complete frame ranges of a buffer, and where an incomplete final frame starts."""

    __slots__ = ("frames", "torn_start")

    def __init__(self, frames: list[tuple[int, int]], torn_start: int | None) -> None:
        self.frames = frames
        """(start, end) byte ranges of complete frames, in file order."""
        self.torn_start = torn_start
        """Start of an incomplete final frame, when EOF interrupts one."""


def scan_frames(buffer: bytes, max_frames: int | None = None) -> FrameScan:
    """Locate complete frames without decompressing them (upstream `scanZstdFrames`).

    EOF anywhere inside the final frame (even inside its magic) makes it torn.

    Raises:
        LogCorruptError: bad magic, a reserved frame-header bit, or a reserved block type
            in the structure.
    """
    frames: list[tuple[int, int]] = []
    size = len(buffer)
    offset = 0
    while offset < size:
        start = offset
        if size - offset < 4:
            return FrameScan(frames, start)
        if buffer[offset : offset + 4] != _MAGIC:
            raise LogCorruptError(
                f"corrupt Zstandard session log: invalid frame magic at byte {offset}"
            )
        offset += 4
        if offset == size:
            return FrameScan(frames, start)
        descriptor = buffer[offset]
        offset += 1
        if descriptor & 0x18:
            raise LogCorruptError(
                f"corrupt Zstandard session log: reserved frame-header bit at byte {offset - 1}"
            )
        content_size_flag = descriptor >> 6
        single_segment = bool(descriptor & 0x20)
        checksum = bool(descriptor & 0x04)
        dictionary_flag = descriptor & 0x03
        dictionary_bytes = 4 if dictionary_flag == 3 else dictionary_flag
        if content_size_flag == 0:
            content_size_bytes = 1 if single_segment else 0
        else:
            content_size_bytes = 1 << content_size_flag
        header_rest = (0 if single_segment else 1) + dictionary_bytes + content_size_bytes
        if size - offset < header_rest:
            return FrameScan(frames, start)
        offset += header_rest
        while True:
            if size - offset < 3:
                return FrameScan(frames, start)
            block_header = int.from_bytes(buffer[offset : offset + 3], "little")
            offset += 3
            block_type = (block_header >> 1) & 0x03
            if block_type == 0x03:
                raise LogCorruptError(
                    f"corrupt Zstandard session log: reserved block type at byte {offset - 3}"
                )
            payload = 1 if block_type == 0x01 else block_header >> 3  # RLE blocks hold 1 byte
            if size - offset < payload:
                return FrameScan(frames, start)
            offset += payload
            if block_header & 1:
                break
        if checksum:
            if size - offset < 4:
                return FrameScan(frames, start)
            offset += 4
        frames.append((start, offset))
        if max_frames is not None and len(frames) == max_frames:
            return FrameScan(frames, None)
    return FrameScan(frames, None)


def compress_frame(plaintext: bytes) -> bytes:
    """Compress one independently decodable, checksummed frame (default level, no dictionary)."""
    return _CODECS.compressor.compress(plaintext)


def decode_frame(frame: bytes, *, offset: int = 0) -> bytes:
    """Decode one structurally complete frame, validating its checksum.

    Raises:
        LogCorruptError: decompression or checksum validation fails.
    """
    decoder = _CODECS.decompressor.decompressobj()
    try:
        plaintext = decoder.decompress(frame)
    except zstandard.ZstdError as error:
        raise LogCorruptError(
            f"corrupt Zstandard session log: frame at byte {offset} failed to decode ({error})"
        ) from error
    if not decoder.eof:
        raise LogCorruptError(
            f"corrupt Zstandard session log: frame at byte {offset} is incomplete"
        )
    return plaintext


def decode_torn_prefix(partial: bytes) -> bytes:
    """Recover the plaintext decodable from an incomplete final frame (flush-mode prefix).

    A frame can end before any plaintext is decodable; that yields ``b""``, never an error.
    """
    try:
        return _CODECS.decompressor.decompressobj().decompress(partial)
    except zstandard.ZstdError:
        return b""
