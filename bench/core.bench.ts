// Per-item overhead of the batching engine against calling the handler directly and against graphql's dataloader,
// with the same handler and batches of 64, measured in one run (medians of interleaved trials). Each trial is
// timed twice: wall clock, and this process's CPU time (user + system), which other processes on a shared machine
// disturb far less; the ratio against dataloader is taken on CPU time. A fourth case measures tracing's cost: the
// same batcher with `tracer: otelTracer()` and `@opentelemetry/api` loaded but no SDK registered (what a library
// user who never set up OpenTelemetry pays), against the batcher without a tracer.
import { readFile, writeFile } from 'node:fs/promises';
import { createBatcher } from '@microbatch/core';
import { otelTracer } from '@microbatch/core/otel';
import DataLoader from 'dataloader';

const BATCH = 64;
const ROUNDS = 2_000;
const TRIALS = 9;

const handler = async (inputs: readonly number[]): Promise<number[]> => inputs.map((x) => x + 1);
const inputs = Array.from({ length: BATCH }, (_, i) => i);

async function direct(): Promise<void> {
  for (let round = 0; round < ROUNDS; round += 1) await handler(inputs);
}

const batcher = createBatcher((xs: number[]) => handler(xs), { maxBatchSize: BATCH });
async function batched(): Promise<void> {
  for (let round = 0; round < ROUNDS; round += 1) await Promise.all(inputs.map((x) => batcher(x)));
}

const tracedBatcher = createBatcher((xs: number[]) => handler(xs), { maxBatchSize: BATCH, tracer: otelTracer() });
async function traced(): Promise<void> {
  for (let round = 0; round < ROUNDS; round += 1) await Promise.all(inputs.map((x) => tracedBatcher(x)));
}

const loader = new DataLoader<number, number>((keys) => handler(keys), { maxBatchSize: BATCH, cache: false });
async function dataloader(): Promise<void> {
  for (let round = 0; round < ROUNDS; round += 1) await Promise.all(inputs.map((x) => loader.load(x)));
}

async function nsPerItem(run: () => Promise<void>): Promise<{ wall: number; cpu: number }> {
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  await run();
  const wall = Number(process.hrtime.bigint() - start) / (ROUNDS * BATCH);
  const used = process.cpuUsage(cpu);
  return { wall, cpu: ((used.user + used.system) * 1000) / (ROUNDS * BATCH) };
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
};

async function main(): Promise<void> {
  const cases = { direct, batcher: batched, dataloader, traced } as const;
  const samples: Record<keyof typeof cases, number[]> = { direct: [], batcher: [], dataloader: [], traced: [] };
  const cpuSamples: Record<keyof typeof cases, number[]> = { direct: [], batcher: [], dataloader: [], traced: [] };
  for (const run of Object.values(cases)) await run(); // warm-up: let the JIT settle before measuring
  for (let trial = 0; trial < TRIALS; trial += 1) {
    // Interleaved so that machine noise hits every case alike, in an order rotated each trial so that no case always
    // runs right after the same other one (garbage left by the one before is paid by the next).
    const entries = Object.entries(cases) as Array<[keyof typeof cases, () => Promise<void>]>;
    const order = [...entries.slice(trial % entries.length), ...entries.slice(0, trial % entries.length)];
    for (const [name, run] of order) {
      const { wall, cpu } = await nsPerItem(run);
      samples[name].push(wall);
      cpuSamples[name].push(cpu);
    }
    process.stdout.write(`\rtrial ${trial + 1}/${TRIALS}`);
  }
  process.stdout.write('\n');
  const result = {
    direct_ns_per_item: Math.round(median(samples.direct)),
    batcher_ns_per_item: Math.round(median(samples.batcher)),
    dataloader_ns_per_item: Math.round(median(samples.dataloader)),
    direct_cpu_ns_per_item: Math.round(median(cpuSamples.direct)),
    batcher_cpu_ns_per_item: Math.round(median(cpuSamples.batcher)),
    dataloader_cpu_ns_per_item: Math.round(median(cpuSamples.dataloader)),
    otel_no_sdk_ns_per_item: Math.round(median(samples.traced)),
    otel_no_sdk_cpu_ns_per_item: Math.round(median(cpuSamples.traced)),
  };
  await writeFile(new URL('./results/core.json', import.meta.url), `${JSON.stringify(result, null, 2)}\n`);
  console.table({
    direct: { 'wall ns/item': result.direct_ns_per_item, 'CPU ns/item': result.direct_cpu_ns_per_item },
    '@microbatch/core': { 'wall ns/item': result.batcher_ns_per_item, 'CPU ns/item': result.batcher_cpu_ns_per_item },
    dataloader: { 'wall ns/item': result.dataloader_ns_per_item, 'CPU ns/item': result.dataloader_cpu_ns_per_item },
    'core + otelTracer(), no SDK': {
      'wall ns/item': result.otel_no_sdk_ns_per_item,
      'CPU ns/item': result.otel_no_sdk_cpu_ns_per_item,
    },
  });
  const ratio = result.batcher_cpu_ns_per_item / result.dataloader_cpu_ns_per_item;
  const wallRatio = result.batcher_ns_per_item / result.dataloader_ns_per_item;
  console.log(
    `batcher / dataloader = ${ratio.toFixed(2)}x on CPU time (${wallRatio.toFixed(2)}x wall; target <= 1.2x), ` +
      `batches of ${BATCH}, ${TRIALS} trials`,
  );
  const tracing = result.otel_no_sdk_cpu_ns_per_item / result.batcher_cpu_ns_per_item;
  const tracingWall = result.otel_no_sdk_ns_per_item / result.batcher_ns_per_item;
  console.log(
    `otelTracer() without an SDK / no tracer = ${tracing.toFixed(3)}x on CPU time (${tracingWall.toFixed(3)}x wall; ` +
      'target <= 1.05x)',
  );
  await batcher.close();
  await tracedBatcher.close();
}

/**
 * Latency-aware admission under overload, in process (no HTTP, no load generator competing for the CPU): a
 * simulated model whose batch takes 150 ms + 1 ms per item on one slot, offered 3x what it sustains, open-loop,
 * with `maxLatencyMs: 1500` and without. Wall-clock timers, so the figures carry the machine's timer slack.
 */
async function overload(): Promise<Record<string, number | string>[]> {
  const batchMs = (size: number) => 150 + size;
  const sustainable = 32 / (batchMs(32) / 1000);
  const rate = Math.round(3 * sustainable);
  const seconds = 6;
  const rows: Record<string, number | string>[] = [];
  for (const maxLatencyMs of [undefined, 1500]) {
    const batcher = createBatcher(
      (xs: number[]) => new Promise<number[]>((resolve) => setTimeout(() => resolve(xs), batchMs(xs.length))),
      { maxBatchSize: 32, ...(maxLatencyMs === undefined ? {} : { maxLatencyMs }) },
    );
    const accepted: number[] = [];
    const refused: number[] = [];
    const pending: Promise<void>[] = [];
    const start = performance.now();
    let sent = 0;
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        const due = Math.min(rate * seconds, Math.floor(((performance.now() - start) / 1000) * rate));
        for (; sent < due; sent += 1) {
          const sentAt = performance.now();
          pending.push(
            batcher(sent).then(
              () => void accepted.push(performance.now() - sentAt),
              () => void refused.push(performance.now() - sentAt),
            ),
          );
        }
        if (sent >= rate * seconds) {
          clearInterval(timer);
          resolve();
        }
      }, 1);
    });
    await Promise.all(pending);
    // Answers that came after the sending window still count, over the time they took to come.
    const elapsedS = (performance.now() - start) / 1000;
    await batcher.close();
    const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
    const at = (values: number[], p: number) =>
      sorted(values)[Math.min(values.length - 1, Math.floor(p * values.length))] ?? Number.NaN;
    rows.push({
      maxLatencyMs: maxLatencyMs ?? 'none (maxQueueSize 1024)',
      'offered req/s': rate,
      accepted: accepted.length,
      'accepted p50 ms': Math.round(at(accepted, 0.5)),
      'accepted p99 ms': Math.round(at(accepted, 0.99)),
      refused: refused.length,
      'refusal p90 ms': Math.round(at(refused, 0.9)),
      'accepted / sustainable': Number((accepted.length / elapsedS / sustainable).toFixed(2)),
    });
  }
  return rows;
}

await main();
const admission = await overload();
console.table(admission);
const previous = JSON.parse(await readFile(new URL('./results/core.json', import.meta.url), 'utf8')) as object;
await writeFile(
  new URL('./results/core.json', import.meta.url),
  `${JSON.stringify({ ...previous, admission_overload: admission }, null, 2)}\n`,
);
