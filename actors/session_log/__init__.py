"""DSH session logs: one agent's session on disk, read and written exactly as DSH does.

Spec: ``session-log-format`` in the DSH specs. One job per private module:

- ``_json`` (upstream's JSON text), ``_header`` (the session header), ``_events`` (event records),
  ``_legacy`` (older event shapes), ``_sequence`` (sequence numbers), ``_surface`` (the folded
  surface a reader sees), ``_titles`` (titles and subagent labels);
- ``_chunks`` and ``_zstd`` (the framing of plain and zstd logs), ``_scan`` (finding frames in a
  damaged file), ``_reader`` (loading a whole session), ``_repair`` and ``_epoch_repair`` (what a
  reader forgives and how a torn tail is cut);
- ``_layout`` and ``_files`` (where logs live in a sessions root), ``_epochs`` (fencing epochs
  written into the log), ``_idempotency`` (idempotency keys written into the log), ``_writer``
  (the single writer that appends and fsyncs), ``_batch`` (what one batch writes), ``_resume``
  (reopening a log to append), ``_title_fold`` (the title a writer keeps current),
  ``_checkpoint`` (what a writer goes back to when a batch fails);
- ``_errors`` (typed read and write errors).

Nothing here knows about actors, the wire or the cluster: plain functions and attrs classes.
"""

from actors.session_log._epochs import FENCE_TYPES as FENCE_TYPES
from actors.session_log._epochs import StaleEpochError as StaleEpochError
from actors.session_log._errors import LogReadError as LogReadError
from actors.session_log._errors import LogStorageError as LogStorageError
from actors.session_log._errors import LogWriteError as LogWriteError
from actors.session_log._errors import StorageReason as StorageReason
from actors.session_log._errors import errno_name as errno_name
from actors.session_log._errors import storage_reason as storage_reason
from actors.session_log._files import LogFile as LogFile
from actors.session_log._files import fsync_dir as fsync_dir
from actors.session_log._header import HeaderError as HeaderError
from actors.session_log._header import SessionHeader as SessionHeader
from actors.session_log._idempotency import IDEMPOTENCY_KEY_TYPE as IDEMPOTENCY_KEY_TYPE
from actors.session_log._idempotency import CreationKey as CreationKey
from actors.session_log._idempotency import KeyRecord as KeyRecord
from actors.session_log._idempotency import key_record as key_record
from actors.session_log._idempotency import key_records as key_records
from actors.session_log._json import dumps_line as dumps_line
from actors.session_log._json import parse_line as parse_line
from actors.session_log._layout import MAX_SEGMENT_BYTES as MAX_SEGMENT_BYTES
from actors.session_log._layout import Compression as Compression
from actors.session_log._layout import compression_of as compression_of
from actors.session_log._layout import decode_segment as decode_segment
from actors.session_log._layout import find_session_log as find_session_log
from actors.session_log._layout import fits_one_segment as fits_one_segment
from actors.session_log._layout import iter_session_logs as iter_session_logs
from actors.session_log._layout import log_path as log_path
from actors.session_log._layout import log_suffix as log_suffix
from actors.session_log._legacy import check_new_event as check_new_event
from actors.session_log._reader import LoadedSession as LoadedSession
from actors.session_log._reader import load_session as load_session
from actors.session_log._reader import read_header as read_header
from actors.session_log._surface import SurfaceFolder as SurfaceFolder
from actors.session_log._surface import SurfaceSnapshot as SurfaceSnapshot
from actors.session_log._titles import normalize_title as normalize_title
from actors.session_log._titles import session_title as session_title
from actors.session_log._titles import subagent_label as subagent_label
from actors.session_log._write_statistics import WRITES as WRITES
from actors.session_log._write_statistics import WriteStatistics as WriteStatistics
from actors.session_log._writer import DEFAULT_BATCH_DELAY as DEFAULT_BATCH_DELAY
from actors.session_log._writer import SessionLogWriter as SessionLogWriter
from actors.session_log._zstd import compress_frame as compress_frame
from actors.session_log._zstd import scan_frames as scan_frames

__all__ = [
    "DEFAULT_BATCH_DELAY",
    "FENCE_TYPES",
    "IDEMPOTENCY_KEY_TYPE",
    "MAX_SEGMENT_BYTES",
    "WRITES",
    "Compression",
    "CreationKey",
    "HeaderError",
    "KeyRecord",
    "LoadedSession",
    "LogFile",
    "LogReadError",
    "LogStorageError",
    "LogWriteError",
    "SessionHeader",
    "SessionLogWriter",
    "StaleEpochError",
    "StorageReason",
    "SurfaceFolder",
    "SurfaceSnapshot",
    "WriteStatistics",
    "check_new_event",
    "compress_frame",
    "compression_of",
    "decode_segment",
    "dumps_line",
    "errno_name",
    "find_session_log",
    "fits_one_segment",
    "fsync_dir",
    "iter_session_logs",
    "key_record",
    "key_records",
    "load_session",
    "log_path",
    "log_suffix",
    "normalize_title",
    "parse_line",
    "read_header",
    "scan_frames",
    "session_title",
    "storage_reason",
    "subagent_label",
]
