"""The [fileReferences] configuration table (spec §1.3, §6.1, plus our two keys)."""

from __future__ import annotations

import tomllib

import pytest

from actors.file_references._config import FileReferencesConfig, FileReferencesConfigError


def test_defaults_are_upstream() -> None:
    """An empty table gives upstream's defaults and both extensions off."""
    config = FileReferencesConfig.from_table({})
    assert config == FileReferencesConfig()
    assert config.max_results == 20
    assert config.max_entries == 10_000
    assert config.excluded_directories == (".git", "node_modules")
    assert config.respect_ignore_files is False
    assert config.unlimited_entries is False
    assert config.entry_cap == 10_000


def test_full_table_from_toml() -> None:
    """Every key is read from a parsed TOML table under its upstream (camelCase) name."""
    table = tomllib.loads(
        """
        [fileReferences]
        maxResults = 5
        maxEntries = 200000
        excludedDirectories = ["target", ".venv"]
        respectIgnoreFiles = true
        unlimitedEntries = true
        """
    )["fileReferences"]
    config = FileReferencesConfig.from_table(table)
    assert config == FileReferencesConfig(
        max_results=5,
        max_entries=200_000,
        excluded_directories=("target", ".venv"),
        respect_ignore_files=True,
        unlimited_entries=True,
    )
    assert config.entry_cap is None


def test_to_table_round_trips() -> None:
    """to_table gives back a table that from_table accepts unchanged."""
    config = FileReferencesConfig(max_results=3, excluded_directories=("x",))
    assert FileReferencesConfig.from_table(config.to_table()) == config


def test_empty_exclusions_disable_exclusion() -> None:
    """'Passing excludedDirectories: [] disables exclusion entirely.'"""
    assert FileReferencesConfig.from_table({"excludedDirectories": []}).excluded_directories == ()


def test_odd_but_valid_exclusions_are_accepted() -> None:
    """'Duplicates and names like . or .. are not rejected.'"""
    names = [".", "..", "x", "x"]
    config = FileReferencesConfig.from_table({"excludedDirectories": names})
    assert config.excluded_directories == (".", "..", "x", "x")


def test_integral_float_is_a_safe_integer() -> None:
    """JavaScript has one number type, so 20.0 is the safe integer 20 upstream."""
    config = FileReferencesConfig.from_table({"maxResults": 20.0})
    assert config.max_results == 20
    assert isinstance(config.max_results, int)


@pytest.mark.parametrize("key", ["maxResults", "maxEntries"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True, False, "20", None, 2**53, [1], float("nan")])
def test_bad_integers(key: str, value: object) -> None:
    """Non-positive, fractional, unsafe or non-numeric counts get upstream's message."""
    with pytest.raises(FileReferencesConfigError) as caught:
        FileReferencesConfig.from_table({key: value})
    assert str(caught.value) == f"file-reference-local: {key} must be a positive safe integer"
    assert caught.value.key == key


def test_largest_safe_integer_is_accepted() -> None:
    """2**53 - 1 is still a safe integer."""
    assert FileReferencesConfig.from_table({"maxEntries": 2**53 - 1}).max_entries == 2**53 - 1


@pytest.mark.parametrize("names", [[""], ["a/b"], ["a\\b"], ["ok", 3], [None]])
def test_bad_excluded_entries(names: list[object]) -> None:
    """An entry that is empty, has a slash or backslash, or is not a string is refused."""
    with pytest.raises(FileReferencesConfigError, match="basenames") as caught:
        FileReferencesConfig.from_table({"excludedDirectories": names})
    assert str(caught.value) == (
        "file-reference-local: excludedDirectories entries must be non-empty directory basenames"
    )
    assert caught.value.key == "excludedDirectories"


@pytest.mark.parametrize("value", ["node_modules", {"a": 1}, 3, None])
def test_excluded_must_be_an_array(value: object) -> None:
    """A non-array excludedDirectories (even a string) is refused, never split into letters."""
    with pytest.raises(FileReferencesConfigError, match=r"excludedDirectories must be an array"):
        FileReferencesConfig.from_table({"excludedDirectories": value})


@pytest.mark.parametrize("key", ["respectIgnoreFiles", "unlimitedEntries"])
@pytest.mark.parametrize("value", [1, 0, "true", None])
def test_flags_must_be_booleans(key: str, value: object) -> None:
    """Our boolean keys accept only TOML booleans."""
    with pytest.raises(FileReferencesConfigError) as caught:
        FileReferencesConfig.from_table({key: value})
    assert str(caught.value) == f"file-reference-local: {key} must be a boolean"
    assert caught.value.key == key


def test_unknown_key_is_named() -> None:
    """An unknown key (e.g. a snake_case spelling) is refused with the known keys listed."""
    with pytest.raises(FileReferencesConfigError, match=r"unknown key 'max_results'") as caught:
        FileReferencesConfig.from_table({"max_results": 3})
    assert caught.value.key == "max_results"
    assert "maxResults" in str(caught.value)


def test_table_must_be_a_mapping() -> None:
    """A [fileReferences] value that is not a table is refused."""
    with pytest.raises(FileReferencesConfigError, match=r"must be a table"):
        FileReferencesConfig.from_table([("maxResults", 3)])  # type: ignore[arg-type]


def test_error_is_a_value_error() -> None:
    """Configuration errors are ValueErrors, so generic config loaders can catch them."""
    assert issubclass(FileReferencesConfigError, ValueError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_results": 0}, "maxResults must be a positive safe integer"),
        ({"max_entries": 1.5}, "maxEntries must be a positive safe integer"),
        ({"excluded_directories": ["a/b"]}, "excludedDirectories entries must be"),
        ({"respect_ignore_files": "yes"}, "respectIgnoreFiles must be a boolean"),
        ({"unlimited_entries": 1}, "unlimitedEntries must be a boolean"),
    ],
)
def test_direct_construction_validates(kwargs: dict[str, object], message: str) -> None:
    """Constructing the class directly validates with the same messages."""
    with pytest.raises(FileReferencesConfigError, match=message):
        FileReferencesConfig(**kwargs)  # type: ignore[arg-type]


def test_direct_construction_normalises_integral_floats() -> None:
    """A float count given directly is stored as an int, like one read from TOML."""
    config = FileReferencesConfig(max_results=5.0, max_entries=7.0)
    assert (config.max_results, config.max_entries) == (5, 7)
    assert isinstance(config.max_results, int)
