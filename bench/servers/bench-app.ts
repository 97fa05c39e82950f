// What the three bench servers share: the configuration (from the environment, set by the driver), the worker
// pool, the batcher options, and the bench-only stats snapshot. Each server file only wires these into its
// framework with the real adapter, so the frameworks differ in nothing else.
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import type { BatchHandler, BatcherBase, BatcherOptions } from '@microbatch/core';
import type { WorkerPool } from '@microbatch/inference';
import type { ReadyLine, StatsSnapshot } from '../lib/server-protocol.js';
import { startPool, workloadOf } from '../lib/workloads.js';
import type { Workload } from '../lib/workloads.js';

/** The configuration the driver passes in the environment. */
export interface BenchServerConfig {
  readonly workload: Workload<unknown, unknown>;
  /** 1 is the unbatched server: every request is its own model call. */
  readonly maxBatchSize: number;
  readonly batchWaitTimeoutMs: number;
  /** Latency-aware admission; `Infinity` (the default) leaves only `maxQueueSize`. */
  readonly maxLatencyMs: number;
}

/** A number from the environment; the batcher validates ranges itself (and names the option). */
function numberFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  const value = raw === undefined || raw === '' ? fallback : Number(raw);
  if (Number.isNaN(value)) throw new Error(`${name} must be a number, got ${raw}`);
  return value;
}

export function readConfig(): BenchServerConfig {
  return {
    workload: workloadOf(process.env.BENCH_WORKLOAD ?? 'text'),
    maxBatchSize: numberFromEnv('BENCH_MAX_BATCH_SIZE', 8),
    batchWaitTimeoutMs: numberFromEnv('BENCH_BATCH_WAIT_MS', 0),
    maxLatencyMs: numberFromEnv('BENCH_MAX_LATENCY_MS', Number.POSITIVE_INFINITY),
  };
}

/** Padding accounting of the batches sent to the model (workloads whose lengths the main thread knows). */
interface Padding {
  realTokens: number;
  paddedTokens: number;
}

export { SNAPSHOT_PATH } from '../lib/server-protocol.js';

/** The model side of a server: its pool, the batch handler and the batcher options for the adapter. */
export interface BenchModel {
  readonly config: BenchServerConfig;
  readonly pool: WorkerPool<unknown, unknown>;
  readonly handler: BatchHandler<unknown, unknown>;
  readonly options: BatcherOptions<unknown> & { readonly name: string };
  readonly padding: Padding;
}

export async function startModel(config: BenchServerConfig = readConfig()): Promise<BenchModel> {
  const { workload } = config;
  const pool = startPool(workload);
  await pool.ready;
  const padding: Padding = { realTokens: 0, paddedTokens: 0 };
  const tokens = workload.tokens;
  // `pool.run` without the batch's abort signal, unlike `pool.handler`: when every client of a running batch
  // disconnects, the pool retires that worker and starts a replacement, which loads the model again. The load
  // generator drops all its connections at the end of each measurement, so with the signal every measurement would
  // end in a model reload and the next one would start on a cold worker. Finishing the batch costs one batch time.
  const handler: BatchHandler<unknown, unknown> = (inputs) => {
    if (tokens !== undefined) {
      // Right padding makes every row as long as the longest: the difference is compute spent on nothing.
      const lengths = inputs.map((input) => tokens(input));
      padding.realTokens += lengths.reduce((sum, length) => sum + length, 0);
      padding.paddedTokens += Math.max(...lengths) * lengths.length;
    }
    return pool.run(inputs);
  };
  const options = {
    name: `${workload.name}-b${config.maxBatchSize}`,
    maxBatchSize: config.maxBatchSize,
    batchWaitTimeoutMs: config.batchWaitTimeoutMs,
    maxLatencyMs: config.maxLatencyMs,
    // One batch per worker at a time: a second one would only queue inside the pool.
    maxConcurrentBatches: numberFromEnv('BENCH_MAX_CONCURRENT_BATCHES', pool.size),
    ...(workload.batchKey === undefined ? {} : { batchKey: workload.batchKey }),
  };
  return { config, pool, handler, options, padding };
}

/** Samples event-loop delay (a blocked loop delays every response, batched or not); reset at each snapshot. */
const loopDelay = monitorEventLoopDelay({ resolution: 2 });
loopDelay.enable();

export function snapshot(model: BenchModel, batcher: BatcherBase): StatsSnapshot {
  const stats = batcher.stats();
  const elu = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  const result: StatsSnapshot = {
    batches: stats.batchesProcessed,
    items: stats.itemsProcessed,
    failed: stats.failed,
    queueLength: stats.queueLength,
    inFlightBatches: stats.inFlightBatches,
    executionMs: stats.executionMs.sum,
    queueWaitMs: stats.queueWaitMs.sum,
    realTokens: model.padding.realTokens,
    paddedTokens: model.padding.paddedTokens,
    poolRestarts: model.pool.stats().restarts,
    loopActiveMs: elu.active,
    loopIdleMs: elu.idle,
    loopDelayP99Ms: loopDelay.percentile(99) / 1e6,
    loopDelayMaxMs: loopDelay.max / 1e6,
    cpuMs: (cpu.user + cpu.system) / 1000,
    overloaded: stats.overloaded,
    estimate: stats.estimate,
  };
  loopDelay.reset();
  return result;
}

/** Tells the driver the server is listening (and where): the first stdout line it waits for. */
export function announce(port: number): void {
  const line: ReadyLine = { ready: true, port, pid: process.pid };
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

/** Stops on SIGTERM from the driver: closes the server, then the pool (terminating its worker). */
export function closeOnSignal(close: () => Promise<void>): void {
  const stop = () => {
    close().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error(error);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
