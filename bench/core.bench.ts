// Per-item overhead of the batching engine against calling the handler directly and against graphql's dataloader,
// with the same handler and batches of 64, measured in one run (medians of interleaved trials).
import { writeFile } from 'node:fs/promises';
import { createBatcher } from '@microbatch/core';
import DataLoader from 'dataloader';

const BATCH = 64;
const ROUNDS = 2_000;
const TRIALS = 9;

const handler = async (inputs: readonly number[]): Promise<number[]> => inputs.map((x) => x + 1);
const inputs = Array.from({ length: BATCH }, (_, i) => i);

async function direct(): Promise<void> {
  for (let round = 0; round < ROUNDS; round += 1) await handler(inputs);
}

const batcher = createBatcher((xs: number[]) => handler(xs), { maxBatchSize: BATCH, batchWaitTimeoutMs: 5 });
async function batched(): Promise<void> {
  for (let round = 0; round < ROUNDS; round += 1) await Promise.all(inputs.map((x) => batcher(x)));
}

const loader = new DataLoader<number, number>((keys) => handler(keys), { maxBatchSize: BATCH, cache: false });
async function dataloader(): Promise<void> {
  for (let round = 0; round < ROUNDS; round += 1) await Promise.all(inputs.map((x) => loader.load(x)));
}

async function nsPerItem(run: () => Promise<void>): Promise<number> {
  const start = process.hrtime.bigint();
  await run();
  return Number(process.hrtime.bigint() - start) / (ROUNDS * BATCH);
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
};

async function main(): Promise<void> {
  const cases = { direct, batcher: batched, dataloader } as const;
  const samples: Record<keyof typeof cases, number[]> = { direct: [], batcher: [], dataloader: [] };
  for (const run of Object.values(cases)) await run(); // warm-up: let the JIT settle before measuring
  for (let trial = 0; trial < TRIALS; trial += 1) {
    // Interleaved so that machine noise hits every case alike.
    for (const [name, run] of Object.entries(cases) as Array<[keyof typeof cases, () => Promise<void>]>) {
      samples[name].push(await nsPerItem(run));
    }
    process.stdout.write(`\rtrial ${trial + 1}/${TRIALS}`);
  }
  process.stdout.write('\n');
  const result = {
    direct_ns_per_item: Math.round(median(samples.direct)),
    batcher_ns_per_item: Math.round(median(samples.batcher)),
    dataloader_ns_per_item: Math.round(median(samples.dataloader)),
  };
  await writeFile(new URL('./results/core.json', import.meta.url), `${JSON.stringify(result, null, 2)}\n`);
  console.table({
    direct: { 'ns/item (median)': result.direct_ns_per_item },
    '@microbatch/core': { 'ns/item (median)': result.batcher_ns_per_item },
    dataloader: { 'ns/item (median)': result.dataloader_ns_per_item },
  });
  const ratio = result.batcher_ns_per_item / result.dataloader_ns_per_item;
  console.log(`batcher / dataloader = ${ratio.toFixed(2)}x (target <= 1.5x), batches of ${BATCH}, ${TRIALS} trials`);
  await batcher.close();
}

await main();
