"""The session store: where agent actors get their sessions, and the caches that make it fast.

- ``_session_store`` (`SessionStore`: create, load and list sessions in one or two sessions
  roots), ``_state`` (`SessionState`, one live session) and ``_writer_side`` (its writer's
  blocking steps), ``_events`` (validating and recording appended events), ``_fencing`` (epoch
  fencing of a shared store), ``_lock`` (the cross-process lock of a data directory),
  ``_options`` (`StoreOptions`);
- ``_projection_cache`` (the SQLite cache of titles, cwd and createdAt that candidates reads at
  keystroke rate) and ``_indexing`` (building and refreshing it from the logs).

Built on `actors.session_log` and `actors.session_references`; never imports the actor runtime,
the command line or the cluster. The ``@Remote`` services over the store (``sessions/*``) are
runtime modules: ``actors._session_service`` and ``actors._store_services``.
"""

from actors.store._events import AppendRejectedError as AppendRejectedError
from actors.store._events import EventInput as EventInput
from actors.store._events import record_event as record_event
from actors.store._events import title_event as title_event
from actors.store._indexing import IndexingError as IndexingError
from actors.store._indexing import ProgressBar as ProgressBar
from actors.store._indexing import detect_compression as detect_compression
from actors.store._indexing import index_sessions as index_sessions
from actors.store._indexing import render_summary as render_summary
from actors.store._options import Durability as Durability
from actors.store._options import SessionRoot as SessionRoot
from actors.store._options import StoreOptions as StoreOptions
from actors.store._projection_cache import CachedSession as CachedSession
from actors.store._projection_cache import ListCursor as ListCursor
from actors.store._projection_cache import ProjectionCache as ProjectionCache
from actors.store._projection_cache import ProjectionCacheError as ProjectionCacheError
from actors.store._projection_cache import RecordedModelRoute as RecordedModelRoute
from actors.store._projection_cache import SessionListing as SessionListing
from actors.store._session_store import SessionStore as SessionStore
from actors.store._state import SessionState as SessionState

__all__ = [
    "AppendRejectedError",
    "CachedSession",
    "Durability",
    "EventInput",
    "IndexingError",
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
    "index_sessions",
    "record_event",
    "render_summary",
    "title_event",
]
