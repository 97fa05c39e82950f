// The offline limit: the model called directly in its worker, full batches back to back, no HTTP and no batcher.
// Started by the driver as its own process (argv: workload, seconds per batch size, batch sizes), while no bench
// server runs; prints one JSON line per batch size.
import { parseArgs } from 'node:util';
import { machineCpuMs } from './lib/machine.js';
import { startPool, workloadOf } from './lib/workloads.js';

const { values } = parseArgs({
  options: {
    workload: { type: 'string', default: 'text' },
    seconds: { type: 'string', default: '3' },
    'batch-sizes': { type: 'string', default: '1,8,16,32' },
  },
});
const workload = workloadOf(values.workload);
const seconds = Number(values.seconds);
const batchSizes = values['batch-sizes'].split(',').map(Number);
const inputs = workload.bodies.map((body) => workload.parse(body));

const pool = startPool(workload);
await pool.ready;
let next = 0;
/** The next `size` inputs, round-robin over the same bodies the load generator sends. */
const batchOf = (size: number) => Array.from({ length: size }, () => inputs[next++ % inputs.length]);

for (const size of batchSizes) {
  // Warm-up: the first runs of a shape allocate and pack weights; they are not part of the limit.
  for (let round = 0; round < 2; round += 1) await pool.run(batchOf(size));
  const batchMs: number[] = [];
  let items = 0;
  let failed = 0;
  const machineBefore = machineCpuMs();
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  while (performance.now() - start < seconds * 1000) {
    const batch = batchOf(size);
    const begun = performance.now();
    const results = await pool.run(batch);
    batchMs.push(performance.now() - begun);
    items += size;
    failed += results.filter((result) => result instanceof Error).length;
  }
  const elapsed = (performance.now() - start) / 1000;
  const own = process.cpuUsage(cpuBefore);
  const machineBusy = machineCpuMs().busy - machineBefore.busy;
  // What the rest of the machine (other engineers' work) used meanwhile, in % of one core.
  const otherCpuPct = (Math.max(0, machineBusy - (own.user + own.system) / 1000) / (elapsed * 1000)) * 100;
  batchMs.sort((a, b) => a - b);
  const line = {
    workload: workload.name,
    batch_size: size,
    items_per_s: items / elapsed,
    batches: batchMs.length,
    batch_p50_ms: batchMs[Math.floor(batchMs.length / 2)] ?? Number.NaN,
    failed,
    own_cpu_pct: ((own.user + own.system) / 1000 / (elapsed * 1000)) * 100,
    other_cpu_pct: otherCpuPct,
  };
  console.log(JSON.stringify(line));
}
await pool.close();
