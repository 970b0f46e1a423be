"""What a server counts for its operators: calls by endpoint and outcome, their latency, cancels,
and any process figures its owner adds, as plain data (``system/metrics``) that sums across
processes.

A snapshot is a map of named families, each ``{"kind", "help", "labels", "samples"}``:
``kind`` is ``counter``, ``gauge`` or ``histogram``; ``samples`` lists ``{"labels": [...],
"value": v}`` (counters and gauges) or ``{"labels": [...], "counts": [...], "sum": s}``
(histograms, one count per bucket of ``buckets`` and one for ``+Inf``). :func:`merge` adds
snapshots of several processes together (a supervisor's one view over its workers);
``wire._metrics_http`` writes them in Prometheus' text format. Counting costs a dict update and
a bisection per call, and only on a server given a :class:`CallMetrics`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["LATENCY_BUCKETS", "CallMetrics", "Histogram", "counter", "gauge", "merge"]

#: Upper bounds (seconds) of the latency histograms' buckets.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


class Histogram:
    """Observations counted into fixed buckets (the last one ``+Inf``), with their sum."""

    __slots__ = ("buckets", "counts", "sum")

    def __init__(self, buckets: Sequence[float] = LATENCY_BUCKETS) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value

    def sample(self, labels: Sequence[str] = ()) -> dict[str, Any]:
        return {"labels": list(labels), "counts": list(self.counts), "sum": self.sum}


def counter(
    help_text: str, labels: Sequence[str], samples: Iterable[tuple[Sequence[str], float]]
) -> dict[str, Any]:
    """A counter family from ``(label values, value)`` pairs."""
    return _family("counter", help_text, labels, samples)


def gauge(
    help_text: str, labels: Sequence[str], samples: Iterable[tuple[Sequence[str], float]]
) -> dict[str, Any]:
    """A gauge family from ``(label values, value)`` pairs."""
    return _family("gauge", help_text, labels, samples)


def histogram_family(
    help_text: str, labels: Sequence[str], histograms: Iterable[tuple[Sequence[str], Histogram]]
) -> dict[str, Any]:
    """A histogram family; every histogram must have the same buckets."""
    items = list(histograms)
    buckets = items[0][1].buckets if items else LATENCY_BUCKETS
    return {
        "kind": "histogram",
        "help": help_text,
        "labels": list(labels),
        "buckets": list(buckets),
        "samples": [h.sample(values) for values, h in items],
    }


def _family(
    kind: str, help_text: str, labels: Sequence[str], samples: Iterable[tuple[Sequence[str], float]]
) -> dict[str, Any]:
    return {
        "kind": kind,
        "help": help_text,
        "labels": list(labels),
        "samples": [{"labels": list(values), "value": value} for values, value in samples],
    }


class CallMetrics:
    """Calls a server finished, by endpoint and outcome; their latency by endpoint; cancels by
    reason. The server reports each terminal frame to :meth:`finished`."""

    def __init__(self) -> None:
        self._calls: dict[tuple[str, str], int] = {}
        self._latency: dict[str, Histogram] = {}
        self._cancels: dict[str, int] = {}

    def finished(self, endpoint: str, outcome: str, seconds: float) -> None:
        """One call ended with ``outcome`` (``result`` or an error code) after ``seconds``."""
        key = (endpoint, outcome)
        self._calls[key] = self._calls.get(key, 0) + 1
        histogram = self._latency.get(endpoint)
        if histogram is None:
            histogram = self._latency[endpoint] = Histogram()
        histogram.observe(seconds)

    def cancelled(self, reason: str) -> None:
        """A call was cancelled for ``reason`` (caller, deadline, superseded, peer-lost, ...)."""
        self._cancels[reason] = self._cancels.get(reason, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        return {
            "calls_total": counter(
                "Calls answered, by endpoint and outcome (result or the error code).",
                ("endpoint", "outcome"),
                [(list(k), v) for k, v in sorted(self._calls.items())],
            ),
            "call_duration_seconds": histogram_family(
                "Time from a call's arrival to its terminal frame, by endpoint.",
                ("endpoint",),
                [([e], h) for e, h in sorted(self._latency.items(), key=lambda item: item[0])],
            ),
            "cancels_total": counter(
                "Calls cancelled, by reason.",
                ("reason",),
                [([r], v) for r, v in sorted(self._cancels.items())],
            ),
        }


def merge(snapshots: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Add snapshots of several processes: samples with the same labels are summed (gauges
    too: each process reports its own share, such as its active actors)."""
    merged: dict[str, Any] = {}
    for snapshot in snapshots:
        for name, family in snapshot.items():
            into = merged.get(name)
            if into is None:
                merged[name] = {**family, "samples": [dict(s) for s in family["samples"]]}
                continue
            by_labels = {tuple(s["labels"]): s for s in into["samples"]}
            for sample in family["samples"]:
                known = by_labels.get(tuple(sample["labels"]))
                if known is None:
                    into["samples"].append(dict(sample))
                    by_labels[tuple(sample["labels"])] = into["samples"][-1]
                elif "counts" in sample:
                    known["counts"] = [
                        a + b for a, b in zip(known["counts"], sample["counts"], strict=True)
                    ]
                    known["sum"] += sample["sum"]
                else:
                    known["value"] += sample["value"]
    return merged
