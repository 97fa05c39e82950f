// `pnpm bench:batch`: the Batch API on spare capacity, against one real `microbatch serve --data-dir` (the bundled
// model, default flags). Four phases, in one run on one server:
//   1. interactive throughput: the batch's lines sent as interactive `/v1/completions` requests at full concurrency
//      (BENCH_CONCURRENCY, 64), lines/s;
//   2. batch throughput: the same lines as a batch on the idle server, lines/s from `in_progress` to `completed`
//      (target: >= 0.8x phase 1);
//   3. interactive latency alone: open-loop completions at a steady moderate rate (BENCH_RATE, default 30% of
//      phase 1's rate), p50 / p99;
//   4. the same load while a batch of the same lines runs (target: p99 <= 1.2x phase 3's); the batch is cancelled
//      after its window.
// Phases 3 and 4 alternate in BENCH_ROUNDS rounds (default 3) of BENCH_SECONDS / rounds each, a new batch in each
// round of phase 4, and each phase's percentiles pool its rounds: a shared machine's load drifts over a run, and
// alternating puts both phases under the same drift.
// Where the time goes, from the server's /metrics around phases 2 to 4: the decode loop's rows per step (batch rows
// shared with interactive ones) and the batch lines preempted for interactive requests (cancelled items: the bench's
// interactive clients never cancel), the work thrown away to keep interactive latency level.
// Figures are printed and written to bench/results/batch.json. The machine is shared: each figure is one run.
// BENCH_BIN runs another build's CLI (e.g. the main checkout's) to compare two builds under the same load.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import { machineInfo } from './lib/machine.js';
import { type OpenLoopResult, runOpenLoop } from './lib/open-loop.js';
import { percentile, round } from './lib/stats.js';

const BIN = process.env.BENCH_BIN ?? fileURLToPath(new URL('../packages/cli/bin/microbatch.js', import.meta.url));
const MODEL = fileURLToPath(new URL('../models/tinystories-656k', import.meta.url));
const OUT = fileURLToPath(new URL('./results/batch.json', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const LINES = Number(process.env.BENCH_LINES ?? 5000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
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

/** The server's counters that say where the time goes: decode steps and their rows, batch items cancelled. */
interface Counters {
  readonly steps: number;
  readonly rows: number;
  readonly cancelled: number;
}

/** Sums every sample of `name` (any labels) whose labels include `match`. */
function sample(text: string, name: string, match = ''): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || !line.includes(match)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== ' ' && rest[0] !== '{') continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1)) || 0;
  }
  return sum;
}

async function counters(url: string): Promise<Counters> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return {
    steps: sample(text, 'microbatch_decode_rows_count'),
    rows: sample(text, 'microbatch_decode_rows_sum'),
    cancelled: sample(text, 'microbatch_rejections_total', 'reason="cancelled"'),
  };
}

/** What happened between two snapshots: steps, mean rows per step, items cancelled (batch lines preempted). */
function between(before: Counters, after: Counters) {
  const steps = after.steps - before.steps;
  return {
    decode_steps: steps,
    rows_per_step: steps === 0 ? 0 : round((after.rows - before.rows) / steps, 2),
    preempted_lines: after.cancelled - before.cancelled,
  };
}

/** Two windows' work as one: steps and preemptions summed, rows per step weighted by steps. */
function add(a: ReturnType<typeof between>, b: ReturnType<typeof between>): ReturnType<typeof between> {
  const steps = a.decode_steps + b.decode_steps;
  return {
    decode_steps: steps,
    rows_per_step:
      steps === 0 ? 0 : round((a.rows_per_step * a.decode_steps + b.rows_per_step * b.decode_steps) / steps, 2),
    preempted_lines: a.preempted_lines + b.preempted_lines,
  };
}

/** One phase's rounds pooled: percentiles over every accepted latency, and what was not accepted. */
function summary(sorted: readonly number[], runs: readonly OpenLoopResult[]) {
  return {
    p50_ms: round(percentile(sorted, 50)),
    p90_ms: round(percentile(sorted, 90)),
    p99_ms: round(percentile(sorted, 99)),
    ok: sorted.length,
    refused: runs.reduce((sum, run) => sum + run.refused_total, 0),
    errors: runs.reduce((sum, run) => sum + run.errors + run.other_status, 0),
  };
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
    const beforeBatch = await counters(url);
    const batch = await batchThroughput(url);
    const batchWork = between(beforeBatch, await counters(url));
    console.log(
      `  2. batch on the idle server: ${round(batch.perS)} lines/s (${round(batch.perS / interactive, 2)}x); ` +
        `${batchWork.rows_per_step} rows/step, ${batchWork.preempted_lines} lines preempted`,
    );
    const rate = Number(process.env.BENCH_RATE ?? Math.max(1, Math.round(interactive * 0.3)));
    const bodies = Array.from({ length: 64 }, (_, index) => body(100_000 + index));
    const window = SECONDS / ROUNDS;
    const aloneMs: number[] = [];
    const besideMs: number[] = [];
    const aloneRuns: OpenLoopResult[] = [];
    const besideRuns: OpenLoopResult[] = [];
    const none = { decode_steps: 0, rows_per_step: 0, preempted_lines: 0 };
    let aloneWork = none;
    let besideWork = none;
    let batchLinesDuring = 0;
    let endedEarly = 0;
    for (let index = 0; index < ROUNDS; index += 1) {
      const beforeAlone = await counters(url);
      aloneRuns.push(
        await runOpenLoop({ port, path: '/v1/completions', bodies, rate, seconds: window, latencies: aloneMs }),
      );
      aloneWork = add(aloneWork, between(beforeAlone, await counters(url)));
      const running = await submitBatch(url);
      await pollBatch(url, running, (b) => b.status === 'in_progress');
      const before = (await json(`${url}/v1/batches/${running}`)).request_counts.completed as number;
      const beforeBeside = await counters(url);
      besideRuns.push(
        await runOpenLoop({ port, path: '/v1/completions', bodies, rate, seconds: window, latencies: besideMs }),
      );
      besideWork = add(besideWork, between(beforeBeside, await counters(url)));
      const during = await json(`${url}/v1/batches/${running}`);
      batchLinesDuring += (during.request_counts.completed as number) - before;
      if (during.status === 'in_progress') await json(`${url}/v1/batches/${running}/cancel`, { method: 'POST' });
      else endedEarly += 1;
      // The next round's alone window starts once the batch's running lines have finished.
      await pollBatch(url, running, (b) => ['completed', 'failed', 'cancelled', 'expired'].includes(b.status));
    }
    aloneMs.sort((a, b) => a - b);
    besideMs.sort((a, b) => a - b);
    const alone = summary(aloneMs, aloneRuns);
    const beside = summary(besideMs, besideRuns);
    console.log(
      `  3. interactive alone at ${rate}/s, ${ROUNDS} x ${round(window)} s: p50 ${alone.p50_ms} ms, p90 ${alone.p90_ms} ms, ` +
        `p99 ${alone.p99_ms} ms; ${aloneWork.rows_per_step} rows/step`,
    );
    const p99Ratio = beside.p99_ms / alone.p99_ms;
    console.log(
      `  4. interactive beside a batch, ${ROUNDS} x ${round(window)} s: p50 ${beside.p50_ms} ms, p90 ${beside.p90_ms} ms, ` +
        `p99 ${beside.p99_ms} ms (p99 ${round(p99Ratio, 2)}x alone); the batches ran ${batchLinesDuring} lines ` +
        `in the windows` +
        (endedEarly === 0 ? '' : ` (${endedEarly} ENDED before its window did)`) +
        `; ${besideWork.rows_per_step} rows/step, ${besideWork.preempted_lines} lines preempted`,
    );
    const result = {
      machine: machineInfo(),
      lines: LINES,
      max_tokens: MAX_TOKENS,
      window_s: SECONDS,
      rounds: ROUNDS,
      interactive_lines_per_s: round(interactive),
      batch_lines_per_s: round(batch.perS),
      batch_vs_interactive: round(batch.perS / interactive, 2),
      batch_counts: { completed: batch.completed, failed: batch.failed },
      batch_work: batchWork,
      rate,
      alone: { ...alone, ...aloneWork },
      beside_batch: {
        ...beside,
        batch_lines_in_windows: batchLinesDuring,
        batches_ended_early: endedEarly,
        ...besideWork,
      },
      p90_ratio: round(beside.p90_ms / alone.p90_ms, 2),
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
