/**
 * A bench.load load-generator process for the TypeScript client:
 *
 *   node dist/bench/load.js JOB_JSON
 *
 * `python -m bench.load` starts it in place of `python -m bench._load_worker JOB_JSON` for the
 * `typescript` stack, with the same job (bench/_load_jobs.py, `Job`) and the same handshake:
 * connect and warm up (one call to each agent at least, so every agent is active before the
 * window), print `bench-load: ready`, read the window's start (`time.monotonic_ns()` of the
 * parent, the clock of `process.hrtime.bigint()`) from stdin, run the workload, and print
 * `bench-load: result ` followed by one JSON object. Only calls that end inside the window count.
 *
 * Workloads, as bench/_load_ours.py runs them for the Python client:
 * - `closed`: `concurrency` loops, each calling `calls[0]` again as soon as its previous call
 *   returned; loop `t` of process `w` calls agent `agents[(w * concurrency + t) % K]`.
 * - `cancel-probe`: one cancel-to-quiescence probe after the other (bench/probe.ts).
 *
 * The result holds the raw samples in nanoseconds (`samplesNs.latency`,
 * `samplesNs.cancelToQuiescence`); the parent turns them into the HdrHistograms the Python
 * processes send. Exit status 1 with the reason on stderr if anything fails.
 */

import { createInterface } from "node:readline";

import { type Client, connect, WireError } from "../src/index.js";
import { cancelToQuiescence, monotonicNs, sleep } from "./probe.js";

const READY = "bench-load: ready";
const RESULT_PREFIX = "bench-load: result ";
/** Milliseconds a process may take past its window to drain before it fails. */
const DRAIN_MS = 30_000;

/** The fields of bench/_load_jobs.py's `Job` that this driver reads. */
interface Job {
  readonly stack: string;
  readonly workload: string;
  readonly address: string;
  readonly worker: number;
  readonly concurrency: number;
  readonly duration: number;
  readonly payload_bytes: number;
  readonly agents: readonly string[];
  readonly warmup_calls: number;
  readonly calls: readonly string[];
  readonly probe_settle: number;
}

/** What the process measured in its window; the parent makes histograms of `samplesNs`. */
class Samples {
  readonly latency: number[] = [];
  readonly series = new Map<string, number[]>();
  readonly counters = new Map<string, number>();
  readonly endNs: bigint;
  private readonly cpuStart = process.cpuUsage();
  private cpuMicros: number | undefined;

  constructor(
    readonly startNs: bigint,
    durationSeconds: number,
  ) {
    this.endNs = startNs + BigInt(Math.round(durationSeconds * 1e9));
  }

  open(now: bigint = monotonicNs()): boolean {
    return now < this.endNs;
  }

  callDone(startedNs: bigint, endedNs: bigint): void {
    if (this.startNs <= endedNs && endedNs <= this.endNs) {
      this.latency.push(Number(endedNs - startedNs));
    }
  }

  count(name: string): void {
    this.counters.set(name, (this.counters.get(name) ?? 0) + 1);
  }

  add(series: string, valueNs: number): void {
    let values = this.series.get(series);
    if (values === undefined) {
      values = [];
      this.series.set(series, values);
    }
    values.push(valueNs);
  }

  stopClock(): void {
    if (this.cpuMicros === undefined) {
      const used = process.cpuUsage(this.cpuStart);
      this.cpuMicros = used.user + used.system;
    }
  }

  toJSON(): object {
    this.stopClock();
    return {
      calls: this.latency.length,
      counters: Object.fromEntries(this.counters),
      samplesNs: { latency: this.latency, ...Object.fromEntries(this.series) },
      cpuSeconds: (this.cpuMicros ?? 0) / 1e6,
    };
  }
}

/** bench/_load_jobs.py's `payload_of`: the same bytes for every stack. */
function payloadOf(size: number): Uint8Array {
  return Uint8Array.from({ length: size }, (_, i) => i % 251);
}

function sameBytes(a: unknown, b: Uint8Array): boolean {
  return a instanceof Uint8Array && a.length === b.length && a.every((v, i) => v === b[i]);
}

/** Print READY and wait for the parent's start time on stdin. */
async function waitForGo(): Promise<bigint> {
  process.stdout.write(`${READY}\n`);
  const lines = createInterface({ input: process.stdin });
  try {
    for await (const line of lines) {
      if (line.trim()) {
        return BigInt(line.trim());
      }
    }
  } finally {
    lines.close();
  }
  throw new Error("the parent closed stdin before saying go");
}

async function closed(
  client: Client,
  job: Job,
  samples: Samples,
  payload: Uint8Array,
): Promise<void> {
  const endpoint = job.calls[0] ?? "diagnostics/echo";
  const loop = async (task: number): Promise<void> => {
    const agentId = job.agents[(job.worker * job.concurrency + task) % job.agents.length];
    const args = { agentId, payload };
    while (samples.open()) {
      const started = monotonicNs();
      try {
        await client.call(endpoint, args);
      } catch (error) {
        if (!(error instanceof WireError)) {
          throw error;
        }
        samples.count(`error:${error.code}`);
        await sleep(1); // an error loop must not spin
        continue;
      }
      samples.callDone(started, monotonicNs());
    }
  };
  await Promise.all(Array.from({ length: job.concurrency }, (_, task) => loop(task)));
}

async function probes(client: Client, job: Job, samples: Samples): Promise<void> {
  const agentId = job.agents[0] ?? "";
  while (samples.open()) {
    const latency = await cancelToQuiescence(client, agentId, job.probe_settle);
    if (latency === null) {
      samples.count("cancelledWhileQueued");
    } else {
      samples.add("cancelToQuiescence", latency);
    }
    await sleep(5);
  }
}

async function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not end within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function run(job: Job): Promise<Samples> {
  if (job.agents.length === 0) {
    throw new Error("agent-actors workloads need at least one agent id");
  }
  if (job.workload !== "closed" && job.workload !== "cancel-probe") {
    throw new Error(`the TypeScript driver runs closed and cancel-probe, not ${job.workload}`);
  }
  const client = await connect(job.address, { name: `bench.load/ts/${job.worker}` });
  try {
    const payload = payloadOf(job.payload_bytes);
    const first = job.calls[0] ?? "";
    const echo = first.startsWith("diagnostics/echo") ? first : "diagnostics/echo";
    for (let i = 0; i < Math.max(job.warmup_calls, job.agents.length); i++) {
      // Every agent gets activated here, before the window, not inside it.
      const args = { agentId: job.agents[i % job.agents.length], payload };
      if (!sameBytes(await client.call(echo, args), payload)) {
        throw new Error(`${echo} returned something else than its payload`);
      }
    }
    const samples = new Samples(await waitForGo(), job.duration);
    await sleep(Math.max(0, Number(samples.startNs - monotonicNs()) / 1e6));
    const work =
      job.workload === "closed"
        ? closed(client, job, samples, payload)
        : probes(client, job, samples);
    await withDeadline(work, job.duration * 1000 + DRAIN_MS, `the ${job.workload} workload`);
    samples.stopClock();
    return samples;
  } finally {
    await client.close();
  }
}

async function main(argv: readonly string[]): Promise<number> {
  if (argv.length !== 1 || argv[0] === undefined) {
    process.stderr.write("usage: node dist/bench/load.js JOB_JSON\n");
    return 2;
  }
  const samples = await run(JSON.parse(argv[0]) as Job);
  process.stdout.write(`${RESULT_PREFIX}${JSON.stringify(samples)}\n`);
  return 0;
}

main(process.argv.slice(2)).then(
  (status) => {
    process.exitCode = status;
  },
  (error: unknown) => {
    process.stderr.write(
      `bench/load: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 1;
  },
);
