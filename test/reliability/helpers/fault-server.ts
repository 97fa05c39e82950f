// Starting the purpose-built fault server (../fault-server.ts) and reading its test-only `/__stats`.
import { fileURLToPath } from 'node:url';
import { type ServerProcess, startServer } from './child.js';
import { answer } from './http.js';

export const FAULT_SERVER = fileURLToPath(new URL('../fault-server.ts', import.meta.url));

export { MARKERS } from './markers.js';

export interface FaultServerOptions {
  readonly executionTimeoutMs?: number;
  readonly maxQueueSize?: number;
  readonly batchWaitMs?: number;
  readonly maxBatchSize?: number;
  readonly startTimeoutMs?: number;
  readonly modelDir?: string;
  /** The text-generation runner's scheduling (the runner's default, continuous, when absent). */
  readonly scheduling?: 'continuous' | 'request';
  /** Wait for `ready:` (model loaded, the default) or only `listening on`. */
  readonly until?: 'ready' | 'listening';
}

export function startFaultServer(options: FaultServerOptions = {}): Promise<ServerProcess> {
  const env: NodeJS.ProcessEnv = {};
  if (options.executionTimeoutMs !== undefined) env.EXECUTION_TIMEOUT_MS = String(options.executionTimeoutMs);
  if (options.maxQueueSize !== undefined) env.MAX_QUEUE_SIZE = String(options.maxQueueSize);
  if (options.batchWaitMs !== undefined) env.BATCH_WAIT_MS = String(options.batchWaitMs);
  if (options.maxBatchSize !== undefined) env.MAX_BATCH_SIZE = String(options.maxBatchSize);
  if (options.startTimeoutMs !== undefined) env.START_TIMEOUT_MS = String(options.startTimeoutMs);
  if (options.modelDir !== undefined) env.MODEL_DIR = options.modelDir;
  if (options.scheduling !== undefined) env.SCHEDULING = options.scheduling;
  return startServer({ args: ['--import', 'tsx', FAULT_SERVER], env, until: options.until ?? 'ready' });
}

type Rejections = Record<string, number>;

export interface BatcherFigures {
  readonly queueLength: number;
  readonly inFlightBatches: number;
  readonly succeeded: number;
  readonly failed: number;
  readonly cancelled: number;
  readonly expired: number;
  readonly batchesProcessed: number;
  readonly itemsProcessed: number;
  readonly rejected: Rejections;
}

/** What `GET /__stats` reports (see ../fault-server.ts). */
export interface FaultStats {
  readonly pid: number;
  readonly batchers: Record<'generate' | 'generate-plain' | 'stream', BatcherFigures>;
  readonly pool: {
    readonly size: number;
    readonly readyWorkers: number;
    readonly busyWorkers: number;
    readonly queueLength: number;
    readonly crashes: number;
    readonly restarts: number;
    readonly isReady: boolean;
  };
  readonly calls: Record<'generate' | 'generate-plain', number[]>;
  readonly enqueued: Record<string, number>;
  /** Errors answered with 500, by message (the routes report them to `onError` instead of stderr). */
  readonly serverErrors: Record<string, number>;
  readonly requests: {
    readonly requests: number;
    readonly finished: number;
    readonly closedEarly: number;
    readonly open: number;
  };
  readonly connections: number;
  readonly listeners: {
    readonly openResponses: number;
    readonly openSockets: number;
    readonly server: number;
    readonly process: number;
  };
  readonly resources: Record<string, number>;
  readonly memory: NodeJS.MemoryUsage;
}

/** Reads `/__stats` on a fresh connection (so the stats request itself is the only one open). */
export async function faultStats(server: ServerProcess): Promise<FaultStats> {
  const { status, body } = await answer(server.url, '/__stats', { timeoutMs: 10_000 });
  if (status !== 200) throw new Error(`/__stats answered ${status}: ${body}`);
  return JSON.parse(body) as FaultStats;
}

/**
 * Jumps the fault server's batcher clock `ms` forward (`POST /__clock`): the timers it reaches (an
 * `executionTimeoutMs` of a running batch) fire at once, in the server, before it answers. Returns how many fired.
 */
export async function advanceClock(server: ServerProcess, ms: number): Promise<number> {
  const { status, body } = await answer(server.url, '/__clock', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ advance: ms }),
    timeoutMs: 10_000,
  });
  if (status !== 200) throw new Error(`/__clock answered ${status}: ${body}`);
  return (JSON.parse(body) as { fired: number }).fired;
}

/** True once nothing is queued or running anywhere and the pool's worker is loaded and idle. */
export function idle(stats: FaultStats): boolean {
  const batchersIdle = Object.values(stats.batchers).every(
    (batcher) => batcher.queueLength === 0 && batcher.inFlightBatches === 0,
  );
  const { pool } = stats;
  return batchersIdle && pool.queueLength === 0 && pool.busyWorkers === 0 && pool.readyWorkers === pool.size;
}
