// `pnpm bench:http`: issue 11's side-by-side run. The same Express text-completion server unbatched, batched
// work-conserving (the default) and batched with a fixed 5 ms wait, at concurrency 1, 4, 16 and 64 (interleaved
// rounds for the key points), next to the offline limit; then an open-loop overload at 10x the sustainable rate
// (capped at what this machine can send on time) with and without `maxLatencyMs`.
import { join } from 'node:path';
import { machineInfo, waitForQuiet } from './machine.js';
import type { MachineInfo } from './machine.js';
import { measurePoint } from './measure.js';
import type { Point } from './measure.js';
import { measureOffline } from './offline.js';
import { runOpenLoop } from './open-loop.js';
import type { OpenLoopResult } from './open-loop.js';
import { Progress } from './progress.js';
import { smokeCheck, startServer } from './servers.js';
import type { RunningServer } from './servers.js';
import { median, round } from './stats.js';
import { textWorkload } from './workloads.js';
import type { Workload } from './workloads.js';

const BATCH = 32;
const CONCURRENCIES = [1, 4, 16, 64];
/** Requests per second a load generator on 2 shared cores can send on time. */
const RATE_CAP = 500;
const MAX_LATENCY_MS = 1500;
/**
 * Tokens per overload request. Heavy enough that 10x the sustainable rate stays under what the load generator can
 * send on time: with the sweep's 32 tokens a quiet machine here sustains ~450 requests/s, so the 500/s cap would
 * be no overload at all; with 128 it sustains ~55/s, and 500/s is ~9x. Light enough that one batch of 32 (~0.5 s
 * here) fits `maxLatencyMs` several times over. `OVERLOAD_TOKENS` overrides it (on a much slower machine, lower it).
 */
const OVERLOAD_TOKENS = Number(process.env.OVERLOAD_TOKENS ?? 128);

export interface Variant {
  readonly name: 'unbatched' | 'work-conserving' | 'fixed 5 ms';
  readonly maxBatchSize: number;
  readonly batchWaitTimeoutMs: number;
}
const VARIANTS: readonly Variant[] = [
  { name: 'unbatched', maxBatchSize: 1, batchWaitTimeoutMs: 0 },
  { name: 'work-conserving', maxBatchSize: BATCH, batchWaitTimeoutMs: 0 },
  { name: 'fixed 5 ms', maxBatchSize: BATCH, batchWaitTimeoutMs: 5 },
];

export interface DispatchPoint extends Point {
  readonly variant: Variant['name'];
  readonly batch_wait_ms: number;
}

export interface Cell {
  readonly variant: Variant['name'];
  readonly concurrency: number;
  readonly rounds: number;
  readonly items_per_s: number;
  readonly p50_ms: number;
  readonly p99_ms: number;
  readonly mean_batch_size: number;
}

export interface OverloadRun extends OpenLoopResult {
  readonly max_latency_ms: number | null;
}

export interface Target {
  readonly name: string;
  readonly detail: string;
  readonly met: boolean;
}

export interface DispatchSummary {
  readonly started_at: string;
  readonly duration_s: number;
  readonly machine: MachineInfo;
  readonly rounds: number;
  readonly offline_items_per_s: number;
  readonly cells: readonly Cell[];
  readonly overload: {
    readonly tokens: number;
    readonly sustainable_rate: number;
    readonly offered_rate: number;
    readonly runs: readonly OverloadRun[];
  };
  readonly targets: readonly Target[];
  readonly points: readonly DispatchPoint[];
}

function overloadWorkload(): Workload<unknown, unknown> {
  const base = textWorkload as unknown as Workload<unknown, unknown>;
  return {
    ...base,
    bodies: base.bodies.map((body) => ({ ...body, max_tokens: OVERLOAD_TOKENS })),
    check: (json) =>
      typeof (json as { text?: unknown } | undefined)?.text === 'string' ? undefined : 'no completion text',
  };
}

export async function runDispatchSuite(options: {
  readonly quick: boolean;
  readonly rounds: number;
}): Promise<DispatchSummary> {
  const { quick, rounds } = options;
  const warmS = quick ? 0.5 : 1;
  const measureS = quick ? 1 : 2.5;
  const pointWeight = warmS + measureS + 0.6;
  const perServer = 3 + CONCURRENCIES.length * pointWeight;
  const overloadS = quick ? 3 : 8;
  const total =
    8 +
    VARIANTS.length * perServer +
    (rounds - 1) * VARIANTS.length * (3 + 2 * pointWeight) +
    2 * (3 + overloadS + 12) +
    8;
  const progress = new Progress(total);
  const machine = machineInfo();
  const startedAt = new Date();
  progress.log(
    `microbatch dispatch and admission benchmark: about ${Math.round(total / 60)} min on ${machine.nproc} cores (${machine.cpu_model})`,
  );

  progress.begin('offline limit, batches of 32', 8);
  await waitForQuiet(3000);
  const [offline] = await measureOffline('text', [BATCH], quick ? 1 : 3, 1, () => undefined);
  const offlineRate = offline?.items_per_s ?? Number.NaN;
  progress.end(`offline limit, batches of ${BATCH}: ${offlineRate.toFixed(0)} items/s`);

  const points: DispatchPoint[] = [];
  const measureVariant = async (variant: Variant, concurrencies: readonly number[], round: number): Promise<void> => {
    const server = await startServer({ framework: 'express', workload: 'text', ...variant });
    try {
      await smokeCheck(server, textWorkload as unknown as Workload<unknown, unknown>);
      for (const [index, concurrency] of concurrencies.entries()) {
        const name = `${variant.name.padEnd(15)} c=${String(concurrency).padEnd(2)} r${round}`;
        progress.begin(name, pointWeight);
        const point = await measurePoint(
          server,
          {
            workload: textWorkload as unknown as Workload<unknown, unknown>,
            framework: 'express',
            maxBatchSize: variant.maxBatchSize,
            concurrency,
            round,
            quietWaitMs: 1500,
            warmS: index === 0 ? warmS + 0.5 : warmS,
            measureS,
          },
          (phase, responses, elapsedS) => progress.update(`${phase} ${responses} responses ${elapsedS.toFixed(1)}s`),
        );
        points.push({ ...point, variant: variant.name, batch_wait_ms: variant.batchWaitTimeoutMs });
        progress.end(
          `${name}  ${point.items_per_s.toFixed(0).padStart(5)} items/s  p50 ${point.p50_ms.toFixed(1).padStart(6)} ms  p99 ${point.p99_ms.toFixed(1).padStart(6)} ms  batch ${point.mean_batch_size.toFixed(1).padStart(4)}  others ${point.other_cpu_pct.toFixed(0)}%`,
        );
      }
    } finally {
      await server.stop();
    }
  };
  for (const variant of VARIANTS) await measureVariant(variant, CONCURRENCIES, 1);
  // The key points again, interleaved, so that a burst of other work on the machine hits one round only.
  for (let round = 2; round <= rounds; round += 1)
    for (const variant of VARIANTS) await measureVariant(variant, [64, 1], round);

  const cells = cellsOf(points);
  const overload = await runOverload(progress, quick, overloadS);
  const summary: DispatchSummary = {
    started_at: startedAt.toISOString(),
    duration_s: Math.round(progress.elapsedS),
    machine,
    rounds,
    offline_items_per_s: round(offlineRate),
    cells,
    overload,
    targets: [],
    points,
  };
  return { ...summary, targets: targetsOf(summary) };
}

function cellsOf(points: readonly DispatchPoint[]): Cell[] {
  const cells: Cell[] = [];
  for (const variant of VARIANTS) {
    for (const concurrency of CONCURRENCIES) {
      const mine = points.filter((p) => p.variant === variant.name && p.concurrency === concurrency);
      if (mine.length === 0) continue;
      cells.push({
        variant: variant.name,
        concurrency,
        rounds: mine.length,
        items_per_s: round(median(mine.map((p) => p.items_per_s))),
        p50_ms: round(median(mine.map((p) => p.p50_ms)), 2),
        p99_ms: round(median(mine.map((p) => p.p99_ms)), 2),
        mean_batch_size: round(median(mine.map((p) => p.mean_batch_size)), 1),
      });
    }
  }
  return cells;
}

export function cellOf(cells: readonly Cell[], variant: Variant['name'], concurrency: number): Cell | undefined {
  return cells.find((cell) => cell.variant === variant && cell.concurrency === concurrency);
}

async function runOverload(
  progress: Progress,
  quick: boolean,
  overloadS: number,
): Promise<DispatchSummary['overload']> {
  const workload = overloadWorkload();
  const spec = { framework: 'express', workload: 'text', maxBatchSize: BATCH, batchWaitTimeoutMs: 0 } as const;
  // The sustainable rate of these heavier requests: closed-loop at concurrency 64, on the server without a limit.
  let server: RunningServer = await startServer(spec);
  let sustainable: number;
  const runs: OverloadRun[] = [];
  let rate: number;
  try {
    await smokeCheck(server, workload);
    progress.begin(`sustainable rate, ${OVERLOAD_TOKENS}-token completions, c=64`, quick ? 6 : 9);
    const point = await measurePoint(
      server,
      // Long enough for several full batches of these slower requests to complete inside the window.
      {
        workload,
        framework: 'express',
        maxBatchSize: BATCH,
        concurrency: 64,
        round: 1,
        quietWaitMs: 1500,
        warmS: 2,
        measureS: quick ? 3 : 6,
      },
      (phase, responses) => progress.update(`${phase} ${responses} responses`),
    );
    sustainable = point.items_per_s;
    rate = Math.min(10 * sustainable, RATE_CAP);
    progress.end(
      `sustainable: ${sustainable.toFixed(0)} req/s of ${OVERLOAD_TOKENS}-token completions; overload offered at ${rate.toFixed(0)} req/s (${(rate / sustainable).toFixed(1)}x)`,
    );
    runs.push(await overloadRun(progress, server, workload, rate, overloadS, null));
  } finally {
    await server.stop();
  }
  server = await startServer({ ...spec, maxLatencyMs: MAX_LATENCY_MS });
  try {
    await smokeCheck(server, workload);
    // Closed-loop warm-up until the latency estimate is ready (5 batches): before that only maxQueueSize applies,
    // and an overload would fill the queue with items that the estimate, once ready, must refuse late.
    progress.begin('warming the latency estimate', 3);
    let warmed = 0;
    for (; warmed < 10 && !(await server.snapshot()).estimate.ready; warmed += 1) {
      await measurePoint(
        server,
        {
          workload,
          framework: 'express',
          maxBatchSize: BATCH,
          concurrency: 32,
          round: 1,
          quietWaitMs: 0,
          warmS: 0.5,
          measureS: 1,
        },
        () => undefined,
      );
    }
    const { estimate } = await server.snapshot();
    progress.end(
      `latency estimate ${estimate.ready ? 'ready' : 'NOT ready'} after ${warmed} warm-up rounds: ` +
        `${estimate.msPerCost.toFixed(2)} ms per item + ${estimate.msPerBatch.toFixed(1)} ms per batch`,
    );
    runs.push(await overloadRun(progress, server, workload, rate, overloadS, MAX_LATENCY_MS));
  } finally {
    await server.stop();
  }
  return { tokens: OVERLOAD_TOKENS, sustainable_rate: round(sustainable), offered_rate: round(rate), runs };
}

async function overloadRun(
  progress: Progress,
  server: RunningServer,
  workload: Workload<unknown, unknown>,
  rate: number,
  seconds: number,
  maxLatencyMs: number | null,
): Promise<OverloadRun> {
  const name = `overload ${rate.toFixed(0)} req/s, ${maxLatencyMs === null ? 'no maxLatencyMs' : `maxLatencyMs ${maxLatencyMs}`}`;
  progress.begin(name, seconds + 12);
  await waitForQuiet(1500);
  const result = await runOpenLoop({
    port: server.port,
    path: workload.path,
    bodies: workload.bodies,
    rate,
    seconds,
    onTick: (sent, answered, elapsedS) =>
      progress.update(`${sent} sent, ${answered} answered, ${elapsedS.toFixed(1)}s`),
  });
  progress.end(
    `${name}: ${result.ok} accepted (p50 ${(result.accepted_p50_ms / 1000).toFixed(2)} s, p99 ${(result.accepted_p99_ms / 1000).toFixed(2)} s), ` +
      `${result.refused_total} refused (p90 ${result.refusal_p90_ms.toFixed(0)} ms, ${JSON.stringify(result.refused)}), ` +
      `${result.errors} errors, sent ${result.achieved_rate.toFixed(0)} req/s`,
  );
  return { ...result, max_latency_ms: maxLatencyMs };
}

function targetsOf(summary: DispatchSummary): Target[] {
  const { cells, offline_items_per_s: offline, overload } = summary;
  const targets: Target[] = [];
  const unbatched1 = cellOf(cells, 'unbatched', 1);
  const wc1 = cellOf(cells, 'work-conserving', 1);
  const unbatched64 = cellOf(cells, 'unbatched', 64);
  const wc64 = cellOf(cells, 'work-conserving', 64);
  if (unbatched1 !== undefined && wc1 !== undefined) {
    const ratio = wc1.items_per_s / unbatched1.items_per_s;
    targets.push({
      name: 'c=1: work-conserving ≥ 0.95x unbatched items/s',
      detail: `${wc1.items_per_s} / ${unbatched1.items_per_s} = ${ratio.toFixed(2)}x`,
      met: ratio >= 0.95,
    });
    const delta = wc1.p50_ms - unbatched1.p50_ms;
    targets.push({
      name: 'c=1: work-conserving p50 within +1.5 ms of unbatched',
      detail: `${wc1.p50_ms} vs ${unbatched1.p50_ms} ms (${delta >= 0 ? '+' : ''}${delta.toFixed(2)} ms)`,
      met: delta <= 1.5,
    });
  }
  if (unbatched64 !== undefined && wc64 !== undefined) {
    const ratio = wc64.items_per_s / unbatched64.items_per_s;
    targets.push({
      name: 'c=64: work-conserving ≥ 3x unbatched items/s',
      detail: `${wc64.items_per_s} / ${unbatched64.items_per_s} = ${ratio.toFixed(2)}x`,
      met: ratio >= 3,
    });
    const vsOffline = wc64.items_per_s / offline;
    targets.push({
      name: 'c=64: work-conserving ≥ 0.9x the offline limit',
      detail: `${wc64.items_per_s} / ${offline} = ${vsOffline.toFixed(2)}x`,
      met: vsOffline >= 0.9,
    });
  }
  const limited = overload.runs.find((run) => run.max_latency_ms !== null);
  if (limited !== undefined) {
    targets.push({
      name: `overload with maxLatencyMs ${limited.max_latency_ms}: accepted p50 ≤ 1.5 s and p99 ≤ 3 s`,
      detail: `p50 ${(limited.accepted_p50_ms / 1000).toFixed(2)} s, p99 ${(limited.accepted_p99_ms / 1000).toFixed(2)} s`,
      met: limited.accepted_p50_ms <= 1500 && limited.accepted_p99_ms <= 3000,
    });
    targets.push({
      name: 'overload: refusals answered in ≤ 250 ms (p90), each with Retry-After',
      detail: `p90 ${limited.refusal_p90_ms.toFixed(0)} ms; ${limited.refused_with_retry_after} of ${limited.refused_total} with Retry-After`,
      met:
        limited.refused_total === 0 ||
        (limited.refusal_p90_ms <= 250 && limited.refused_with_retry_after === limited.refused_total),
    });
    const share = limited.accepted_per_s / overload.sustainable_rate;
    targets.push({
      name: 'overload: accepted throughput ≥ 0.6x the sustainable rate',
      detail: `${limited.accepted_per_s.toFixed(1)} / ${overload.sustainable_rate} req/s = ${share.toFixed(2)}x`,
      met: share >= 0.6,
    });
  }
  for (const run of overload.runs) {
    const label = run.max_latency_ms === null ? 'without maxLatencyMs' : `with maxLatencyMs ${run.max_latency_ms}`;
    targets.push({
      name: `overload ${label}: every request answered exactly once`,
      detail: `${run.answered} answered of ${run.sent} sent, ${run.errors} errors, ${run.other_status} other statuses`,
      met: run.answered === run.sent && run.errors === 0 && run.other_status === 0,
    });
  }
  return targets;
}

export const DISPATCH_RESULTS = 'http-dispatch.json';
export const dispatchResultsPath = (dir: string) => join(dir, DISPATCH_RESULTS);
