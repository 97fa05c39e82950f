// `pnpm bench:batch`: the Batch API on spare capacity, against one real `microbatch serve --data-dir` (the bundled
// model, default flags). Four phases, in one run on one server:
//   1. interactive throughput: the batch's lines sent as interactive `/v1/completions` requests at full concurrency
//      (BENCH_CONCURRENCY, 64), lines/s;
//   2. batch throughput: the same lines as a batch on the idle server, lines/s from `in_progress` to `completed`
//      (target: >= 0.8x phase 1);
//   3. interactive latency alone: open-loop completions at a steady moderate rate (BENCH_RATE, default 30% of
//      phase 1's rate), p50 / p99;
//   4. the same load while a batch of the same lines runs (target: p99 <= 1.2x phase 3's); the batch is cancelled
//      after the window.
// Figures are printed and written to bench/results/batch.json. The machine is shared: each figure is one run.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import { machineInfo } from './lib/machine.js';
import { runOpenLoop } from './lib/open-loop.js';
import { round } from './lib/stats.js';

const BIN = fileURLToPath(new URL('../packages/cli/bin/microbatch.js', import.meta.url));
const MODEL = fileURLToPath(new URL('../models/tinystories-656k', import.meta.url));
const OUT = fileURLToPath(new URL('./results/batch.json', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const LINES = Number(process.env.BENCH_LINES ?? 5000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const MAX_TOKENS = 16;

const body = (index: number) => ({
  prompt: `Story ${index}: once upon a time`,
  max_tokens: MAX_TOKENS,
  temperature: 0,
});

async function json(url: string, init?: RequestInit): Promise<any> {
  const response = await fetch(url, init);
  if (!response.ok) throw new Error(`${init?.method ?? 'GET'} ${url}: ${response.status} ${await response.text()}`);
  return response.json();
}

/** Phase 1: every line as an interactive request, CONCURRENCY at a time; lines/s. */
async function interactiveThroughput(url: string, lines: number): Promise<number> {
  let next = 0;
  let failed = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < lines) {
        const index = next++;
        const response = await fetch(`${url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body(index)),
        });
        await response.arrayBuffer();
        if (!response.ok) failed += 1;
      }
    }),
  );
  if (failed > 0) console.log(`  (${failed} interactive requests were not 200)`);
  return lines / ((performance.now() - started) / 1000);
}

async function submitBatch(url: string): Promise<string> {
  const text = Array.from({ length: LINES }, (_, index) =>
    JSON.stringify({ custom_id: `l-${index}`, method: 'POST', url: '/v1/completions', body: body(index) }),
  ).join('\n');
  const form = new FormData();
  form.append('purpose', 'batch');
  form.append('file', new Blob([text]), 'bench.jsonl');
  const file = await json(`${url}/v1/files`, { method: 'POST', body: form });
  const batch = await json(`${url}/v1/batches`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input_file_id: file.id, endpoint: '/v1/completions', completion_window: '24h' }),
  });
  return batch.id as string;
}

async function pollBatch(url: string, id: string, until: (batch: any) => boolean): Promise<any> {
  for (;;) {
    const batch = await json(`${url}/v1/batches/${id}`);
    if (until(batch)) return batch;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Phase 2: the lines as one batch on the idle server; lines/s from in_progress to completed (50 ms polls). */
async function batchThroughput(url: string): Promise<{ perS: number; completed: number; failed: number }> {
  const id = await submitBatch(url);
  await pollBatch(url, id, (b) => b.status !== 'validating');
  const started = performance.now();
  const done = await pollBatch(url, id, (b) => ['completed', 'failed', 'cancelled', 'expired'].includes(b.status));
  const seconds = (performance.now() - started) / 1000;
  return { perS: LINES / seconds, completed: done.request_counts.completed, failed: done.request_counts.failed };
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'microbatch-bench-batch-'));
  let server: ServerProcess | undefined;
  try {
    server = await startServerProcess({
      args: [
        BIN,
        'serve',
        '--model',
        MODEL,
        '--port',
        '0',
        '--log-format',
        'json',
        '--data-dir',
        dir,
        ...(process.env.BENCH_BATCH_IN_FLIGHT === undefined
          ? []
          : ['--batch-max-in-flight', process.env.BENCH_BATCH_IN_FLIGHT]),
      ],
      env: { ...process.env },
      ready: READY,
    });
    const { url } = server;
    const port = Number(new URL(url).port);
    console.log(`batch bench: ${LINES} lines of ${MAX_TOKENS} tokens, ${SECONDS} s windows (shared machine: one run)`);
    // Warm-up: the workers' first requests (JIT, allocations) are not part of any phase.
    await interactiveThroughput(url, Math.min(LINES, 500));
    const interactive = await interactiveThroughput(url, LINES);
    console.log(`  1. interactive, ${CONCURRENCY} concurrent: ${round(interactive)} lines/s`);
    const batch = await batchThroughput(url);
    console.log(`  2. batch on the idle server: ${round(batch.perS)} lines/s (${round(batch.perS / interactive, 2)}x)`);
    const rate = Number(process.env.BENCH_RATE ?? Math.max(1, Math.round(interactive * 0.3)));
    const bodies = Array.from({ length: 64 }, (_, index) => body(100_000 + index));
    const alone = await runOpenLoop({ port, path: '/v1/completions', bodies, rate, seconds: SECONDS });
    console.log(
      `  3. interactive alone at ${rate}/s: p50 ${round(alone.accepted_p50_ms)} ms, p99 ${round(alone.accepted_p99_ms)} ms`,
    );
    const running = await submitBatch(url);
    await pollBatch(url, running, (b) => b.status === 'in_progress');
    const before = (await json(`${url}/v1/batches/${running}`)).request_counts.completed as number;
    const beside = await runOpenLoop({ port, path: '/v1/completions', bodies, rate, seconds: SECONDS });
    const during = await json(`${url}/v1/batches/${running}`);
    const batchLinesDuring = (during.request_counts.completed as number) - before;
    const stillRunning = during.status === 'in_progress';
    if (stillRunning) await json(`${url}/v1/batches/${running}/cancel`, { method: 'POST' });
    const p99Ratio = beside.accepted_p99_ms / alone.accepted_p99_ms;
    console.log(
      `  4. interactive beside the batch: p50 ${round(beside.accepted_p50_ms)} ms, p99 ${round(beside.accepted_p99_ms)} ms ` +
        `(p99 ${round(p99Ratio, 2)}x alone); the batch ran ${batchLinesDuring} lines in the window` +
        (stillRunning ? '' : ' and ENDED before the window did'),
    );
    const result = {
      machine: machineInfo(),
      lines: LINES,
      max_tokens: MAX_TOKENS,
      window_s: SECONDS,
      interactive_lines_per_s: round(interactive),
      batch_lines_per_s: round(batch.perS),
      batch_vs_interactive: round(batch.perS / interactive, 2),
      batch_counts: { completed: batch.completed, failed: batch.failed },
      rate,
      alone: {
        p50_ms: round(alone.accepted_p50_ms),
        p99_ms: round(alone.accepted_p99_ms),
        ok: alone.ok,
        refused: alone.refused_total,
      },
      beside_batch: {
        p50_ms: round(beside.accepted_p50_ms),
        p99_ms: round(beside.accepted_p99_ms),
        ok: beside.ok,
        refused: beside.refused_total,
        batch_lines_in_window: batchLinesDuring,
        batch_still_running: stillRunning,
      },
      p99_ratio: round(p99Ratio, 2),
      targets: { p99_ratio_max: 1.2, throughput_ratio_min: 0.8 },
    };
    await writeFile(OUT, `${JSON.stringify(result, null, 2)}\n`);
    console.log(`written to ${OUT}`);
  } finally {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
