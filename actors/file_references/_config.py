"""Configuration of ``fileReferences/list``: the ``[fileReferences]`` TOML table.

Upstream's three keys keep their names, defaults and error messages (spec §1.3, §6.1); the keys
we add are off by default so that a default configuration behaves exactly like upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

__all__ = [
    "DEFAULT_EXCLUDED_DIRECTORIES",
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_MAX_RESULTS",
    "FileReferencesConfig",
    "FileReferencesConfigError",
]

DEFAULT_MAX_RESULTS: Final = 20
DEFAULT_MAX_ENTRIES: Final = 10_000
DEFAULT_EXCLUDED_DIRECTORIES: Final = (".git", "node_modules")

# JavaScript's Number.MAX_SAFE_INTEGER: upstream validates "positive safe integer".
_MAX_SAFE_INTEGER: Final = 2**53 - 1
# Upstream prefixes its provider messages with the package name (spec §6.1); the issue asks for
# upstream's messages, so we keep the prefix verbatim.
_PREFIX: Final = "file-reference-local: "


class FileReferencesConfigError(ValueError):
    """A ``[fileReferences]`` value is invalid; ``key`` names the offending key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def _positive_safe_integer(key: str, value: object) -> int:
    # Upstream checks Number.isSafeInteger(value) && value > 0. JavaScript has no separate float
    # type, so an integral TOML float such as 20.0 is the same number there and is accepted.
    if isinstance(value, bool):
        pass
    elif isinstance(value, int) and 0 < value <= _MAX_SAFE_INTEGER:
        return value
    elif isinstance(value, float) and value.is_integer() and 0 < value <= _MAX_SAFE_INTEGER:
        return int(value)
    raise FileReferencesConfigError(key, f"{_PREFIX}{key} must be a positive safe integer")


def _basenames(value: object) -> tuple[str, ...]:
    key = "excludedDirectories"
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise FileReferencesConfigError(
            key, f"{_PREFIX}{key} must be an array of non-empty directory basenames"
        )
    for name in value:
        # "each entry non-empty and containing neither / nor \ (a basename)" (spec §1.3);
        # duplicates and "." or ".." are not rejected upstream, so neither are they here.
        if not isinstance(name, str) or not name or "/" in name or "\\" in name:
            raise FileReferencesConfigError(
                key, f"{_PREFIX}{key} entries must be non-empty directory basenames"
            )
    return tuple(value)


def _boolean(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise FileReferencesConfigError(key, f"{_PREFIX}{key} must be a boolean")
    return value


def _max_results(value: object) -> int:
    return _positive_safe_integer("maxResults", value)


def _max_entries(value: object) -> int:
    return _positive_safe_integer("maxEntries", value)


def _check_flag(_: object, attribute: attrs.Attribute[bool], value: bool) -> None:
    _boolean(_WIRE_NAMES[attribute.name], value)


@attrs.frozen(kw_only=True)
class FileReferencesConfig:
    """Resolved settings of the file reference provider.

    Direct construction validates like :meth:`from_table`, with the same messages.
    """

    max_results: int = attrs.field(default=DEFAULT_MAX_RESULTS, converter=_max_results)
    """``maxResults``: most candidates one call returns (upstream 20)."""
    max_entries: int = attrs.field(default=DEFAULT_MAX_ENTRIES, converter=_max_entries)
    """``maxEntries``: most files+directories kept in one agent's index (upstream 10,000)."""
    excluded_directories: tuple[str, ...] = attrs.field(
        default=DEFAULT_EXCLUDED_DIRECTORIES, converter=_basenames
    )
    """``excludedDirectories``: directory basenames never indexed, listed or navigated."""
    respect_ignore_files: bool = attrs.field(default=False, validator=_check_flag)
    """``respectIgnoreFiles`` (ours): prune ``.gitignore``/``.ignore`` matches from the index."""
    unlimited_entries: bool = attrs.field(default=False, validator=_check_flag)
    """``unlimitedEntries`` (ours): index the whole tree, ignoring ``maxEntries``."""

    @property
    def entry_cap(self) -> int | None:
        """The index entry cap in force, or ``None`` when ``unlimitedEntries`` lifts it."""
        return None if self.unlimited_entries else self.max_entries

    @classmethod
    def from_table(cls, table: Mapping[str, object]) -> FileReferencesConfig:
        """Build a config from a parsed ``[fileReferences]`` TOML table.

        Args:
            table: the table's keys and values as ``tomllib`` returns them; absent keys take
                their defaults.

        Returns:
            The validated configuration.

        Raises:
            FileReferencesConfigError: the table is not a mapping, has an unknown key, or a value
                has the wrong type or range; ``key`` names the key, the message says why.
        """
        if not isinstance(table, Mapping):
            raise FileReferencesConfigError(
                "fileReferences", f"{_PREFIX}[fileReferences] must be a table"
            )
        unknown = sorted(str(key) for key in table if key not in _FIELD_NAMES)
        if unknown:
            known = ", ".join(sorted(_FIELD_NAMES))
            raise FileReferencesConfigError(
                unknown[0],
                f"{_PREFIX}unknown key {unknown[0]!r} in [fileReferences] (known: {known})",
            )
        values: dict[str, object] = {}
        for wire_name, value in table.items():
            field = _FIELD_NAMES[wire_name]
            if wire_name in ("maxResults", "maxEntries"):
                values[field] = _positive_safe_integer(wire_name, value)
            elif wire_name == "excludedDirectories":
                values[field] = _basenames(value)
            else:
                values[field] = _boolean(wire_name, value)
        return cls(**values)  # type: ignore[arg-type]

    def to_table(self) -> dict[str, object]:
        """Return the configuration as a ``[fileReferences]`` table (round-trips ``from_table``)."""
        return {
            "maxResults": self.max_results,
            "maxEntries": self.max_entries,
            "excludedDirectories": list(self.excluded_directories),
            "respectIgnoreFiles": self.respect_ignore_files,
            "unlimitedEntries": self.unlimited_entries,
        }


_FIELD_NAMES: Final = {
    "maxResults": "max_results",
    "maxEntries": "max_entries",
    "excludedDirectories": "excluded_directories",
    "respectIgnoreFiles": "respect_ignore_files",
    "unlimitedEntries": "unlimited_entries",
}
_WIRE_NAMES: Final = {field: wire for wire, field in _FIELD_NAMES.items()}
