"""The per-source byte budget (session-reference-newer §4.1).

An explicit ``maxReferenceBytes`` is used as is. Otherwise the budget is
``max(65536, floor(contextWindow * 4 * referenceContextFraction))`` for the agent's model
route, and 65 536 whenever the capacity is unknown: no route, no provider or model, no
LLM service, an adapter-less route (``NO_ADAPTER``) or no context information. Any other
lookup failure propagates unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs

from actors.session_references._config import DEFAULT_MAX_REFERENCE_BYTES, SessionReferenceConfig

__all__ = [
    "NO_ADAPTER",
    "LookupModelRoute",
    "ModelAdapterMissingError",
    "ModelRoute",
    "budget_from_context_window",
    "resolve_reference_budget",
]

#: The LLM error code that means "no adapter serves this route" (budget falls back).
NO_ADAPTER: Final = "NO_ADAPTER"


class ModelAdapterMissingError(LookupError):
    """No adapter is registered for the route (upstream ``LlmError`` code ``NO_ADAPTER``).

    Any exception whose ``code`` attribute equals ``"NO_ADAPTER"`` is treated the same.
    """

    code: Final = NO_ADAPTER


@attrs.frozen(kw_only=True)
class ModelRoute:
    """The agent's recorded model route and its resolved capacity."""

    #: Provider id; ``None`` when the route names none.
    provider: str | None = None
    #: Model id; ``None`` when the route names none.
    model: str | None = None
    #: Combined request+response token capacity; ``None`` when unknown.
    context_window: float | None = None

    @classmethod
    def from_wire(cls, raw: Mapping[str, Any]) -> ModelRoute:
        """Read ``{provider, model, contextWindow}`` (missing keys are unknown)."""
        provider, model, window = raw.get("provider"), raw.get("model"), raw.get("contextWindow")
        return cls(
            provider=provider if isinstance(provider, str) else None,
            model=model if isinstance(model, str) else None,
            context_window=window
            if isinstance(window, int | float) and not isinstance(window, bool)
            else None,
        )


#: Async callable returning the agent's route (or ``None`` when nothing is recorded or no
#: LLM service is composed); raises ``ModelAdapterMissingError`` for an adapter-less route.
LookupModelRoute = Callable[[], Awaitable["ModelRoute | Mapping[str, Any] | None"]]


def budget_from_context_window(context_window: float, fraction: float) -> int:
    """``max(65536, floor(contextWindow * 4 * fraction))``, evaluated left to right in doubles.

    Examples: window 200 001 at 0.2 -> 160 000; 8 000 -> 65 536; 200 001 at 0.1 -> 80 000.
    """
    scaled = float(context_window) * 4 * fraction
    if not math.isfinite(scaled):
        # Upstream would produce NaN/Infinity here; treat a nonsensical capacity as unknown.
        return DEFAULT_MAX_REFERENCE_BYTES
    return max(DEFAULT_MAX_REFERENCE_BYTES, math.floor(scaled))


def _is_no_adapter(error: BaseException) -> bool:
    return getattr(error, "code", None) == NO_ADAPTER


async def resolve_reference_budget(
    config: SessionReferenceConfig, lookup_model_route: LookupModelRoute | None
) -> int:
    """Resolve the per-source budget once for a ``prepare`` call.

    Raises:
        Exception: Whatever the lookup raises, unchanged, except a ``NO_ADAPTER`` error.
        trio.Cancelled: Propagates (``prepare`` turns it into CANCELLED).
    """
    if config.max_reference_bytes is not None:
        return config.max_reference_bytes
    if lookup_model_route is None:
        return DEFAULT_MAX_REFERENCE_BYTES
    try:
        route = await lookup_model_route()
    except Exception as exc:
        if _is_no_adapter(exc):
            # "stream middleware can serve routes without a registered adapter"
            return DEFAULT_MAX_REFERENCE_BYTES
        raise
    if isinstance(route, Mapping):
        route = ModelRoute.from_wire(route)
    if route is None or route.provider is None or route.model is None:
        return DEFAULT_MAX_REFERENCE_BYTES
    if route.context_window is None:
        return DEFAULT_MAX_REFERENCE_BYTES
    return budget_from_context_window(route.context_window, config.reference_context_fraction)
