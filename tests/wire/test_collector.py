"""A server process's cycle collector, once settled: what startup built is frozen, and a burst
of calls in flight triggers no collection; a process that chose its own collector keeps it.

Each case runs in a fresh interpreter: the collector's settings are the whole process's."""

from __future__ import annotations

from tests._processes import run_script

#: Settles the collector (or not, or after choosing one), then holds a burst of objects alive
#: at once, as 256 calls in flight do (a few dozen containers each), and counts collections.
_BURST = """
import gc, json, sys
from wire import YOUNG_COLLECTION_THRESHOLD, settle_collector

setup = sys.argv[1]
if setup == "own-threshold":
    gc.set_threshold(2000, 10, 10)
elif setup == "disabled":
    gc.disable()
if setup == "cli-ready":
    from actors.cli._serving import _print_ready
    _print_ready(["ipc:///nowhere"])
    settled = None
else:
    settled = settle_collector() if setup != "default" else False
collections = []
gc.callbacks.append(lambda phase, info: phase == "stop" and collections.append(info["generation"]))
for _ in range(20):
    in_flight = [[[call, part] for part in range(30)] for call in range(256)]
    del in_flight
print(json.dumps({
    "settled": settled,
    "collections": len(collections),
    "frozen": gc.get_freeze_count(),
    "threshold": list(gc.get_threshold()),
    "enabled": gc.isenabled(),
    "young": YOUNG_COLLECTION_THRESHOLD,
    "hooks": len(gc.callbacks) - 1,  # besides the script's own counter
}))
"""


def test_a_settled_collector_freezes_startup_and_lets_a_burst_of_calls_be() -> None:
    default, settled = run_script(_BURST, "default"), run_script(_BURST, "settle")
    # The burst (256 calls, 31 containers each, 20 times) is what makes CPython's default
    # collect over and over; settled, the calls' objects are freed before any collection.
    assert default["collections"] >= 20 and default["frozen"] == 0
    assert settled["settled"] is True
    assert settled["collections"] == 0
    assert settled["frozen"] > 1000  # the modules, classes and functions startup built
    assert settled["threshold"] == [settled["young"], *default["threshold"][1:]]
    assert settled["hooks"] == 0  # settling alone adds no timer


def test_a_process_that_chose_its_collector_keeps_it() -> None:
    own, disabled = run_script(_BURST, "own-threshold"), run_script(_BURST, "disabled")
    assert own["settled"] is False and own["threshold"][0] == 2000 and own["frozen"] == 0
    assert disabled["settled"] is False and not disabled["enabled"] and disabled["frozen"] == 0


def test_serve_settles_its_collector_and_times_it_when_it_is_ready() -> None:
    ready = run_script(_BURST, "cli-ready")
    assert ready["frozen"] > 1000 and ready["threshold"][0] == ready["young"]
    assert ready["hooks"] == 1  # and times each collection from then on


#: Reports the collector's metric families before and after it is watched, around a full
#: collection (generation 2) and a young one (generation 0).
_WATCH = """
import gc, json
from wire import watch_collector
from wire._collector import collector_families

before = collector_families()
watch_collector()
watch_collector()  # a second call must not time each collection twice
gc.collect(2)
gc.collect(0)
after = collector_families()
print(json.dumps({"before": before, "after": after, "hooks": len(gc.callbacks)}))
"""


def test_a_watched_collector_reports_each_collections_pause_by_generation() -> None:
    found = run_script(_WATCH)
    before, after = found["before"], found["after"]
    assert "gc_pause_seconds" not in before  # counted always, timed only once watched
    collections = {tuple(s["labels"]): s["value"] for s in after["gc_collections_total"]["samples"]}
    started = {tuple(s["labels"]): s["value"] for s in before["gc_collections_total"]["samples"]}
    assert collections[("2",)] == started[("2",)] + 1
    assert collections[("0",)] >= started[("0",)] + 1
    pauses = {tuple(s["labels"]): s for s in after["gc_pause_seconds"]["samples"]}
    assert sum(pauses[("2",)]["counts"]) == 1 and pauses[("2",)]["sum"] > 0
    assert sum(pauses[("0",)]["counts"]) >= 1
    assert found["hooks"] == 1
