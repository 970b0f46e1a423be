"""docs/configuration.md lists exactly the keys ``load_config`` accepts, with their defaults.

The accepted keys are derived from the config classes: each table's keys are the attrs fields
that hold its values (camelCase), kept when ``load_config`` takes the key, so a field that is
not a key (``ServerLimits.name``) drops out. The defaults are the classes' defaults.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import attrs
import pytest

from actors import Config, ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "configuration.md"

#: Where each table's values land in `Config`: a field holding an attrs class contributes the
#: class's fields, any other field itself.
TABLE_FIELDS: dict[str, tuple[str, ...]] = {
    "wire": ("wire", "max_query_length"),
    "actors": ("idle_timeout",),
    "sessions": ("durability", "batch_delay", "inline_writes"),
    "cluster": ("cluster",),
    "fileReferences": ("file_references",),
    "sessionReferenceResolver": ("session_references",),
}

#: A documented default of a key that is absent by default.
UNSET = None


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def class_keys() -> dict[tuple[str, str], Any]:
    """(table, key) → class default, for every field that holds a table's value."""
    defaults = Config()
    keys: dict[tuple[str, str], Any] = {}
    for table, fields in TABLE_FIELDS.items():
        for field in fields:
            value = getattr(defaults, field)
            if attrs.has(type(value)):
                for inner in attrs.fields(type(value)):
                    keys[table, camel(inner.name)] = getattr(value, inner.name)
            else:
                keys[table, camel(field)] = value
    return keys


def loader_error(tmp_path: Path, text: str) -> str | None:
    """The message of `ConfigError` for a file holding ``text``, or None if it loads."""
    path = tmp_path / "probe.toml"
    path.write_text(text, "utf-8")
    try:
        load_config(path)
    except ConfigError as exc:
        return str(exc)
    return None


def toml_value(value: Any) -> str:
    if isinstance(value, tuple | list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def accepted_keys(tmp_path: Path) -> dict[tuple[str, str], Any]:
    """The class keys that ``load_config`` takes (a value may be refused, the key is not)."""
    accepted = {}
    for (table, key), default in class_keys().items():
        probe = toml_value(default) if default is not None else '"probe"'
        error = loader_error(tmp_path, f"[{table}]\n{key} = {probe}\n")
        if error is None or f"unknown key {key!r}" not in error:
            accepted[table, key] = default
    return accepted


def documented() -> dict[tuple[str, str], Any]:
    """(table, key) → default, from the tables of docs/configuration.md (``unset``: None)."""
    rows: dict[tuple[str, str], Any] = {}
    table = None
    for number, line in enumerate(REFERENCE.read_text("utf-8").splitlines(), 1):
        heading = re.match(r"^## `\[(\w+)\]`", line)
        if heading:
            table = heading[1]
            continue
        if not line.startswith("| `") or table is None:
            continue
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        assert len(cells) == 5 and all(cells), f"configuration.md:{number}: five cells needed"
        key, default = cells[0].strip("`"), cells[2]
        assert (table, key) not in rows, f"configuration.md:{number}: [{table}] {key} twice"
        if default == "unset":
            rows[table, key] = UNSET
        else:
            assert default.startswith("`") and default.endswith("`"), (
                f"configuration.md:{number}: a default is `TOML` or unset, not {default}"
            )
            rows[table, key] = tomllib.loads(f"value = {default[1:-1]}")["value"]
    return rows


def comparable(value: Any) -> Any:
    """A class default as TOML reads it back (tuples are arrays)."""
    return list(value) if isinstance(value, tuple) else value


def test_every_config_field_belongs_to_a_table() -> None:
    """Each field of `Config` is read from exactly one table of the file."""
    listed = [field for fields in TABLE_FIELDS.values() for field in fields]
    assert sorted(listed) == sorted(field.name for field in attrs.fields(Config))


def test_the_tables_are_the_loaders(tmp_path: Path) -> None:
    """The reference's tables are the ones the loader knows, as its error message lists them."""
    error = loader_error(tmp_path, "[noSuchTable]\n")
    assert error is not None
    known = re.search(r"\(known: (.*)\)", error)
    assert known is not None, error
    assert set(known[1].split(", ")) == set(TABLE_FIELDS)
    assert {table for table, _ in documented()} == set(TABLE_FIELDS)


def test_the_reference_lists_exactly_the_accepted_keys(tmp_path: Path) -> None:
    """Every key the loader accepts is documented, and every documented key is accepted."""
    accepted, listed = set(accepted_keys(tmp_path)), set(documented())
    assert sorted(accepted - listed) == [], "accepted but not in docs/configuration.md"
    assert sorted(listed - accepted) == [], "in docs/configuration.md but not accepted"


@pytest.mark.parametrize("table", sorted(TABLE_FIELDS))
def test_the_keys_the_loader_names_are_documented(table: str, tmp_path: Path) -> None:
    """The keys an unknown-key error offers as known are all in the reference."""
    error = loader_error(tmp_path, f"[{table}]\nnoSuchKey = 1\n")
    assert error is not None and "unknown key 'noSuchKey'" in error, error
    known = re.search(r"\(known: (.*)\)", error)
    assert known is not None, error
    listed = {key for listed_table, key in documented() if listed_table == table}
    assert set(known[1].split(", ")) <= listed


def test_the_documented_defaults_are_the_classes(tmp_path: Path) -> None:
    """Each documented default equals the config classes' default, type included."""
    defaults = class_keys()
    wrong = [
        f"[{table}] {key}: documented {value!r}, default {defaults[table, key]!r}"
        for (table, key), value in documented().items()
        if (table, key) in defaults
        and (
            value != comparable(defaults[table, key])
            or type(value) is not type(comparable(defaults[table, key]))
        )
    ]
    assert wrong == []


def test_a_file_of_the_documented_defaults_loads_as_the_defaults(tmp_path: Path) -> None:
    """Writing out every documented default gives the configuration of no file at all."""
    tables: dict[str, list[str]] = {}
    for (table, key), value in documented().items():
        if value is not UNSET:
            tables.setdefault(table, []).append(f"{key} = {toml_value(value)}")
    path = tmp_path / "defaults.toml"
    path.write_text("".join(f"[{t}]\n" + "\n".join(lines) + "\n\n" for t, lines in tables.items()))
    assert load_config(path) == Config()


def toml_blocks() -> list[tuple[str, str]]:
    """(where, text) of the ```` ```toml ```` blocks of README.md and docs/*.md that are
    server configurations (their first table is a config table)."""
    found = []
    for path in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        lines = path.read_text("utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            if line.strip() != "```toml":
                continue
            end = next(i for i in range(number, len(lines)) if lines[i].strip() == "```")
            text = "\n".join(lines[number:end]) + "\n"
            first = re.search(r"^\[([^\]]+)\]", text, re.MULTILINE)
            if first is not None and first[1] in TABLE_FIELDS:
                found.append((f"{path.relative_to(ROOT)}:{number}", text))
    return found


TOML_BLOCKS = toml_blocks()


@pytest.mark.parametrize(("where", "text"), TOML_BLOCKS, ids=[w for w, _ in TOML_BLOCKS])
def test_the_documented_config_files_load(where: str, text: str, tmp_path: Path) -> None:
    """Every configuration example in README.md and docs/ is a file the server accepts."""
    error = loader_error(tmp_path, text)
    assert error is None, f"{where}: {error}"


def test_the_readme_links_the_reference() -> None:
    """README's Configuration section links the complete reference."""
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    assert "(docs/configuration.md)" in section
