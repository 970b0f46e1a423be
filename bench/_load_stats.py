"""Latency histograms that travel between processes, and their summaries.

Every load-generator process records its latencies (nanoseconds) into an HdrHistogram and sends
it to the parent encoded (``HdrHistogram.encode``: compressed, base64 text); the parent adds the
histograms of all processes together and summarises the sum with
:func:`bench._common.histogram_summary` (microseconds, percentiles and a CDF), the same shape
as :func:`bench._common.latency_summary`, so one report reads the same whatever produced it.
"""

from __future__ import annotations

from collections.abc import Iterable

from hdrh.histogram import HdrHistogram

from bench._common import HIGHEST_NS, new_histogram
from bench._common import histogram_summary as summarize

__all__ = ["HIGHEST_NS", "decode_sum", "encode_samples", "new_histogram", "summarize"]


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
