/**
 * Cancel-to-quiescence driver: abort the `AbortSignal` of a running `diagnostics/sleep` N
 * times against a running server and print one JSON object with the latency percentiles.
 *
 *   node dist/bench/cancel.js --endpoint ipc:///tmp/s.sock [--cancels 300] [--settle 0.005]
 *       [--agent ID]
 *
 * Each sample is the server's `time.monotonic()` at the end of the handler minus ours at the
 * abort, on one host-wide clock (bench/probe.ts; the method of bench.load's Python probe). A
 * probe whose cancel found the call still queued yields no sample and is counted apart. Without
 * `--agent` an agent is created first. Exit status 2 if the run failed.
 */

import { parseArgs } from "node:util";

import { connect } from "../src/index.js";
import { cancelToQuiescence, sleep } from "./probe.js";
import { nearestRank, numberOption } from "./shared.js";

interface Options {
  readonly endpoint: string;
  readonly cancels: number;
  readonly settle: number;
  readonly agent: string | undefined;
}

function readOptions(): Options {
  const { values } = parseArgs({
    options: {
      endpoint: { type: "string" },
      cancels: { type: "string", default: "300" },
      settle: { type: "string", default: "0.005" },
      agent: { type: "string" },
    },
  });
  if (values.endpoint === undefined) {
    throw new Error("--endpoint is required (e.g. ipc:///tmp/agent-actors.sock)");
  }
  return {
    endpoint: values.endpoint,
    cancels: Math.floor(numberOption("cancels", values.cancels, 1)),
    settle: numberOption("settle", values.settle, 0),
    agent: values.agent,
  };
}

/** Nearest-rank percentile of sorted nanoseconds, in microseconds. */
function percentileUs(sorted: readonly number[], p: number): number | null {
  const value = nearestRank(sorted, p);
  return value === null ? null : Math.round(value) / 1000;
}

async function main(): Promise<number> {
  const options = readOptions();
  const client = await connect(options.endpoint, { name: "bench-cancel-ts" });
  try {
    const agent =
      options.agent ??
      ((await client.call("agents/create", { title: "bench" })) as { agentId: string }).agentId;
    // One untimed call activates the agent, so the first probe does not time its activation.
    await client.call("diagnostics/echo", { agentId: agent, payload: "x" });
    const samples: number[] = [];
    let cancelledWhileQueued = 0;
    for (let i = 0; i < options.cancels; i++) {
      const latency = await cancelToQuiescence(client, agent, options.settle);
      if (latency === null) {
        cancelledWhileQueued += 1;
      } else {
        samples.push(latency);
      }
      await sleep(5);
    }
    const sorted = samples.sort((a, b) => a - b);
    const report = {
      stack: "typescript",
      cancels: options.cancels,
      samples: sorted.length,
      cancelledWhileQueued,
      settleSeconds: options.settle,
      cancelToQuiescenceUs: {
        p50: percentileUs(sorted, 50),
        p90: percentileUs(sorted, 90),
        p99: percentileUs(sorted, 99),
        max: percentileUs(sorted, 100),
      },
    };
    process.stdout.write(`${JSON.stringify(report)}\n`);
    return 0;
  } finally {
    await client.close();
  }
}

main().then(
  (status) => {
    process.exitCode = status;
  },
  (error: unknown) => {
    process.stderr.write(
      `bench/cancel: ${error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exitCode = 2;
  },
);
