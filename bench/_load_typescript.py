"""The TypeScript client as a load benchmark stack: its build, its load processes, its results.

The stack ``typescript`` runs the load of :mod:`bench._load_ours` (the closed echo loop and the
cancel probes) from ``clients/typescript``'s client instead of ``wire``'s: each load process is
``node clients/typescript/dist/bench/load.js JOB`` (source ``clients/typescript/bench/load.ts``),
given the same :class:`~bench._load_jobs.Job` and speaking the same handshake as
``python -m bench._load_worker``. It reports raw nanosecond samples instead of histograms (no
HdrHistogram package in the client); :func:`samples_json` turns them into the Python processes'
form, so phases merge and read alike.

Before the stack runs, :func:`prepare_client` builds the client when ``dist/`` is missing or
older than its sources (``npm ci`` when ``node_modules`` is missing or older than the lock file,
then ``npm run build``), or says why the stack is skipped.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bench._common import progress
from bench._load_jobs import Job
from bench._load_stats import encode_samples

__all__ = [
    "CLIENT_DIR",
    "DRIVER",
    "ECHO_CALL",
    "LABEL",
    "STACK",
    "build_reason",
    "describe",
    "prepare_client",
    "samples_json",
    "worker_argv",
]

STACK = "typescript"
LABEL = "agent-actors (TypeScript client)"
CLIENT_DIR = Path(__file__).resolve().parents[1] / "clients" / "typescript"
DRIVER = CLIENT_DIR / "dist" / "bench" / "load.js"
#: The endpoint the Python client's ``ours`` stack calls (the ``def`` handler), so the two
#: clients' rows differ by the client alone.
ECHO_CALL = "diagnostics/echoSync"
#: The client's own requirement (``engines`` in its package.json).
NODE_MAJOR = 20
_BUILD = "cd clients/typescript && npm ci && npm run build"
#: Seconds ``npm ci`` (a download) and ``npm run build`` (tsc) may take.
_INSTALL_WITHIN = 600.0
_BUILD_WITHIN = 300.0


def worker_argv(job: Job) -> list[str]:
    """The command line of one TypeScript load process running ``job``."""
    return [shutil.which("node") or "node", str(DRIVER), job.to_json()]


def samples_json(result: Mapping[str, Any]) -> dict[str, Any]:
    """A TypeScript process's result (``samplesNs``: raw nanoseconds per series) in the form
    :meth:`bench._load_jobs.Samples.to_json` gives (``histograms``: encoded HdrHistograms).

    Raises:
        ValueError: the result does not hold a latency series matching its call count, or a
            sample is negative.
    """
    raw: Mapping[str, Iterable[float]] = result["samplesNs"]
    latency = [int(v) for v in raw.get("latency", ())]
    if len(latency) != int(result["calls"]):
        raise ValueError(f"{result['calls']} calls but {len(latency)} latency samples")
    histograms = {"latency": encode_samples(latency)}
    for name, values in raw.items():
        if name != "latency":
            histograms[name] = encode_samples(int(v) for v in values)
    return {
        "calls": len(latency),
        "counters": dict(result.get("counters", {})),
        "histograms": histograms,
        "cpuSeconds": float(result.get("cpuSeconds", 0.0)),
    }


def _newest(paths: Iterable[Path]) -> float:
    return max((p.stat().st_mtime for p in paths if p.is_file()), default=0.0)


def build_reason(client: Path = CLIENT_DIR) -> str | None:
    """What needs doing before ``client``'s load driver can run: ``"install"`` (no
    ``node_modules``, or one older than ``package-lock.json``), ``"build"`` (``dist/`` missing
    or older than a source, the TypeScript config or the lock file), or ``None``."""
    installed = client / "node_modules" / ".package-lock.json"
    if not installed.is_file() or _newest([client / "package-lock.json"]) > _newest([installed]):
        return "install"
    outputs = [client / "dist" / "bench" / "load.js", client / "dist" / "src" / "index.js"]
    if not all(p.is_file() for p in outputs):
        return "build"
    sources = [*client.glob("src/**/*.ts"), *client.glob("bench/**/*.ts")]
    sources += [client / "tsconfig.json", client / "package.json", client / "package-lock.json"]
    if _newest(sources) > min(p.stat().st_mtime for p in outputs):
        return "build"
    return None


def _node_version() -> str | None:
    node = shutil.which("node")
    if node is None:
        return None
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _npm(args: list[str], client: Path, within: float) -> str | None:
    """Run ``npm ARGS`` in ``client``; the reason it failed, or ``None``."""
    npm = shutil.which("npm")
    assert npm is not None
    try:
        done = subprocess.run(
            [npm, *args], cwd=client, capture_output=True, text=True, timeout=within
        )
    except subprocess.TimeoutExpired:
        return f"`npm {' '.join(args)}` did not finish within {within:g} s"
    except OSError as exc:
        return f"`npm {' '.join(args)}` could not start: {exc}"
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip())[-400:]
        return f"`npm {' '.join(args)}` failed (status {done.returncode}): {tail}"
    return None


def prepare_client(client: Path = CLIENT_DIR) -> str | None:
    """Make sure the TypeScript load driver is built and current, building it if need be.

    Returns ``None`` when it can run, else why the stack is skipped (with the command to run
    by hand where building is what failed).
    """
    if not (client / "package.json").is_file():
        return f"no TypeScript client at {client}"
    version = _node_version()
    if version is None:
        return f"Node.js not installed (node {NODE_MAJOR} or newer and npm are needed)"
    match = re.match(r"v(\d+)\.", version)
    if match is None or int(match.group(1)) < NODE_MAJOR:
        return f"Node.js {NODE_MAJOR} or newer not installed (found {version})"
    needed = build_reason(client)
    if needed is None:
        return None
    if shutil.which("npm") is None:
        return f"the client is not built and npm is not installed (run `{_BUILD}`)"
    if needed == "install":
        progress("typescript: installing the client's dependencies (npm ci)")
        failed = _npm(["ci", "--no-audit", "--no-fund"], client, _INSTALL_WITHIN)
        if failed:
            return f"{failed}; run `{_BUILD}` by hand"
    progress("typescript: building the client (npm run build)")
    failed = _npm(["run", "build"], client, _BUILD_WITHIN)
    if failed:
        return f"{failed}; run `{_BUILD}` by hand"
    if build_reason(client) is not None:
        return f"the build left dist/ missing or stale; run `{_BUILD}`"
    return None


def describe() -> dict[str, Any]:
    """The stack's entry in the report's ``stacks`` (its status is set by the run)."""
    try:
        package = json.loads((CLIENT_DIR / "package.json").read_text(encoding="utf-8"))
        version = package.get("version")
    except (OSError, ValueError):
        version = None
    return {
        "label": LABEL,
        "version": version,
        "node": _node_version(),
        "concurrencyModel": "one Node.js process per load process, one client (a zeromq "
        "DEALER) with M promises in flight; the server (a separate one, the same program) "
        "runs the def handler inline, as for agent-actors (def)",
        "status": "pending",
    }
