"""The session store: where agent actors get their sessions, and the caches that make it fast.

- ``_session_store`` (`SessionStore`: create, load and list sessions in one or two sessions
  roots), ``_state`` (`SessionState`, one live session) and ``_writer_side`` (its writer's
  blocking steps), ``_events`` (validating and recording appended events), ``_fencing`` (epoch
  fencing of a shared store), ``_idempotency`` and ``_route_keys`` (idempotency keys),
  ``_lock`` (the cross-process lock of a data directory), ``_options`` (`StoreOptions`),
  ``_write_failures`` (what a caller is told when the disk refuses a write);
- ``_projection_cache`` (the SQLite cache of titles, cwd and createdAt that candidates reads at
  keystroke rate), ``_cache_rows`` (its rows) and ``_cache_schema`` (its file),
  ``_indexing`` (building and refreshing it from the logs), and ``_import`` (laying loose
  logs into a sessions root).

Built on `actors.session_log` and `actors.session_references`; never imports the actor runtime,
the command line or the cluster. The ``@Remote`` services over the store (``sessions/*``) are
runtime modules: ``actors._session_service`` and ``actors._store_services``.
"""

from actors.store._cache_rows import CachedSession as CachedSession
from actors.store._cache_rows import ListCursor as ListCursor
from actors.store._cache_rows import SessionListing as SessionListing
from actors.store._events import AppendRejectedError as AppendRejectedError
from actors.store._events import EventInput as EventInput
from actors.store._events import record_event as record_event
from actors.store._events import title_event as title_event
from actors.store._idempotency import KEY_REUSED as KEY_REUSED
from actors.store._idempotency import MAX_KEY_LENGTH as MAX_KEY_LENGTH
from actors.store._idempotency import IdempotencyPolicy as IdempotencyPolicy
from actors.store._idempotency import KeyedRequest as KeyedRequest
from actors.store._idempotency import event_args as event_args
from actors.store._idempotency import keyed_request as keyed_request
from actors.store._idempotency import keyed_session_id as keyed_session_id
from actors.store._idempotency import session_id_for_key as session_id_for_key
from actors.store._import import ImportSummary as ImportSummary
from actors.store._import import find_session_logs as find_session_logs
from actors.store._import import import_session_logs as import_session_logs
from actors.store._import import render_import_summary as render_import_summary
from actors.store._indexing import IndexingError as IndexingError
from actors.store._indexing import ProgressBar as ProgressBar
from actors.store._indexing import detect_compression as detect_compression
from actors.store._indexing import has_session_logs as has_session_logs
from actors.store._indexing import index_sessions as index_sessions
from actors.store._indexing import no_sessions_message as no_sessions_message
from actors.store._indexing import render_summary as render_summary
from actors.store._options import Durability as Durability
from actors.store._options import SessionRoot as SessionRoot
from actors.store._options import StoreOptions as StoreOptions
from actors.store._projection_cache import ProjectionCache as ProjectionCache
from actors.store._projection_cache import ProjectionCacheError as ProjectionCacheError
from actors.store._projection_cache import RecordedModelRoute as RecordedModelRoute
from actors.store._session_store import SessionStore as SessionStore
from actors.store._state import SessionState as SessionState

__all__ = [
    "KEY_REUSED",
    "MAX_KEY_LENGTH",
    "AppendRejectedError",
    "CachedSession",
    "Durability",
    "EventInput",
    "IdempotencyPolicy",
    "ImportSummary",
    "IndexingError",
    "KeyedRequest",
    "ListCursor",
    "ProgressBar",
    "ProjectionCache",
    "ProjectionCacheError",
    "RecordedModelRoute",
    "SessionListing",
    "SessionRoot",
    "SessionState",
    "SessionStore",
    "StoreOptions",
    "detect_compression",
    "event_args",
    "find_session_logs",
    "has_session_logs",
    "import_session_logs",
    "index_sessions",
    "keyed_request",
    "keyed_session_id",
    "no_sessions_message",
    "record_event",
    "render_import_summary",
    "render_summary",
    "session_id_for_key",
    "title_event",
]
