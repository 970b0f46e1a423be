"""The load benchmark: its pieces on synthetic numbers, and one quick real run of every stack."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is not an installed package (pyproject lists actors, wire)
    sys.path.insert(0, str(ROOT))

from bench import load  # noqa: E402
from bench._common import BenchError, Stopped, option_changes, run_guarded  # noqa: E402
from bench._load_generator import merge, run_phase, split_concurrency, time_limit  # noqa: E402
from bench._load_jobs import Job, Samples, require_loopback, split_address  # noqa: E402
from bench._load_ours import supersede_bucket  # noqa: E402
from bench._load_profile import summarize_collapsed  # noqa: E402
from bench._load_report import echo_ratios, evaluate_targets, render_tables  # noqa: E402
from bench._load_sessions import FIXTURES, place_sessions, size_summary  # noqa: E402
from bench._load_stats import decode_sum, encode_samples, summarize  # noqa: E402
from bench._load_workloads import CALLS, CallContext, Typing, missing_endpoints  # noqa: E402
from bench.peers import PEERS  # noqa: E402
from tests._processes import run_bench  # noqa: E402

_MACHINE = {"cpuCount": 2, "cpuModel": "test", "python": "3", "pyzmq": "x", "libzmq": "y"}


@functools.cache
def _latency(p99_us: float) -> dict[str, Any]:
    samples = [int(p99_us * 1000 * (i + 1) / 100) for i in range(100)]
    return summarize(decode_sum([encode_samples(samples)]))


def _phase(in_flight: int, calls_per_second: float, p99_us: float = 1000.0) -> dict[str, Any]:
    return {
        "inFlight": in_flight,
        "calls": int(calls_per_second),
        "seconds": 1.0,
        "callsPerSecond": calls_per_second,
        "latency": _latency(p99_us),
        "series": {},
        "counters": {},
        "clientCpuSeconds": 0.5,
        "server": {"cpuSeconds": 0.9, "cpuUsPerCall": 10.0, "peakRssMiB": 30.0},
    }


def _report(ours_128: float, cancel_p99_us: float, transport: str = "tcp") -> dict[str, Any]:
    rates = {"ours": ours_128, "raw": 40_000.0, "zerorpc": 1_000.0, "grpc": 2_000.0}
    rates |= {"rpyc": 10_000.0, "pyro5": 4_000.0}
    stacks = {name: [_phase(1, rate / 4), _phase(128, rate)] for name, rate in rates.items()}
    labels = {"ours": "agent-actors"} | {name: peer.label for name, peer in PEERS.items()}
    cancel = _phase(1, 100.0, p99_us=cancel_p99_us)
    report: dict[str, Any] = {
        "config": {
            "transport": transport,
            "targetInFlight": 128,
            "processes": 2,
            "agents": 8,
            "durationSeconds": 1.0,
            "quick": False,
        },
        "machine": _MACHINE,
        "stacks": {name: {"label": labels[name], "status": "measured"} for name in rates},
        "echo": {"64B": {"payloadBytes": 64, "inFlight": [1, 128], "stacks": stacks}},
        "cancel": {"idle": {"latency": cancel["latency"]}},
        "keystroke": {"skipped": "not served"},
    }
    report["ratios"] = echo_ratios(report["echo"])
    report["targets"] = evaluate_targets(report)
    return report


def test_split_concurrency_spreads_calls_evenly_over_processes() -> None:
    """Calls in flight are divided as evenly as possible, never over more processes than calls."""
    assert split_concurrency(10, 4) == [3, 3, 2, 2]
    assert split_concurrency(128, 2) == [64, 64]
    assert split_concurrency(1, 2) == [1]
    with pytest.raises(ValueError, match="positive"):
        split_concurrency(0, 2)


def test_samples_count_only_calls_that_end_inside_the_window() -> None:
    """A call ending before the start or after the end of the window is not counted."""
    samples = Samples(start_ns=1_000, duration=1e-6)  # window 1000 .. 2000 ns
    samples.call_done(500, 900)
    samples.call_done(900, 1_500)
    samples.call_done(1_600, 2_000)
    samples.call_done(1_900, 2_500)
    assert samples.latencies == [600, 400]
    assert samples.open(1_999) and not samples.open(2_000)


def test_histograms_from_processes_add_up() -> None:
    """Encoded histograms of several processes merge into one summary with every sample."""
    first = encode_samples([1_000] * 90)
    second = encode_samples([100_000] * 10)
    merged = merge(
        [
            {"calls": 90, "counters": {"x": 1}, "histograms": {"latency": first}, "cpuSeconds": 1},
            {"calls": 10, "counters": {"x": 2}, "histograms": {"latency": second}, "cpuSeconds": 2},
        ],
        duration=2.0,
    )
    assert merged["calls"] == 100 and merged["callsPerSecond"] == 50.0
    assert merged["counters"] == {"x": 3}
    assert merged["clientCpuSeconds"] == 3
    assert merged["latency"]["count"] == 100
    assert merged["latency"]["p50Us"] == pytest.approx(1.0, rel=1e-3)
    assert merged["latency"]["p99Us"] == pytest.approx(100.0, rel=1e-3)


def test_targets_pass_with_positive_margins() -> None:
    """Ratios are ours over each peer at 128 in flight; every target passes above its limit."""
    report = _report(ours_128=20_000.0, cancel_p99_us=500.0)
    assert report["ratios"]["64B"]["zerorpc"]["128"] == pytest.approx(20.0)
    assert report["ratios"]["64B"]["raw"]["128"] == pytest.approx(0.5)
    assert [t["status"] for t in report["targets"]] == ["PASS"] * 5
    assert report["targets"][3]["margin"] == pytest.approx(0.25)  # 0.5x against 0.4x
    assert report["targets"][4]["margin"] == pytest.approx(1.0, rel=0.05)  # 0.5 ms against 1 ms


def test_targets_miss_with_the_factor_that_is_missing() -> None:
    """A slow stack misses each target, and the table says by how much."""
    report = _report(ours_128=4_000.0, cancel_p99_us=2_000.0)
    assert [t["status"] for t in report["targets"]] == ["MISS"] * 5
    raw = report["targets"][3]
    assert raw["value"] == pytest.approx(0.1) and raw["margin"] == pytest.approx(-0.75)
    table = render_tables(report)
    assert table.count("MISS") == 5 and "PASS" not in table
    assert "needs 4.0x" in table  # 0.1x against 0.4x
    assert "needs 2.0x" in table  # 2 ms against 1 ms


def test_a_busy_machine_is_called_out() -> None:
    """A phase during which other programs used CPU is named in a warning above the tables."""
    report = _report(ours_128=20_000.0, cancel_p99_us=500.0)
    assert "warning" not in render_tables(report)
    busy = dict(report["echo"]["64B"]["stacks"]["raw"][1], otherCpuSeconds=0.5)
    report["echo"]["64B"]["stacks"]["raw"][1] = busy
    assert "warning: other programs" in render_tables(report)
    assert "raw pyzmq+msgpack 64B @128" in render_tables(report)


def test_ratio_targets_are_not_judged_over_ipc() -> None:
    """Targets are defined over tcp: an ipc run marks the ratio targets N/A, not PASS or MISS."""
    report = _report(ours_128=20_000.0, cancel_p99_us=500.0, transport="ipc")
    assert [t["status"] for t in report["targets"][:4]] == ["N/A"] * 4
    assert "tcp" in report["targets"][0]["note"]


def test_completion_calls_are_plugged_in_by_name() -> None:
    """The real completion endpoints have builders; a run knows which ones the server lacks."""
    served = ["diagnostics/sleep", "diagnostics/echo"]
    assert missing_endpoints(["diagnostics/sleep"], served) == []
    real = ["fileReferences/list", "sessionReferenceResolver/candidates"]
    assert missing_endpoints(real, served) == real
    with pytest.raises(KeyError, match="no call builder"):
        missing_endpoints(["nope/none"], served)
    ctx = CallContext(agent_id="a1", agents=["a1", "a2", "a3", "a4"], query="wire/")
    assert CALLS["fileReferences/list"].build(ctx) == {"agentId": "a1", "query": "wire/"}
    prepared = CALLS["sessionReferenceResolver/prepare"].build(ctx)
    assert 1 <= len(prepared["references"]) <= 3
    assert all(r["sessionId"] != "a1" for r in prepared["references"])


def test_typing_grows_the_query_one_key_at_a_time() -> None:
    """Each keystroke extends the query by a character until the word is complete."""
    import random

    typing = Typing(random.Random(3))
    first = typing.keystroke()
    second = typing.keystroke()
    assert len(first) == 1 and second.startswith(first) and len(second) == 2


def test_jobs_round_trip_through_json_and_addresses_parse() -> None:
    """A job survives the trip to a load process; tcp and ipc addresses split as expected."""
    job = Job(stack="ours", address="tcp://127.0.0.1:5", agents=["a", "b"], key_interval=[0, 1])
    assert Job.from_json(job.to_json()) == job
    assert split_address("tcp://127.0.0.1:5555") == ("127.0.0.1", 5555)
    assert split_address("ipc:///tmp/x.sock") == "/tmp/x.sock"
    with pytest.raises(ValueError, match="expected"):
        split_address("inproc://x")


def test_profile_summary_ranks_functions_by_self_time() -> None:
    """Collapsed stacks are ranked by leaf (self) share and by share anywhere on the stack."""
    text = (
        "run (trio/_run.py:10);send (wire/_pump.py:5) 30\n"
        "run (trio/_run.py:10);decode (wire/_codec.py:7) 10\n"
    )
    summary = summarize_collapsed(text)
    assert summary["samples"] == 40
    assert summary["selfPercent"][0] == ["send (wire/_pump.py)", 75.0]
    assert summary["totalPercent"][0] == ["run (trio/_run.py)", 100.0]


def test_prepare_references_the_real_sources_when_given() -> None:
    """With sources, prepare references 1-3 of them; without, the run's other agents."""
    import random

    sources = [f"src-{i}" for i in range(10)]
    for seed in range(20):
        ctx = CallContext(
            agent_id="a1", agents=["a1", "a2"], sources=sources, rng=random.Random(seed)
        )
        refs = [
            r["sessionId"]
            for r in CALLS["sessionReferenceResolver/prepare"].build(ctx)["references"]
        ]
        assert 1 <= len(refs) <= 3 and set(refs) <= set(sources) and len(set(refs)) == len(refs)
    ctx = CallContext(agent_id="a1", agents=["a1", "a2"])
    refs = CALLS["sessionReferenceResolver/prepare"].build(ctx)["references"]
    assert [r["sessionId"] for r in refs] == ["a2"]


def test_superseded_calls_are_split_by_when_the_cancel_landed() -> None:
    """A cancel while queued is before the handler ran, while running during, a result after."""
    assert supersede_bucket("queued") == "before"
    assert supersede_bucket("running") == "during"
    assert supersede_bucket("result") == "after"
    assert supersede_bucket("error:overloaded") == "error:overloaded"


def test_keystroke_table_accounts_for_every_call() -> None:
    """The table shows before/during/after, and other outcomes apart, summing to the calls."""
    report = _report(ours_128=20_000.0, cancel_p99_us=500.0)
    counters = {
        "keystrokes": 20,
        "calls": 20,
        "completed": 7,
        "superseded:before": 3,
        "superseded:during": 5,
        "superseded:after": 2,
        "superseded:cancelled:shutdown": 1,
        "notSuperseded:error:overloaded": 2,
    }
    report["keystroke"] = {
        "completionCalls": ["diagnostics/sleep"],
        "typists": 4,
        "seconds": 1.0,
        "counters": counters,
        "latency": _latency(1000.0),
        "series": {},
    }
    table = render_tables(report).split("keystroke completion (diagnostics/sleep)")[1]
    header, row = table.splitlines()[1:3]
    assert header.split() == [
        "keystrokes",
        "calls",
        "completed",
        "superseded",
        "before",
        "during",
        "after",
        "other",
    ]
    assert row.split() == ["20", "20", "7", "10", "3", "5", "2", "3"]


def test_ratios_are_tabled_at_every_level() -> None:
    """Besides the ratio at the target level, the table lists ours / peer at every level."""
    text = render_tables(_report(ours_128=20_000.0, cancel_p99_us=500.0))
    assert "ours / peer by calls in flight" in text
    section = text.split("ours / peer by calls in flight")[1]
    zerorpc = next(line for line in section.splitlines() if line.startswith("zerorpc"))
    assert zerorpc.split()[-2:] == ["20.00x", "20.00x"]


def test_only_loopback_addresses_are_accepted() -> None:
    """tcp on 127.0.0.1, ::1 or localhost and ipc pass; any other host is refused."""
    for ok in ("tcp://127.0.0.1:5", "tcp://[::1]:5", "tcp://localhost:5", "ipc:///tmp/x"):
        assert require_loopback(ok) == ok
    for bad in ("tcp://0.0.0.0:5", "tcp://10.1.2.3:5", "tcp://example.com:5", "udp://x"):
        with pytest.raises(BenchError):
            require_loopback(bad)


def test_no_phase_starts_past_the_time_limit() -> None:
    """Under a spent time limit a phase is refused before any process starts."""
    job = Job(stack="raw", address="tcp://127.0.0.1:1", duration=1.0)
    with time_limit(0.5), pytest.raises(BenchError, match="time limit"):
        run_phase([job], None)


def _minimal_log(path: Path, session_id: str) -> None:
    header = {"type": "session", "version": 0, "id": session_id, "createdAt": 1, "cwd": "/p"}
    header["delegationDepth"] = 0
    path.write_text(json.dumps(header) + "\n")


def test_session_logs_are_placed_and_indexed_in_the_run_directory(tmp_path: Path) -> None:
    """Logs are copied into a DSH layout; unreadable headers and duplicate ids are left out."""
    origin = tmp_path / "origin"
    (origin / "nested").mkdir(parents=True)
    _minimal_log(origin / "a.jsonl", "one")
    _minimal_log(origin / "nested" / "b.jsonl", "two")
    _minimal_log(origin / "c.jsonl", "one")  # the same id again
    (origin / "d.jsonl").write_text("not json\n")
    placed = place_sessions(origin, tmp_path / "root", tmp_path / "data")
    assert sorted(placed.ids) == ["one", "two"] and placed.rejected == 2
    assert len(list((tmp_path / "root").rglob("session.jsonl"))) == 2
    assert (tmp_path / "data" / "sessions.sqlite3").is_file()
    assert placed.describe()["sessions"] == 2
    with pytest.raises(BenchError, match="no raw DSH"):
        place_sessions(tmp_path / "data", tmp_path / "root2", tmp_path / "data2")


def test_the_real_fixtures_are_served_except_those_the_index_rejects(tmp_path: Path) -> None:
    """The 169 real DSH logs give 159 sources; the ten upstream rejects are left out."""
    if not FIXTURES.is_dir():
        pytest.skip(f"DSH fixtures not found at {FIXTURES}")
    placed = place_sessions(FIXTURES, tmp_path / "root", tmp_path / "data")
    assert len(placed.ids) == 159 and placed.rejected == 10
    summary = placed.describe()
    assert summary["p50Bytes"] <= summary["p90Bytes"] <= summary["maxBytes"]
    assert size_summary([])["sessions"] == 0


def test_cli_helpers_report_bad_options_and_expected_failures() -> None:
    """Non-positive options stop the parser; an expected failure becomes an exit status."""
    parser = load._parser()
    args = parser.parse_args(["--duration", "0"])
    with pytest.raises(SystemExit):
        option_changes(parser, args, ["duration", "agents"], positive=["duration"])
    assert option_changes(parser, parser.parse_args(["--agents", "3"]), ["agents"]) == {"agents": 3}

    def failing() -> int:
        raise BenchError("no server")

    assert run_guarded("t", failing, (BenchError,)) == Stopped(1)
    assert run_guarded("t", lambda: 5, (BenchError,)) == 5
    with pytest.raises(ValueError, match="invalid literal"):
        run_guarded("t", lambda: int("x"), (BenchError,))


def test_per_process_levels_multiply_by_the_processes() -> None:
    """``--per-process M`` with ``--processes N`` keeps N x M calls in flight in all."""
    parser = load._parser()
    settings = load._settings(
        parser, parser.parse_args(["--processes", "3", "--per-process", "2,4"])
    )
    assert settings.in_flight == (6, 12) and settings.processes == 3
    args = parser.parse_args(["--per-process", "2", "--in-flight", "4"])
    with pytest.raises(SystemExit):
        load._settings(parser, args)
    none = load._settings(
        parser, parser.parse_args(["--sessions-from", "none", "--profile", "none"])
    )
    assert none.sessions_from is None and none.profile == ()


def _quick_run(tmp_path: Path, *extra: str) -> tuple[dict[str, Any], str]:
    out = tmp_path / "load.json"
    report, stdout = run_bench("bench.load", "--quick", *extra, out=out, timeout=240)
    assert report["config"]["quick"] is True
    for name, stack in report["stacks"].items():
        if stack["status"] == "skipped":  # a peer that cannot be installed here
            assert name != "ours" and "not installed" in stack["reason"]
            continue
        # The TypeScript client needs Node.js and npm; without them it is skipped, saying so.
        assert stack["status"] == "measured", (name, stack.get("reason"))
        phases = report["echo"]["64B"]["stacks"][name]
        assert [p["inFlight"] for p in phases] == [8]
        assert phases[0]["callsPerSecond"] > 0
        assert phases[0]["latency"]["p50Us"] <= phases[0]["latency"]["p999Us"]
        assert phases[0]["server"]["cpuSeconds"] > 0
        assert phases[0]["server"]["peakRssMiB"] > 0
    ks = report["keystroke"]["counters"]
    superseded = sum(v for k, v in ks.items() if k.startswith("superseded:"))
    others = sum(v for k, v in ks.items() if k.startswith("notSuperseded"))
    assert ks["calls"] == ks["keystrokes"] > 0
    assert ks.get("completed", 0) + superseded + others == ks["calls"]
    assert superseded > 0
    assert report["cancel"]["idle"]["latency"]["count"] > 0
    if report["stacks"]["typescript"]["status"] == "measured":
        assert report["cancelTypescript"]["idle"]["latency"]["count"] > 0
        assert report["typescriptRatios"]["64B"]["ours"]["8"] > 0
        assert "TypeScript client, idle server" in stdout
    prepare = report["prepare"]
    if FIXTURES.is_dir():  # prepare runs over the real logs
        assert "skipped" not in prepare, prepare
        assert prepare["calls"] > 0 and not prepare["counters"], prepare["counters"]
        assert prepare["sources"]["sessions"] == 159
    else:
        assert "not found" in prepare["skipped"]
    real = report["keystrokeReferences"]
    if "skipped" not in real:  # the server serves the reference endpoints
        assert real["completionCalls"] == [
            "fileReferences/list",
            "sessionReferenceResolver/candidates",
        ]
        assert real["counters"]["calls"] == 2 * real["counters"]["keystrokes"]
        assert not [k for k in real["counters"] if "error" in k], real["counters"]
    measured = {n for n, s in report["stacks"].items() if s["status"] == "measured"}
    for target, peer in zip(report["targets"], ("zerorpc", "grpc", "rpyc", "raw"), strict=False):
        assert target["status"] in (("PASS", "MISS") if peer in measured else ("N/A",))
    assert report["targets"][4]["status"] in ("PASS", "MISS")
    for plot in report["plots"]:
        assert Path(plot).read_bytes().startswith(b"\x89PNG")
    assert "ours/peer" in stdout and "cancel-to-quiescence" in stdout
    return report, stdout


def test_quick_run_against_the_raw_ceiling_writes_the_report(tmp_path: Path) -> None:
    """``python -m bench.load --quick --peers raw`` runs every workload and writes JSON and PNGs."""
    report, stdout = _quick_run(tmp_path, "--peers", "raw")
    assert list(report["stacks"]) == ["ours", "oursAsync", "typescript", "raw"]
    assert report["ratios"]["64B"]["raw"]["8"] > 0
    # Both handler kinds are measured on the one server; only ``ours`` (def) is a ratio's side.
    assert report["stacks"]["oursAsync"]["status"] == "measured"
    assert [p["inFlight"] for p in report["echo"]["64B"]["stacks"]["oursAsync"]] == [8]
    assert set(report["ratios"]["64B"]) == {"raw"}
    assert "N/A" in stdout  # zerorpc, gRPC and RPyC were not run


@pytest.mark.slow
def test_quick_run_measures_every_peer(tmp_path: Path) -> None:
    """``python -m bench.load --quick`` measures every installed peer side by side."""
    report, _ = _quick_run(tmp_path)
    assert list(report["stacks"]) == ["ours", "oursAsync", "typescript", *PEERS]


def test_one_pass_percentiles_equal_the_histograms_own() -> None:
    """The one-pass summary reads the values the histogram gives percentile by percentile."""
    import random

    from bench._common import CDF_PERCENTILES, latency_summary, new_histogram

    rng = random.Random(5)
    samples = [int(rng.lognormvariate(12, 1.5)) + 1 for _ in range(5000)]
    histogram = new_histogram()
    for sample in samples:
        histogram.record_value(sample)
    summary = latency_summary(samples)
    assert summary["p99Us"] == round(histogram.get_value_at_percentile(99.0) / 1000, 3)
    expected = [round(histogram.get_value_at_percentile(p) / 1000, 3) for p in CDF_PERCENTILES]
    assert [us for _, us in summary["cdf"]] == expected
