// The conditions of a run: what the machine is, and how busy it was with work other than the benchmark's.
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, release, totalmem } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { REPO_ROOT } from './paths.js';

export interface MachineInfo {
  readonly cpu_model: string;
  /** `os.cpus().length` */
  readonly cpus: number;
  /** `os.availableParallelism()`, what `nproc` prints */
  readonly nproc: number;
  readonly memory_gib: number;
  readonly os: string;
  readonly node: string;
  readonly onnxruntime_node: string;
  readonly transformers_js: string;
  readonly load_average_at_start: readonly number[];
}

function versionOf(pkg: string): string {
  // Resolved from the inference package, which is what depends on them. Some packages do not export their
  // package.json, so walk up from the resolved entry point to the folder named like the package.
  try {
    const require = createRequire(`${REPO_ROOT}packages/inference/package.json`);
    let dir = dirname(require.resolve(pkg));
    while (!dir.endsWith(join('node_modules', pkg)) && dirname(dir) !== dir) dir = dirname(dir);
    return (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

export function machineInfo(): MachineInfo {
  const list = cpus();
  return {
    cpu_model: list[0]?.model.trim() ?? 'unknown',
    cpus: list.length,
    nproc: availableParallelism(),
    memory_gib: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    os: `${process.platform} ${release()}`,
    node: process.version,
    onnxruntime_node: versionOf('onnxruntime-node'),
    transformers_js: versionOf('@huggingface/transformers'),
    load_average_at_start: loadavg().map((value) => Math.round(value * 100) / 100),
  };
}

/** Busy and total CPU time of the whole machine so far, in ms (Linux /proc/stat; zeros elsewhere). */
export function machineCpuMs(): { busy: number; total: number } {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
    const ticks = line.trim().split(/\s+/).slice(1).map(Number);
    const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0); // idle + iowait
    const total = ticks.slice(0, 8).reduce((sum, value) => sum + value, 0); // guest time is already in user
    const msPerTick = 10; // USER_HZ is 100 on Linux
    return { busy: (total - idle) * msPerTick, total: total * msPerTick };
  } catch {
    return { busy: 0, total: 0 };
  }
}

/**
 * Waits (at most `maxMs`) for a quarter second in which the machine's CPUs were busy less than `thresholdPct` of
 * one core, so that a measurement does not start in the middle of someone else's test run. Call it while the
 * benchmark itself is idle. Returns the seconds waited.
 */
export async function waitForQuiet(maxMs: number, thresholdPct = 30): Promise<number> {
  const started = performance.now();
  for (;;) {
    const before = machineCpuMs();
    const from = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 250));
    const busyPct = ((machineCpuMs().busy - before.busy) / (performance.now() - from)) * 100;
    const waited = performance.now() - started;
    if (busyPct < thresholdPct || waited >= maxMs) return Math.round(waited / 100) / 10;
  }
}
