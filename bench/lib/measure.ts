// One measured point: warm up, wait for the server to be idle, then load it for a fixed window while reading its
// counters (batches, worker time, event loop) and the machine's CPU before and after.
import { runLoad } from './load.js';
import { machineCpuMs, waitForQuiet } from './machine.js';
import type { StatsSnapshot } from './server-protocol.js';
import type { Framework, RunningServer } from './servers.js';
import { round } from './stats.js';
import type { Workload, WorkloadName } from './workloads.js';

export type Mode = 'unbatched' | 'batched';

export interface Point {
  readonly workload: WorkloadName;
  readonly framework: Framework;
  readonly mode: Mode;
  readonly max_batch_size: number;
  readonly concurrency: number;
  /** Which repetition of this point (1 = the sweep; 2.. = the main configuration's repeats). */
  readonly round: number;
  readonly items_per_s: number;
  readonly p50_ms: number;
  readonly p99_ms: number;
  readonly mean_ms: number;
  /** Items per handler call over the window, from the server's batcher stats. */
  readonly mean_batch_size: number;
  readonly requests: number;
  readonly non_2xx: number;
  readonly errors: number;
  /** Handler-call time / wall time: how much of the window the model worker was busy (or being messaged). */
  readonly worker_busy_pct: number;
  readonly event_loop_utilization_pct: number;
  readonly event_loop_delay_p99_ms: number;
  /** CPU of the server process (all its threads) in % of one core. */
  readonly server_cpu_pct: number;
  /** CPU of the driver process (autocannon) in % of one core. */
  readonly load_generator_cpu_pct: number;
  /** CPU used on the machine by anything else (other engineers' work) in % of one core. */
  readonly other_cpu_pct: number;
  /** Real tokens / padded tokens sent to the model (null where the server cannot count them). */
  readonly padding_efficiency_pct: number | null;
  /** Seconds spent waiting for the machine to be quiet before this point. */
  readonly quiet_wait_s: number;
}

export interface PointSpec {
  readonly workload: Workload<unknown, unknown>;
  readonly framework: Framework;
  readonly maxBatchSize: number;
  readonly concurrency: number;
  readonly round: number;
  readonly warmS: number;
  readonly measureS: number;
  /** The longest wait for a quiet machine before warming up, in ms. */
  readonly quietWaitMs: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until nothing is queued or running, so a measurement never starts behind the previous one's leftovers. */
async function idle(server: RunningServer): Promise<StatsSnapshot> {
  for (let attempt = 0; ; attempt += 1) {
    const stats = await server.snapshot();
    if ((stats.queueLength === 0 && stats.inFlightBatches === 0) || attempt >= 100) return stats;
    await sleep(50);
  }
}

export async function measurePoint(
  server: RunningServer,
  spec: PointSpec,
  onTick: (phase: string, responses: number, elapsedS: number) => void,
): Promise<Point> {
  const { workload, concurrency } = spec;
  const load = { port: server.port, path: workload.path, bodies: workload.bodies, connections: concurrency };
  onTick('waiting for a quiet machine', 0, 0);
  const quietWaitS = await waitForQuiet(spec.quietWaitMs);
  await runLoad({ ...load, seconds: spec.warmS, counted: false, onTick: (n, s) => onTick('warm-up', n, s) });
  const before = await idle(server);
  const machineBefore = machineCpuMs();
  const driverBefore = process.cpuUsage();
  const started = performance.now();
  const result = await runLoad({ ...load, seconds: spec.measureS, onTick: (n, s) => onTick('measuring', n, s) });
  const after = await server.snapshot();
  const wallMs = performance.now() - started;
  const driverCpu = process.cpuUsage(driverBefore);
  const machineAfter = machineCpuMs();
  if (after.poolRestarts !== before.poolRestarts) {
    throw new Error(`the model worker was restarted during the measurement (${spec.framework}, ${workload.name})`);
  }
  const delta = (key: keyof StatsSnapshot) => (after[key] as number) - (before[key] as number);
  const batches = delta('batches');
  const serverCpu = delta('cpuMs');
  const driverCpuMs = (driverCpu.user + driverCpu.system) / 1000;
  const loopActive = delta('loopActiveMs');
  const padded = delta('paddedTokens');
  const pct = (ms: number) => round((ms / wallMs) * 100);
  return {
    workload: workload.name,
    framework: spec.framework,
    mode: spec.maxBatchSize === 1 ? 'unbatched' : 'batched',
    max_batch_size: spec.maxBatchSize,
    concurrency,
    round: spec.round,
    items_per_s: round(result.itemsPerS),
    p50_ms: round(result.p50Ms, 2),
    p99_ms: round(result.p99Ms, 2),
    mean_ms: round(result.meanMs, 2),
    mean_batch_size: batches > 0 ? round(delta('items') / batches, 2) : 0,
    requests: result.ok,
    non_2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    worker_busy_pct: pct(delta('executionMs')),
    event_loop_utilization_pct: round((loopActive / Math.max(loopActive + delta('loopIdleMs'), 1)) * 100),
    event_loop_delay_p99_ms: round(after.loopDelayP99Ms, 1),
    server_cpu_pct: pct(serverCpu),
    load_generator_cpu_pct: pct(driverCpuMs),
    other_cpu_pct: pct(Math.max(0, machineAfter.busy - machineBefore.busy - serverCpu - driverCpuMs)),
    padding_efficiency_pct: padded > 0 ? round((delta('realTokens') / padded) * 100) : null,
    quiet_wait_s: quietWaitS,
  };
}
