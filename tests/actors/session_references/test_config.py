"""Configuration validation, error codes and messages of session references."""

from __future__ import annotations

import math

import pytest

from actors.session_references._config import (
    DEFAULT_CANDIDATE_LIMIT,
    DEFAULT_MAX_REFERENCE_BYTES,
    MAX_REFERENCES,
    SessionReferenceConfig,
)
from actors.session_references._errors import SessionReferenceError, SessionReferenceErrorCode

INVALID_CONFIG = SessionReferenceErrorCode.INVALID_CONFIG


def _config_error(raw: dict[str, object]) -> SessionReferenceError:
    with pytest.raises(SessionReferenceError) as caught:
        SessionReferenceConfig.from_mapping(raw)
    assert caught.value.code is INVALID_CONFIG
    return caught.value


def test_error_code_strings_are_the_closed_upstream_set() -> None:
    """The seven codes are exactly upstream's strings."""
    assert sorted(code.value for code in SessionReferenceErrorCode) == [
        "SESSION_REFERENCE_BUDGET_EXCEEDED",
        "SESSION_REFERENCE_CANCELLED",
        "SESSION_REFERENCE_INVALID_CONFIG",
        "SESSION_REFERENCE_INVALID_REFERENCE",
        "SESSION_REFERENCE_READ_FAILED",
        "SESSION_REFERENCE_SELF_REFERENCE",
        "SESSION_REFERENCE_TOO_MANY",
    ]


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (
            SessionReferenceError.invalid_limit(),
            "SESSION_REFERENCE_INVALID_REFERENCE",
            "candidate limit must be a positive safe integer",
        ),
        (
            SessionReferenceError.not_an_object(),
            "SESSION_REFERENCE_INVALID_REFERENCE",
            "session reference must be an object",
        ),
        (
            SessionReferenceError.bad_reference_fields(),
            "SESSION_REFERENCE_INVALID_REFERENCE",
            "session reference must contain a string sessionId and optional string label",
        ),
        (
            SessionReferenceError.self_reference("target"),
            "SESSION_REFERENCE_SELF_REFERENCE",
            'session "target" cannot reference itself',
        ),
        (
            SessionReferenceError.too_many(3),
            "SESSION_REFERENCE_TOO_MANY",
            "a message may reference at most 3 sessions",
        ),
        (
            SessionReferenceError.read_failed(LookupError('session "missing" not found')),
            "SESSION_REFERENCE_READ_FAILED",
            'failed to read referenced session: session "missing" not found',
        ),
        (
            SessionReferenceError.budget_exceeded(),
            "SESSION_REFERENCE_BUDGET_EXCEEDED",
            "referenced session snapshot cannot fit the configured byte budget",
        ),
        (
            SessionReferenceError.cancelled(),
            "SESSION_REFERENCE_CANCELLED",
            "session reference preparation was cancelled",
        ),
    ],
)
def test_error_messages_are_exact(error: SessionReferenceError, code: str, message: str) -> None:
    """Each named constructor produces upstream's code and exact message."""
    assert error.code == code
    assert error.message == message
    assert str(error) == message


def test_self_reference_message_json_quotes_the_id() -> None:
    """The target id is JSON-quoted, escapes included."""
    error = SessionReferenceError.self_reference('a"b\n')
    assert error.message == 'session "a\\"b\\n" cannot reference itself'


def test_read_failed_reads_message_attribute_and_key_errors() -> None:
    """The inner message is the error's message, not Python's repr-like str of KeyError."""
    assert SessionReferenceError.read_failed(KeyError("gone")).message.endswith(": gone")
    inner = SessionReferenceError.budget_exceeded()
    wrapped = SessionReferenceError.read_failed(inner)
    assert wrapped.message == f"failed to read referenced session: {inner.message}"
    assert wrapped.__cause__ is inner


def test_defaults() -> None:
    """An empty table gives 3 references, limit 50, automatic bytes and fraction 0.2."""
    config = SessionReferenceConfig.from_mapping({})
    assert config == SessionReferenceConfig()
    assert config.max_references == MAX_REFERENCES == 3
    assert config.candidate_limit == DEFAULT_CANDIDATE_LIMIT == 50
    assert config.max_reference_bytes is None
    assert config.reference_context_fraction == 0.2
    assert DEFAULT_MAX_REFERENCE_BYTES == 65536


def test_valid_values_are_kept() -> None:
    """Valid upstream keys are read; integral floats count as integers."""
    config = SessionReferenceConfig.from_mapping(
        {
            "maxReferences": 1,
            "candidateLimit": 7.0,
            "maxReferenceBytes": 2**53 - 1,
            "referenceContextFraction": 1,
            "unknownKey": "ignored",
        }
    )
    assert config == SessionReferenceConfig(
        max_references=1,
        candidate_limit=7,
        max_reference_bytes=2**53 - 1,
        reference_context_fraction=1.0,
    )


@pytest.mark.parametrize("key", ["maxReferences", "candidateLimit", "maxReferenceBytes"])
@pytest.mark.parametrize("value", [0, -1, 1.5, "3", True, 2**53, math.nan, math.inf, [1]])
def test_integer_keys_reject_non_positive_safe_integers(key: str, value: object) -> None:
    """Each integer key rejects zero, negatives, fractions, strings, booleans and huge values."""
    error = _config_error({key: value})
    assert error.message == f"session-reference: {key} must be a positive safe integer"


def test_null_integer_keys_take_defaults_except_max_reference_bytes() -> None:
    """null coalesces for maxReferences/candidateLimit, but a null maxReferenceBytes is invalid."""
    config = SessionReferenceConfig.from_mapping(
        {"maxReferences": None, "candidateLimit": None, "referenceContextFraction": None}
    )
    assert config == SessionReferenceConfig()
    error = _config_error({"maxReferenceBytes": None})
    assert error.message == "session-reference: maxReferenceBytes must be a positive safe integer"


def test_max_references_ceiling() -> None:
    """maxReferences above 3 has its own message."""
    error = _config_error({"maxReferences": 4})
    assert error.message == "session-reference: maxReferences must not exceed 3"


@pytest.mark.parametrize("value", [-0.01, 1.01, math.nan, math.inf, -math.inf, "0.5", True, None])
def test_fraction_outside_unit_interval(value: object) -> None:
    """NaN, infinities, out-of-range numbers and non-numbers fail; null takes the default."""
    if value is None:
        assert SessionReferenceConfig.from_mapping({"referenceContextFraction": None})
        return
    error = _config_error({"referenceContextFraction": value})
    assert error.message == (
        "session-reference: referenceContextFraction must be between zero and one"
    )


@pytest.mark.parametrize("value", [0, 0.0, 1, 0.5])
def test_fraction_bounds_pass(value: float) -> None:
    """0 and 1 are valid fractions."""
    config = SessionReferenceConfig.from_mapping({"referenceContextFraction": value})
    assert config.reference_context_fraction == float(value)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"maxReferences": 0, "candidateLimit": 0, "maxReferenceBytes": 0},
            "session-reference: maxReferences must be a positive safe integer",
        ),
        (
            {"maxReferences": 9, "candidateLimit": 0},
            "session-reference: candidateLimit must be a positive safe integer",
        ),
        (
            {"maxReferences": 9, "maxReferenceBytes": -1},
            "session-reference: maxReferenceBytes must be a positive safe integer",
        ),
        (
            {"maxReferences": 9, "referenceContextFraction": 2},
            "session-reference: maxReferences must not exceed 3",
        ),
        (
            {"maxReferences": 2, "referenceContextFraction": 2, "candidateLimit": 3},
            "session-reference: referenceContextFraction must be between zero and one",
        ),
    ],
)
def test_check_order(raw: dict[str, object], message: str) -> None:
    """Integer keys in order, then the ceiling, then the fraction: first failure reported."""
    assert _config_error(raw).message == message


def test_direct_construction_is_validated() -> None:
    """Building the attrs class directly runs the same checks."""
    with pytest.raises(SessionReferenceError, match=r"^session-reference: maxReferences must"):
        SessionReferenceConfig(max_references=0)
    with pytest.raises(SessionReferenceError, match=r"must not exceed 3$"):
        SessionReferenceConfig.create(max_references=4)
    assert SessionReferenceConfig.create(max_reference_bytes=400).max_reference_bytes == 400


def test_non_mapping_table_is_a_type_error() -> None:
    """A config table must be a mapping."""
    with pytest.raises(TypeError, match="must be a table"):
        SessionReferenceConfig.from_mapping([("maxReferences", 1)])  # type: ignore[arg-type]
