/**
 * Load driver: keep N calls of `diagnostics/echo` in flight against a running server for a
 * while, then print one JSON object with the throughput and latency percentiles.
 *
 *   node dist/bench/echo.js --endpoint ipc:///tmp/s.sock [--in-flight 64] [--seconds 5]
 *       [--warmup 1] [--payload-bytes 0] [--agent ID] [--raw]
 *
 * `--raw` calls `diagnostics/echoRaw` (no agent, no mailbox) instead. Without `--agent` an
 * agent is created first. Exit status 1 if any call failed.
 */

import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";

import { type Client, connect, type WireMap } from "../src/index.js";
import { nearestRank, numberOption } from "./shared.js";

interface Options {
  readonly endpoint: string;
  readonly inFlight: number;
  readonly seconds: number;
  readonly warmup: number;
  readonly payloadBytes: number;
  readonly agent: string | undefined;
  readonly raw: boolean;
}

function readOptions(): Options {
  const { values } = parseArgs({
    options: {
      endpoint: { type: "string" },
      "in-flight": { type: "string", default: "64" },
      seconds: { type: "string", default: "5" },
      warmup: { type: "string", default: "1" },
      "payload-bytes": { type: "string", default: "0" },
      agent: { type: "string" },
      raw: { type: "boolean", default: false },
    },
  });
  if (values.endpoint === undefined) {
    throw new Error("--endpoint is required (e.g. ipc:///tmp/agent-actors.sock)");
  }
  return {
    endpoint: values.endpoint,
    inFlight: Math.floor(numberOption("in-flight", values["in-flight"], 1)),
    seconds: numberOption("seconds", values.seconds, 0.1),
    warmup: numberOption("warmup", values.warmup, 0),
    payloadBytes: Math.floor(numberOption("payload-bytes", values["payload-bytes"], 0)),
    agent: values.agent,
    raw: values.raw,
  };
}

interface Tally {
  calls: number;
  failures: number;
  readonly latencies: number[];
}

/** Run `inFlight` loops of calls until `until` (performance.now() ms). */
async function drive(
  client: Client,
  endpoint: string,
  args: WireMap,
  inFlight: number,
  until: number,
  tally: Tally | undefined,
): Promise<void> {
  const loop = async (): Promise<void> => {
    while (performance.now() < until) {
      const started = performance.now();
      try {
        await client.call(endpoint, args);
        if (tally !== undefined) {
          tally.calls += 1;
          tally.latencies.push(performance.now() - started);
        }
      } catch {
        if (tally !== undefined) {
          tally.failures += 1;
        }
      }
    }
  };
  await Promise.all(Array.from({ length: inFlight }, loop));
}

function percentile(sorted: readonly number[], p: number): number | null {
  const value = nearestRank(sorted, p);
  return value === null ? null : Math.round(value * 1000) / 1000;
}

async function main(): Promise<number> {
  const options = readOptions();
  const client = await connect(options.endpoint, { name: "bench-echo-ts" });
  try {
    const payload = options.payloadBytes > 0 ? new Uint8Array(options.payloadBytes) : "x";
    let endpoint = "diagnostics/echoRaw";
    let args: WireMap = { payload };
    if (!options.raw) {
      const agent =
        options.agent ??
        ((await client.call("agents/create", { title: "bench" })) as { agentId: string }).agentId;
      endpoint = "diagnostics/echo";
      args = { agentId: agent, payload };
    }
    await drive(
      client,
      endpoint,
      args,
      options.inFlight,
      performance.now() + options.warmup * 1000,
      undefined,
    );
    const tally: Tally = { calls: 0, failures: 0, latencies: [] };
    const started = performance.now();
    await drive(client, endpoint, args, options.inFlight, started + options.seconds * 1000, tally);
    const seconds = (performance.now() - started) / 1000;
    const sorted = tally.latencies.sort((a, b) => a - b);
    const report = {
      stack: "typescript",
      endpoint,
      inFlight: options.inFlight,
      payloadBytes: options.payloadBytes,
      seconds: Math.round(seconds * 1000) / 1000,
      calls: tally.calls,
      failures: tally.failures,
      callsPerSecond: Math.round(tally.calls / seconds),
      latencyMs: {
        p50: percentile(sorted, 50),
        p90: percentile(sorted, 90),
        p99: percentile(sorted, 99),
      },
    };
    process.stdout.write(`${JSON.stringify(report)}\n`);
    return tally.failures === 0 ? 0 : 1;
  } finally {
    await client.close();
  }
}

main().then(
  (status) => {
    process.exitCode = status;
  },
  (error: unknown) => {
    process.stderr.write(`bench/echo: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 2;
  },
);
