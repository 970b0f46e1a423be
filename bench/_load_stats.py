"""Latency histograms that travel between processes, and their summaries.

Every load-generator process records its latencies (nanoseconds) into an HdrHistogram and sends
it to the parent encoded (``HdrHistogram.encode``: compressed, base64 text); the parent adds the
histograms of all processes together and summarises the sum in the same shape as
:func:`bench._common.latency_summary` (microseconds, percentiles and a CDF), so one report reads
the same whatever produced it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hdrh.histogram import HdrHistogram

from bench._common import CDF_PERCENTILES

__all__ = ["HIGHEST_NS", "decode_sum", "encode_samples", "new_histogram", "summarize"]

#: Longest latency a histogram tracks: 60 s in nanoseconds (longer samples are clamped).
HIGHEST_NS = 60_000_000_000
#: Three significant figures: a reported percentile is within 0.1 % of the true sample.
_DIGITS = 3


def new_histogram() -> HdrHistogram:
    return HdrHistogram(1, HIGHEST_NS, _DIGITS)


def encode_samples(samples_ns: Iterable[int]) -> str:
    """Record ``samples_ns`` (clamped to 1 ns .. 60 s) and return the encoded histogram.

    Raises:
        ValueError: a sample is negative (a clock went backwards: a bug in the caller).
    """
    histogram = new_histogram()
    for sample in samples_ns:
        if sample < 0:
            raise ValueError(f"negative latency sample: {sample} ns")
        histogram.record_value(min(max(sample, 1), HIGHEST_NS))
    encoded: bytes = histogram.encode()
    return encoded.decode("ascii")


def decode_sum(encoded: Iterable[str]) -> HdrHistogram:
    """The sum of encoded histograms (an empty histogram for none)."""
    total = new_histogram()
    for text in encoded:
        total.decode_and_add(text.encode("ascii"))
    return total


def summarize(histogram: HdrHistogram, *, cdf: bool = True) -> dict[str, Any]:
    """Percentiles in microseconds: ``count``, ``minUs``, ``meanUs``, ``p50Us``, ``p90Us``,
    ``p99Us``, ``p999Us``, ``maxUs`` and, if ``cdf``, ``[percentile, microseconds]`` pairs at
    :data:`bench._common.CDF_PERCENTILES`. Values are ``None`` when nothing was recorded.
    """
    count = histogram.get_total_count()
    # One pass over the buckets for every percentile (one per percentile is ~100 x slower).
    wanted = [50.0, 90.0, 99.0, 99.9, *(CDF_PERCENTILES if cdf else ())]
    values = histogram.get_percentile_to_value_dict(wanted) if count else {}

    def at(percentile: float) -> float | None:
        return _us(values[percentile]) if count else None

    summary: dict[str, Any] = {
        "count": count,
        "minUs": _us(histogram.get_min_value()) if count else None,
        "meanUs": _us(histogram.get_mean_value()) if count else None,
        "p50Us": at(50.0),
        "p90Us": at(90.0),
        "p99Us": at(99.0),
        "p999Us": at(99.9),
        "maxUs": _us(histogram.get_max_value()) if count else None,
    }
    if cdf:
        summary["cdf"] = [[p, at(p)] for p in CDF_PERCENTILES] if count else []
    return summary


def _us(nanoseconds: float) -> float:
    return round(nanoseconds / 1000, 3)
