"""What this process has written to session logs: batches, events, bytes, and the time each
fsync took (``serve --metrics``). One set per process, like the disk it describes."""

from __future__ import annotations

import attrs

from wire import Histogram

__all__ = ["WRITES", "WriteStatistics"]


@attrs.define(kw_only=True)
class WriteStatistics:
    """Counters of completed writes, added to as they complete."""

    #: Batches written (a session's first batch publishes its file with the header).
    batches: int = 0
    #: Events those batches held.
    events: int = 0
    #: Bytes written to logs (after compression).
    bytes: int = 0
    #: Seconds each data fsync of a batch took.
    fsync_seconds: Histogram = attrs.Factory(Histogram)


#: This process's writes.
WRITES = WriteStatistics()
