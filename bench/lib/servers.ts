// Starting, probing and stopping one bench server (a child process per framework × workload × max batch size).
import { fileURLToPath } from 'node:url';
import { SNAPSHOT_PATH } from './server-protocol.js';
import type { ReadyLine, StatsSnapshot } from './server-protocol.js';
import { startChild } from './child.js';
import type { Workload, WorkloadName } from './workloads.js';

export type Framework = 'express' | 'koa' | 'nest';
export const FRAMEWORKS: readonly Framework[] = ['express', 'koa', 'nest'];

export interface ServerSpec {
  readonly framework: Framework;
  readonly workload: WorkloadName;
  readonly maxBatchSize: number;
  readonly batchWaitTimeoutMs: number;
  /** Latency-aware admission (absent: none). */
  readonly maxLatencyMs?: number;
}

export interface RunningServer {
  readonly port: number;
  readonly pid: number;
  snapshot(): Promise<StatsSnapshot>;
  stop(): Promise<void>;
}

const script = (framework: Framework) => fileURLToPath(new URL(`../servers/${framework}-server.ts`, import.meta.url));

export async function startServer(spec: ServerSpec): Promise<RunningServer> {
  const child = startChild(script(spec.framework), [], {
    BENCH_WORKLOAD: spec.workload,
    BENCH_MAX_BATCH_SIZE: String(spec.maxBatchSize),
    BENCH_BATCH_WAIT_MS: String(spec.batchWaitTimeoutMs),
    ...(spec.maxLatencyMs === undefined ? {} : { BENCH_MAX_LATENCY_MS: String(spec.maxLatencyMs) }),
  });
  let ready: ReadyLine;
  try {
    ready = await child.nextJson((value) => (value as { ready?: unknown }).ready === true, 120_000);
  } catch (error) {
    await child.stop();
    throw error;
  }
  let stopping = false;
  // A server that dies mid-run is reported with its own words rather than as a refused connection.
  void child.exited.then((code) => {
    if (!stopping)
      process.stderr.write(
        `\n${spec.framework} server (${spec.workload}, b${spec.maxBatchSize}) exited with code ${code}:\n${child.stderr()}\n`,
      );
  });
  const base = `http://127.0.0.1:${ready.port}`;
  return {
    port: ready.port,
    pid: ready.pid,
    async snapshot() {
      const response = await fetch(`${base}${SNAPSHOT_PATH}`, { method: 'POST', headers: { connection: 'close' } });
      if (!response.ok) throw new Error(`snapshot failed with ${response.status}: ${await response.text()}`);
      return (await response.json()) as StatsSnapshot;
    },
    stop: () => {
      stopping = true;
      return child.stop();
    },
  };
}

/** One request before measuring: the route answers 200, with the batch headers and a well-formed body. */
export async function smokeCheck(server: RunningServer, workload: Workload<unknown, unknown>): Promise<void> {
  const response = await fetch(`http://127.0.0.1:${server.port}${workload.path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', connection: 'close' },
    body: JSON.stringify(workload.bodies[0]),
  });
  const body: unknown = await response.json().catch(() => undefined);
  const problem =
    response.status !== 200
      ? `status ${response.status}`
      : response.headers.get('x-batch-size') === null
        ? 'no X-Batch-Size header'
        : workload.check(body);
  if (problem !== undefined)
    throw new Error(`${workload.path} smoke check failed: ${problem} (${JSON.stringify(body)})`);
}
