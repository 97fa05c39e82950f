// Runs bench/offline-limit.ts in its own process (no bench server is running meanwhile) and collects its lines.
import { fileURLToPath } from 'node:url';
import { startChild } from './child.js';
import { round } from './stats.js';
import type { WorkloadName } from './workloads.js';

export interface OfflineResult {
  readonly workload: WorkloadName;
  readonly batch_size: number;
  readonly round: number;
  readonly items_per_s: number;
  /** Median time of one `pool.run(batch)`, as seen from the calling thread. */
  readonly batch_p50_ms: number;
  /** CPU of the offline process (worker included) in % of one core. */
  readonly own_cpu_pct: number;
  /** CPU used on the machine by anything else meanwhile, in % of one core. */
  readonly other_cpu_pct: number;
}

interface OfflineLine {
  readonly workload: WorkloadName;
  readonly batch_size: number;
  readonly items_per_s: number;
  readonly batch_p50_ms: number;
  readonly failed: number;
  readonly own_cpu_pct: number;
  readonly other_cpu_pct: number;
}

const SCRIPT = fileURLToPath(new URL('../offline-limit.ts', import.meta.url));

export async function measureOffline(
  workload: WorkloadName,
  batchSizes: readonly number[],
  seconds: number,
  roundNo: number,
  onProgress: (finished: number) => void = () => undefined,
): Promise<OfflineResult[]> {
  const child = startChild(
    SCRIPT,
    ['--workload', workload, '--seconds', String(seconds), '--batch-sizes', batchSizes.join(',')],
    {},
  );
  const ticker = setInterval(() => onProgress(child.values().length), 500);
  const code = await child.exited.finally(() => clearInterval(ticker));
  if (code !== 0) throw new Error(`offline-limit.ts exited with code ${code}\n${child.stderr()}`);
  const lines = child.values() as OfflineLine[];
  const failed = lines.reduce((sum, line) => sum + line.failed, 0);
  if (failed > 0) throw new Error(`offline-limit.ts: ${failed} items failed\n${child.stderr()}`);
  return lines.map((line) => ({
    workload: line.workload,
    batch_size: line.batch_size,
    round: roundNo,
    items_per_s: round(line.items_per_s),
    batch_p50_ms: round(line.batch_p50_ms, 2),
    own_cpu_pct: round(line.own_cpu_pct),
    other_cpu_pct: round(line.other_cpu_pct),
  }));
}
