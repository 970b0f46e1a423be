"""The projection cache's SQLite file: its schema, its upgrades and how it is opened.

The ``sessions``, ``rejected``, ``roots`` and ``meta`` tables are derived (the indexer rebuilds
them from the logs), so a file of another schema version simply drops them; ``model_routes`` and
``model_route_keys`` (the idempotency keys of ``sessions/setModelRoute``) are not derived (hosts
record the routes) and survive. Connections use a WAL journal and
``synchronous=NORMAL``: the cache can always be rebuilt, so a commit needs no fsync.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["SCHEMA_VERSION", "connect", "migrate"]

SCHEMA_VERSION = 2
"""``PRAGMA user_version`` of the layout below; any other version rebuilds the derived tables.

Version 2 added ``sessions.load_error``: a log whose header is listed but whose body fails
has a row (version 1 kept it in ``rejected`` only)."""

_DERIVED = ("sessions", "rejected", "roots", "meta")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) STRICT;
CREATE TABLE IF NOT EXISTS roots (
    id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, compression TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    root_id INTEGER NOT NULL,
    path TEXT NOT NULL,
    cwd TEXT,
    created_at INTEGER NOT NULL,
    parent_session TEXT,
    origin TEXT,
    title TEXT,
    subagent_label TEXT,
    last_seq INTEGER,
    file_size INTEGER NOT NULL,
    file_mtime_ns INTEGER NOT NULL,
    load_error TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS sessions_newest ON sessions (created_at DESC, id ASC);
CREATE INDEX IF NOT EXISTS sessions_by_root ON sessions (root_id, path);
CREATE TABLE IF NOT EXISTS rejected (
    path TEXT PRIMARY KEY,
    root_id INTEGER NOT NULL,
    file_size INTEGER NOT NULL,
    file_mtime_ns INTEGER NOT NULL,
    reason TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS model_routes (
    session_id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    context_window INTEGER,
    updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS model_route_keys (
    session_id TEXT NOT NULL,
    key TEXT NOT NULL,
    request TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    context_window INTEGER,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, key)
) STRICT;
CREATE INDEX IF NOT EXISTS model_route_keys_age ON model_route_keys (session_id, updated_at);
"""


def connect(path: Path) -> sqlite3.Connection:
    """A connection to the cache file (WAL, ``synchronous=NORMAL``, a 10 s busy timeout)."""
    db = sqlite3.connect(path, timeout=10.0, check_same_thread=False, isolation_level="DEFERRED")
    db.execute("PRAGMA busy_timeout = 10000")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    return db


def migrate(db: sqlite3.Connection) -> None:
    """Create the schema, first dropping the derived tables of a file of another version."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version not in (0, SCHEMA_VERSION):
        # A derived cache: drop and rebuild; recorded model routes are kept.
        with db:
            for table in _DERIVED:
                db.execute(f"DROP TABLE IF EXISTS {table}")
    # Idempotent, so processes opening one new file at once do not conflict.
    db.executescript(_SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION};")
