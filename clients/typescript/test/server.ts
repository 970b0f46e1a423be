/**
 * Test support: start a real `agent-actors serve` in a fresh temporary directory and stop it.
 *
 * The interpreter is `$AGENT_ACTORS_PYTHON`, else `python` (CI runs with the project's
 * virtualenv activated).
 */

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

export const PYTHON = process.env["AGENT_ACTORS_PYTHON"] ?? "python";

export interface ServerOptions {
  /** Endpoints to bind; default one ipc socket in the temporary directory. */
  readonly endpoints?: readonly string[];
  /** More arguments for `serve` (`--curve`, `--clients`, `--config`). */
  readonly args?: readonly string[];
  /** A temporary directory to use (made by {@link temporaryDirectory}). */
  readonly dir?: string;
}

export interface Server {
  /** The first bound address, as the server printed it (a tcp port `*` resolved). */
  readonly endpoint: string;
  readonly endpoints: readonly string[];
  readonly dir: string;
  readonly process: ChildProcess;
  /** Stop the server (continuing it first if it was stopped) and remove its directory. */
  stop(): Promise<void>;
}

export function temporaryDirectory(): string {
  return mkdtempSync(join(tmpdir(), "agent-actors-ts-"));
}

const READY_PREFIX = "agent-actors: serving on";
const START_TIMEOUT_MS = 60_000;

export async function startServer(options: ServerOptions = {}): Promise<Server> {
  const dir = options.dir ?? temporaryDirectory();
  const endpoints = options.endpoints ?? [`ipc://${join(dir, "s.sock")}`];
  const child = spawn(
    PYTHON,
    [
      "-m",
      "actors",
      "serve",
      ...endpoints.flatMap((endpoint) => ["--endpoint", endpoint]),
      "--data",
      join(dir, "data"),
      ...(options.args ?? []),
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  // Never outlive the test process, whatever happens to it.
  const killOnExit = (): void => {
    child.kill("SIGKILL");
  };
  process.once("exit", killOnExit);
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const bound = await new Promise<string[]>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`server did not start within ${START_TIMEOUT_MS} ms\n${stderr}`)),
      START_TIMEOUT_MS,
    );
    const lines = createInterface({ input: child.stdout! });
    lines.on("line", (line) => {
      if (line.startsWith(READY_PREFIX)) {
        clearTimeout(timer);
        resolve(line.slice(READY_PREFIX.length).trim().split(/\s+/));
      }
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code ?? signal}) before serving\n${stderr}`));
    });
    child.once("error", reject);
  });
  const [endpoint] = bound;
  if (endpoint === undefined) {
    throw new Error("server printed no endpoint");
  }
  let stopped: Promise<void> | undefined;
  return {
    endpoint,
    endpoints: bound,
    dir,
    process: child,
    stop: () => {
      stopped ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGCONT");
          child.kill("SIGTERM");
          const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
          await exited;
          clearTimeout(killer);
        }
        process.off("exit", killOnExit);
        rmSync(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}
