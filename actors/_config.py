"""The server's TOML configuration: one table per layer or service.

Every key is checked at start: an unknown table, an unknown key or a value of the wrong type is
a :class:`ConfigError` that names the file, the table and the key, so a typo never silently
falls back to a default.

``[wire]``: ``heartbeat`` and ``peerTimeout`` (seconds), ``maxFrameBytes``, ``maxInFlight``,
``maxInFlightTotal``, ``maxBacklog``, ``maxBacklogBytes``, ``maxArgDepth``, ``maxArgItems``,
``maxQueryLength``. ``[actors]``: ``idleTimeout`` (seconds). ``[sessions]``: ``durability``
(``fsync``, ``flush`` or ``write-behind``), ``batchDelay`` (seconds) and ``inlineWrites``.
``[cluster]`` (read by ``serve --workers N --coordinator etcd://…``; command-line flags win):
``hostId``, ``storageMode`` (``local`` or ``shared``), ``storageId`` and ``workerEndpoint``.
``[fileReferences]`` and ``[sessionReferenceResolver]`` use upstream DSH's key names and are
validated by their services' own config classes, with upstream's messages.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import attrs

from actors._query_limits import DEFAULT_MAX_QUERY_LENGTH
from actors.file_references import FileReferencesConfig, FileReferencesConfigError
from actors.session_log import DEFAULT_BATCH_DELAY
from actors.session_references import SessionReferenceConfig, SessionReferenceError
from actors.store import Durability
from wire import ServerLimits

__all__ = ["ClusterConfig", "Config", "ConfigError", "load_config"]

#: Keys of ``[sessionReferenceResolver]`` (upstream's schema ignores others; we refuse them).
_SESSION_REFERENCE_KEYS = frozenset(
    {"maxReferences", "candidateLimit", "maxReferenceBytes", "referenceContextFraction"}
)
_DURABILITIES = ("fsync", "flush", "write-behind")


class ConfigError(ValueError):
    """The configuration file is unreadable or has an unknown or mistyped key."""


@attrs.frozen(kw_only=True)
class ClusterConfig:
    """``[cluster]``: where this host's workers sit in a multi-host cluster (docs/cluster.md)."""

    #: This host's name in the cluster (default: the hostname).
    host_id: str | None = None
    #: ``local`` (shards fail over only on this host's storage) or ``shared``.
    storage_mode: str = "local"
    #: The storage's name (default ``<host-id>:<data dir>``; required in shared mode).
    storage_id: str | None = None
    #: What workers bind, e.g. ``tcp://10.0.0.5:*`` (default: a private ipc endpoint).
    worker_endpoint: str | None = None
    #: State-changing calls per agent the supervisor hands on to the owner at once; the rest
    #: wait at the supervisor, where a cancel answers them at once (docs/scale-out.md, "Lanes").
    relay_writes_per_agent: int = 1


@attrs.frozen(kw_only=True)
class Config:
    wire: ServerLimits = attrs.Factory(ServerLimits)
    #: Seconds without calls after which an agent actor is passivated.
    idle_timeout: float = 300.0
    #: ``fsync`` (every append on stable storage before its reply), ``flush`` or
    #: ``write-behind``.
    durability: Durability = "fsync"
    #: Write-behind window (seconds).
    batch_delay: float = DEFAULT_BATCH_DELAY
    #: Write small appends on the event loop while the disk is fast (`WritePlacement`).
    inline_writes: bool = True
    file_references: FileReferencesConfig = attrs.Factory(FileReferencesConfig)
    session_references: SessionReferenceConfig = attrs.Factory(SessionReferenceConfig)
    #: Longest ``query`` argument of the completion endpoints (characters).
    max_query_length: int = DEFAULT_MAX_QUERY_LENGTH
    cluster: ClusterConfig = attrs.Factory(ClusterConfig)


_WIRE_KEYS: dict[str, tuple[str, type]] = {
    "heartbeat": ("heartbeat", float),
    "peerTimeout": ("peer_timeout", float),
    "maxFrameBytes": ("max_frame_bytes", int),
    "maxInFlight": ("max_in_flight", int),
    "maxInFlightTotal": ("max_in_flight_total", int),
    "maxBacklog": ("max_backlog", int),
    "maxBacklogBytes": ("max_backlog_bytes", int),
    "maxArgDepth": ("max_arg_depth", int),
    "maxArgItems": ("max_arg_items", int),
    # Not a wire limit but a limit on wire input; kept on Config, not ServerLimits.
    "maxQueryLength": ("max_query_length", int),
}
_ACTORS_KEYS: dict[str, tuple[str, type]] = {"idleTimeout": ("idle_timeout", float)}
_SESSIONS_KEYS: dict[str, tuple[str, type]] = {"batchDelay": ("batch_delay", float)}
#: [sessions] keys read before the numeric ones (named in the unknown-key message too).
_SESSIONS_EXTRA = ("durability", "inlineWrites")
_CLUSTER_TEXT_KEYS = {
    "hostId": "host_id",
    "storageMode": "storage_mode",
    "storageId": "storage_id",
    "workerEndpoint": "worker_endpoint",
}
#: ``[cluster]``'s one integer key (the others are text).
_RELAY_WRITES_KEY = "relayWritesPerAgent"
_STORAGE_MODES = ("local", "shared")


def load_config(path: Path | None) -> Config:
    """Read and validate ``path`` (``None``: all defaults).

    Raises:
        ConfigError: the file cannot be read or parsed, or holds an unknown or invalid key.
    """
    if path is None:
        return Config()
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc}") from None
    known = {"wire", "actors", "sessions", "fileReferences", "sessionReferenceResolver", "cluster"}
    for table, value in document.items():
        if table not in known:
            raise ConfigError(
                f"{path}: unknown table [{table}] (known: {', '.join(sorted(known))})"
            )
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: {table} must be a table")
    wire = _table(path, "wire", document.get("wire", {}), _WIRE_KEYS)
    actors = _table(path, "actors", document.get("actors", {}), _ACTORS_KEYS)
    max_query_length = wire.pop("max_query_length", DEFAULT_MAX_QUERY_LENGTH)
    limits = ServerLimits(**wire)
    if limits.peer_timeout <= limits.heartbeat:
        raise ConfigError(f"{path}: [wire] peerTimeout must be longer than heartbeat")
    sessions = dict(document.get("sessions", {}))
    durability = sessions.pop("durability", "fsync")
    if durability not in _DURABILITIES:
        raise ConfigError(
            f"{path}: [sessions] durability must be one of {', '.join(_DURABILITIES)}, "
            f"got {durability!r}"
        )
    inline_writes = sessions.pop("inlineWrites", True)
    if not isinstance(inline_writes, bool):
        raise ConfigError(
            f"{path}: [sessions] inlineWrites must be true or false, got {inline_writes!r}"
        )
    batch = _table(path, "sessions", sessions, _SESSIONS_KEYS)
    cluster = _cluster_table(path, document.get("cluster", {}))
    resolver = document.get("sessionReferenceResolver", {})
    unknown = sorted(set(resolver) - _SESSION_REFERENCE_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown key {unknown[0]!r} in [sessionReferenceResolver] "
            f"(known: {', '.join(sorted(_SESSION_REFERENCE_KEYS))})"
        )
    try:
        file_references = FileReferencesConfig.from_table(document.get("fileReferences", {}))
        session_references = SessionReferenceConfig.from_mapping(resolver)
    except FileReferencesConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except SessionReferenceError as exc:
        # "stops the server at start with SESSION_REFERENCE_INVALID_CONFIG and upstream's
        # message" (issue 4): the code, then upstream's text.
        raise ConfigError(f"{path}: {exc.code.value}: {exc.message}") from None
    return Config(
        wire=limits,
        idle_timeout=actors.get("idle_timeout", 300.0),
        durability=durability,
        batch_delay=batch.get("batch_delay", DEFAULT_BATCH_DELAY),
        inline_writes=inline_writes,
        file_references=file_references,
        session_references=session_references,
        max_query_length=max_query_length,
        cluster=cluster,
    )


def _cluster_table(path: Path, table: dict[str, Any]) -> ClusterConfig:
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key == _RELAY_WRITES_KEY:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"{path}: [cluster] {key} must be an integer of at least 1, got {value!r}"
                )
            out["relay_writes_per_agent"] = value
            continue
        if key not in _CLUSTER_TEXT_KEYS:
            known = sorted([*_CLUSTER_TEXT_KEYS, _RELAY_WRITES_KEY])
            raise ConfigError(
                f"{path}: unknown key {key!r} in [cluster] (known: {', '.join(known)})"
            )
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{path}: [cluster] {key} must be a non-empty string, got {value!r}")
        out[_CLUSTER_TEXT_KEYS[key]] = value
    if out.get("storage_mode", "local") not in _STORAGE_MODES:
        raise ConfigError(
            f"{path}: [cluster] storageMode must be local or shared, got {out['storage_mode']!r}"
        )
    return ClusterConfig(**out)


def _table(
    path: Path, name: str, table: dict[str, Any], schema: dict[str, tuple[str, type]]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in schema:
            known = sorted({*schema, *(_SESSIONS_EXTRA if name == "sessions" else ())})
            raise ConfigError(
                f"{path}: unknown key {key!r} in [{name}] (known: {', '.join(known)})"
            )
        attribute, kind = schema[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{path}: [{name}] {key} must be a number, got {value!r}")
        if kind is int and not isinstance(value, int):
            raise ConfigError(f"{path}: [{name}] {key} must be an integer, got {value!r}")
        if value <= 0:
            raise ConfigError(f"{path}: [{name}] {key} must be positive, got {value!r}")
        out[attribute] = kind(value)
    return out
