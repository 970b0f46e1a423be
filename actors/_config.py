"""The server's TOML configuration: one table per layer or service.

Every key is checked at start: an unknown table, an unknown key or a value of the wrong type is
a :class:`ConfigError` that names the file, the table and the key, so a typo never silently
falls back to a default.

``[wire]``: ``heartbeat`` and ``peerTimeout`` (seconds), ``maxFrameBytes``, ``maxInFlight``,
``maxInFlightTotal``. ``[actors]``: ``idleTimeout`` (seconds). Tables of services that are
configured elsewhere (``[fileReferences]``, ``[sessionReferences]``) are kept raw in
:attr:`Config.services` for those services to validate.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from wire import ServerLimits

__all__ = ["Config", "ConfigError", "load_config"]

#: Service tables passed through to their services, which validate them.
SERVICE_TABLES = ("fileReferences", "sessionReferences")


class ConfigError(ValueError):
    """The configuration file is unreadable or has an unknown or mistyped key."""


@attrs.frozen(kw_only=True)
class Config:
    wire: ServerLimits = attrs.Factory(ServerLimits)
    #: Seconds without calls after which an agent actor is passivated.
    idle_timeout: float = 300.0
    services: Mapping[str, Mapping[str, Any]] = attrs.Factory(dict)


_WIRE_KEYS: dict[str, tuple[str, type]] = {
    "heartbeat": ("heartbeat", float),
    "peerTimeout": ("peer_timeout", float),
    "maxFrameBytes": ("max_frame_bytes", int),
    "maxInFlight": ("max_in_flight", int),
    "maxInFlightTotal": ("max_in_flight_total", int),
}
_ACTORS_KEYS: dict[str, tuple[str, type]] = {"idleTimeout": ("idle_timeout", float)}


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
    known = {"wire", "actors", *SERVICE_TABLES}
    for table, value in document.items():
        if table not in known:
            raise ConfigError(
                f"{path}: unknown table [{table}] (known: {', '.join(sorted(known))})"
            )
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: {table} must be a table")
    wire = _table(path, "wire", document.get("wire", {}), _WIRE_KEYS)
    actors = _table(path, "actors", document.get("actors", {}), _ACTORS_KEYS)
    limits = ServerLimits(**wire)
    if limits.peer_timeout <= limits.heartbeat:
        raise ConfigError(f"{path}: [wire] peerTimeout must be longer than heartbeat")
    return Config(
        wire=limits,
        idle_timeout=actors.get("idle_timeout", 300.0),
        services={t: document[t] for t in SERVICE_TABLES if t in document},
    )


def _table(
    path: Path, name: str, table: dict[str, Any], schema: dict[str, tuple[str, type]]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in schema:
            raise ConfigError(
                f"{path}: unknown key {key!r} in [{name}] (known: {', '.join(sorted(schema))})"
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
