"""Configuration of the session-reference resolver (session-reference-newer §7).

Keys keep upstream's names in the ``[sessionReferenceResolver]`` TOML table:
``maxReferences`` (1..3, default 3), ``candidateLimit`` (default 50),
``maxReferenceBytes`` (absent = automatic budget) and ``referenceContextFraction``
(0..1, default 0.2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

import attrs

from actors.session_references._errors import SessionReferenceError

__all__ = [
    "DEFAULT_CANDIDATE_LIMIT",
    "DEFAULT_MAX_REFERENCE_BYTES",
    "DEFAULT_REFERENCE_CONTEXT_FRACTION",
    "MAX_REFERENCES",
    "MAX_SAFE_INTEGER",
    "SessionReferenceConfig",
    "as_positive_safe_integer",
]

#: Hard ceiling (and default) of distinct sources per prepared message.
MAX_REFERENCES: Final = 3
#: Default ``limit`` of candidate discovery; the fixed limit of the remote face.
DEFAULT_CANDIDATE_LIMIT: Final = 50
#: The minimum automatic per-source budget, and the budget when capacity is unknown.
DEFAULT_MAX_REFERENCE_BYTES: Final = 65536
#: Default fraction of the model context window given to each source.
DEFAULT_REFERENCE_CONTEXT_FRACTION: Final = 0.2
#: JavaScript ``Number.MAX_SAFE_INTEGER``.
MAX_SAFE_INTEGER: Final = 2**53 - 1

_ABSENT: Any = object()


def as_positive_safe_integer(value: object) -> int | None:
    """Return ``value`` as an int when JS ``Number.isSafeInteger(v) && v > 0`` holds.

    Booleans are not numbers in JavaScript; an integral float (TOML ``3.0``) is.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    if isinstance(value, int) and 0 < value <= MAX_SAFE_INTEGER:
        return value
    return None


@attrs.frozen(kw_only=True)
class SessionReferenceConfig:
    """Validated resolver configuration.

    Build it with :meth:`from_mapping` (upstream key names, upstream validation order)
    or :meth:`create`; both raise ``SESSION_REFERENCE_INVALID_CONFIG``.
    """

    #: Distinct sources allowed per prepared message (1..3).
    max_references: int = MAX_REFERENCES
    #: Default candidate limit, and the remote face's fixed limit.
    candidate_limit: int = DEFAULT_CANDIDATE_LIMIT
    #: Explicit per-source byte cap, or ``None`` for the automatic budget.
    max_reference_bytes: int | None = None
    #: Fraction of the context window (x 4 bytes/token) per source.
    reference_context_fraction: float = DEFAULT_REFERENCE_CONTEXT_FRACTION

    def __attrs_post_init__(self) -> None:
        # Direct construction is validated too (same order, same messages).
        _validated(
            max_references=self.max_references,
            candidate_limit=self.candidate_limit,
            max_reference_bytes=self.max_reference_bytes,
            max_reference_bytes_given=self.max_reference_bytes is not None,
            reference_context_fraction=self.reference_context_fraction,
        )

    @classmethod
    def from_mapping(cls, raw: Mapping[str, object]) -> SessionReferenceConfig:
        """Validate a ``[sessionReferenceResolver]`` table.

        Check order (upstream constructor): ``maxReferences``, ``candidateLimit``,
        ``maxReferenceBytes`` (skipped when the key is absent), then ``maxReferences``
        against the ceiling of 3, then the fraction. ``None`` for ``maxReferences``,
        ``candidateLimit`` or ``referenceContextFraction`` takes the default (upstream
        coalesces ``null``); ``None`` for ``maxReferenceBytes`` is an error, because the
        newer upstream treats a defined ``null`` as a value. Unknown keys are ignored,
        as upstream's schema drops them.

        Raises:
            SessionReferenceError: INVALID_CONFIG with upstream's message.
            TypeError: ``raw`` is not a mapping.
        """
        if not isinstance(raw, Mapping):
            raise TypeError(f"sessionReferenceResolver config must be a table, not {raw!r}")

        def pick(key: str, default: object) -> object:
            value = raw.get(key, _ABSENT)
            return default if value is _ABSENT or value is None else value

        bytes_value = raw.get("maxReferenceBytes", _ABSENT)
        return _build(
            max_references=pick("maxReferences", MAX_REFERENCES),
            candidate_limit=pick("candidateLimit", DEFAULT_CANDIDATE_LIMIT),
            max_reference_bytes=None if bytes_value is _ABSENT else bytes_value,
            max_reference_bytes_given=bytes_value is not _ABSENT,
            reference_context_fraction=pick(
                "referenceContextFraction", DEFAULT_REFERENCE_CONTEXT_FRACTION
            ),
        )

    @classmethod
    def create(
        cls,
        *,
        max_references: object = MAX_REFERENCES,
        candidate_limit: object = DEFAULT_CANDIDATE_LIMIT,
        max_reference_bytes: object = None,
        reference_context_fraction: object = DEFAULT_REFERENCE_CONTEXT_FRACTION,
    ) -> SessionReferenceConfig:
        """Validate keyword values (``max_reference_bytes=None`` means automatic)."""
        return _build(
            max_references=max_references,
            candidate_limit=candidate_limit,
            max_reference_bytes=max_reference_bytes,
            max_reference_bytes_given=max_reference_bytes is not None,
            reference_context_fraction=reference_context_fraction,
        )


def _validated(
    *,
    max_references: object,
    candidate_limit: object,
    max_reference_bytes: object,
    max_reference_bytes_given: bool,
    reference_context_fraction: object,
) -> tuple[int, int, int | None, float]:
    """Check values in upstream's order; return them normalized (ints, float fraction)."""
    checked: dict[str, int | None] = {}
    for name, value, given in (
        ("maxReferences", max_references, True),
        ("candidateLimit", candidate_limit, True),
        ("maxReferenceBytes", max_reference_bytes, max_reference_bytes_given),
    ):
        if not given:
            checked[name] = None
            continue
        number = as_positive_safe_integer(value)
        if number is None:
            raise SessionReferenceError.not_positive_integer(name)
        checked[name] = number
    max_refs = checked["maxReferences"]
    limit = checked["candidateLimit"]
    assert max_refs is not None
    assert limit is not None
    if max_refs > MAX_REFERENCES:
        raise SessionReferenceError.too_many_max_references(MAX_REFERENCES)
    fraction = reference_context_fraction
    # Upstream tests `!(v >= 0 && v <= 1)`: NaN, infinities and non-numbers fail; 0 and 1 pass.
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, int | float)
        or math.isnan(fraction)
        or not 0 <= fraction <= 1
    ):
        raise SessionReferenceError.fraction_out_of_range()
    return max_refs, limit, checked["maxReferenceBytes"], float(fraction)


def _build(**values: Any) -> SessionReferenceConfig:
    max_refs, limit, max_bytes, fraction = _validated(**values)
    return SessionReferenceConfig(
        max_references=max_refs,
        candidate_limit=limit,
        max_reference_bytes=max_bytes,
        reference_context_fraction=fraction,
    )
