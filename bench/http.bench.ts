// HTTP benchmark: does batching pay? For each workload and framework, the same model behind the same adapter with
// maxBatchSize 1 (unbatched) and 8 / 16 / 32 (batched), loaded by autocannon from this process at concurrency
// 1 / 4 / 16 / 64, next to the offline limit (the model called directly in its worker, full batches back to back).
//
//   pnpm bench:http   issue 11's dispatch and admission comparison (Express, text completion): unbatched vs
//                     work-conserving vs a fixed 5 ms wait at c=1/4/16/64, and an open-loop overload with and
//                     without maxLatencyMs; about 4 min; writes bench/results/http-dispatch.json and its section
//                     of BENCHMARKS.md (lib/dispatch-suite.ts); then the fairness scenario below
//   pnpm bench:fairness (--suite fairness) issue 11's fairness scenario alone: `microbatch serve --max-latency-ms
//                     2000` with a heavy client (6 loops of 16 prompts x 256 tokens) and a light one (1-token
//                     completions), on continuous and request scheduling; about 1.5 min; writes
//                     bench/results/http-fairness.json and its section of BENCHMARKS.md (lib/fairness.ts)
//   pnpm bench        every workload × framework, under 10 min; also rewrites BENCHMARKS.md's results section
//
// Writes bench/results/http.json and the charts; options: --suite http|full|fairness, --quick (short points, for
// trying the harness; writes to bench/results/quick/ and leaves BENCHMARKS.md alone), --dry-run (prints the plan),
// --report (measures nothing: redraws the charts and BENCHMARKS.md's results section from bench/results/http.json).
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ensureWorkerBuilt } from '../packages/inference/test/helpers/worker-build.js';
import { renderChart } from './lib/chart.js';
import { printDispatch, updateDispatchSection } from './lib/dispatch-report.js';
import { dispatchResultsPath, runDispatchSuite } from './lib/dispatch-suite.js';
import { fairnessSeconds, runFairness } from './lib/fairness.js';
import { fairnessResultsPath, printFairness, updateFairnessSection } from './lib/fairness-report.js';
import { machineInfo, waitForQuiet } from './lib/machine.js';
import { measurePoint } from './lib/measure.js';
import type { Point } from './lib/measure.js';
import { measureOffline } from './lib/offline.js';
import type { OfflineResult } from './lib/offline.js';
import { BENCHMARKS_MD, RESULTS_DIR } from './lib/paths.js';
import { Progress } from './lib/progress.js';
import { QUIET_PCT, summarize, updateBenchmarksMd } from './lib/report.js';
import type { RunConditions, Summary } from './lib/report.js';
import { smokeCheck, startServer } from './lib/servers.js';
import type { Framework } from './lib/servers.js';
import { workloadOf } from './lib/workloads.js';
import type { WorkloadName } from './lib/workloads.js';
import { setupModels } from './setup-models.js';

const { values: args } = parseArgs({
  options: {
    suite: { type: 'string', default: 'full' },
    quick: { type: 'boolean', default: false },
    'dry-run': { type: 'boolean', default: false },
    report: { type: 'boolean', default: false },
  },
});
function parseSuite(value: string): 'full' | 'http' | 'fairness' {
  if (value !== 'full' && value !== 'http' && value !== 'fairness')
    throw new Error(`--suite must be "full", "http" or "fairness", got "${value}"`);
  return value;
}
const suite = parseSuite(args.suite);
const quick = args.quick;

/** The configuration the targets are about. */
const MAIN = { workload: 'text', framework: 'express', concurrency: 64, maxBatchSize: 32 } as const;
const CONCURRENCIES = [1, 4, 16, 64];
/** 1 is the unbatched server. */
const MAX_BATCH_SIZES = [1, 8, 16, 32];
/** The full sweep's batchers use the default dispatch policy: work-conserving. */
const BATCH_WAIT_MS = 0;
/** The main configuration's key points are measured this many times (interleaved); the JSON reports medians. */
const ROUNDS = quick ? 2 : suite === 'http' ? 3 : 4;

/**
 * Seconds of warm-up and of measurement per point: longer for the main configuration, whose figures matter most.
 * A server's first point warms up longer (JIT, first batches of each shape); later points only need the queue
 * to settle at the new concurrency.
 */
const timing = (main: boolean, first: boolean) => {
  const measureS = quick ? 1 : main ? 2.5 : 2;
  const warmS = quick ? 0.5 : first ? 1.5 : main ? 0.75 : 0.5;
  return { warmS, measureS };
};
const OFFLINE_SECONDS = quick ? 1 : 3;
/** Planned seconds per process start (tsx + model load), for the ETA only. */
const START_S = 2.5;

/** The run must end by then (the suites' time limits, less a margin for writing the results). */
const DEADLINE_S = quick ? (suite === 'http' ? 90 : 360) : suite === 'http' ? 170 : 570;
/** Seconds of the plan that are not spoken for: what waiting for a quiet machine and repeating noisy points may use. */
const slackS = (progress: Progress) => DEADLINE_S - progress.elapsedS - progress.remainingS;

/**
 * Other engineers' builds and tests share these 2 cores. Before each point the driver waits for a quiet machine:
 * up to 4 s for the main configuration and 1.5 s otherwise, and only while the plan has slack left.
 */
function quietWaitMs(progress: Progress, main: boolean): number {
  return Math.max(0, Math.min(main ? 4_000 : 1_500, (slackS(progress) - 10) * 1000));
}

/**
 * A key point of the main configuration (one that a target reads) measured while other processes used more than
 * QUIET_PCT of one core is measured once more, while the plan has slack; the noisy measurement is kept in the JSON
 * but used in no figure.
 */
const isKey = (workload: WorkloadName, framework: Framework, maxBatchSize: number, concurrency: number) =>
  workload === MAIN.workload &&
  framework === MAIN.framework &&
  (maxBatchSize === 1 || maxBatchSize === MAIN.maxBatchSize) &&
  (concurrency === 1 || concurrency === MAIN.concurrency);

interface ServerTask {
  readonly kind: 'server';
  readonly workload: WorkloadName;
  readonly framework: Framework;
  readonly maxBatchSize: number;
  readonly concurrencies: readonly number[];
  readonly round: number;
}
interface OfflineTask {
  readonly kind: 'offline';
  readonly workload: WorkloadName;
  readonly batchSizes: readonly number[];
  readonly round: number;
}
type Task = ServerTask | OfflineTask;

const isMain = (workload: WorkloadName, framework: Framework) =>
  workload === MAIN.workload && framework === MAIN.framework;

function sweep(workload: WorkloadName, framework: Framework): ServerTask[] {
  return MAX_BATCH_SIZES.map((maxBatchSize) => ({
    kind: 'server',
    workload,
    framework,
    maxBatchSize,
    concurrencies: CONCURRENCIES,
    round: 1,
  }));
}

/** One more interleaved measurement of the main configuration's key figures. */
function repeat(round: number): Task[] {
  const { workload, framework } = MAIN;
  const concurrencies = [MAIN.concurrency, 1];
  return [
    { kind: 'offline', workload, batchSizes: [MAIN.maxBatchSize], round },
    { kind: 'server', workload, framework, maxBatchSize: 1, concurrencies, round },
    { kind: 'server', workload, framework, maxBatchSize: MAIN.maxBatchSize, concurrencies, round },
  ];
}

function plan(): Task[] {
  const offline = (workload: WorkloadName): OfflineTask => ({
    kind: 'offline',
    workload,
    batchSizes: MAX_BATCH_SIZES,
    round: 1,
  });
  const tasks: Task[] = [offline('text'), ...sweep('text', 'express')];
  if (suite === 'http') {
    for (let round = 2; round <= ROUNDS; round += 1) tasks.push(...repeat(round));
    return tasks;
  }
  // Repeats spread over the run, so that one burst of other work on the machine hits as few of them as possible.
  const between: Task[][] = [
    [...sweep('text', 'koa'), ...sweep('text', 'nest')],
    [offline('embed'), ...sweep('embed', 'express'), ...sweep('embed', 'koa')],
    sweep('embed', 'nest'),
  ];
  for (let round = 2; round <= ROUNDS; round += 1) tasks.push(...repeat(round), ...(between[round - 2] ?? []));
  for (const rest of between.slice(Math.max(0, ROUNDS - 1))) tasks.push(...rest);
  return tasks;
}

function weightOf(task: Task): number {
  if (task.kind === 'offline') return START_S + task.batchSizes.length * (OFFLINE_SECONDS + 0.5);
  const main = isMain(task.workload, task.framework);
  return (
    START_S +
    task.concurrencies.reduce((sum, _c, index) => {
      const { warmS, measureS } = timing(main, index === 0);
      return sum + warmS + measureS + 0.6;
    }, 0)
  );
}

const label = (workload: WorkloadName, framework: Framework, maxBatchSize: number, concurrency: number) =>
  `${framework.padEnd(7)} ${workload.padEnd(5)} ${maxBatchSize === 1 ? 'unbatched ' : `batched≤${String(maxBatchSize).padEnd(2)}`} c=${String(concurrency).padEnd(2)}`;

async function runServerTask(task: ServerTask, progress: Progress, points: Point[], discarded: Point[]): Promise<void> {
  const workload = workloadOf(task.workload);
  const main = isMain(task.workload, task.framework);
  const server = await startServer({
    framework: task.framework,
    workload: task.workload,
    maxBatchSize: task.maxBatchSize,
    batchWaitTimeoutMs: BATCH_WAIT_MS,
  });
  try {
    await smokeCheck(server, workload);
    for (const [index, concurrency] of task.concurrencies.entries()) {
      const name = `${label(task.workload, task.framework, task.maxBatchSize, concurrency)}${task.round > 1 ? ` r${task.round}` : '   '}`;
      const { warmS, measureS } = timing(main, index === 0);
      const weight = warmS + measureS + 0.6;
      const measure = async (attempt: string): Promise<Point> => {
        progress.begin(`${name}${attempt}`, weight);
        const point = await measurePoint(
          server,
          {
            workload,
            framework: task.framework,
            maxBatchSize: task.maxBatchSize,
            concurrency,
            round: task.round,
            quietWaitMs: quietWaitMs(progress, main),
            warmS,
            measureS,
          },
          (phase, responses, elapsedS) =>
            progress.update(
              elapsedS === 0
                ? phase
                : `${phase} ${elapsedS.toFixed(1)}s, ${Math.round(responses / Math.max(elapsedS, 0.1))} req/s`,
            ),
        );
        const warn = point.non_2xx + point.errors > 0 ? `  !! ${point.non_2xx} non-2xx, ${point.errors} errors` : '';
        progress.end(
          `${name}  ${point.items_per_s.toFixed(0).padStart(5)} items/s  p50 ${point.p50_ms.toFixed(1).padStart(6)} ms  p99 ${point.p99_ms.toFixed(1).padStart(6)} ms  batch ${point.mean_batch_size.toFixed(1).padStart(4)}  worker ${point.worker_busy_pct.toFixed(0)}%  others ${point.other_cpu_pct.toFixed(0)}%${attempt}${warn}`,
        );
        return point;
      };
      let point = await measure('');
      const key = isKey(task.workload, task.framework, task.maxBatchSize, concurrency);
      if (key && point.other_cpu_pct > QUIET_PCT && slackS(progress) > weight + 15) {
        discarded.push(point);
        progress.extend(weight);
        point = await measure(' (again: others were busy)');
      }
      points.push(point);
    }
  } finally {
    await server.stop();
  }
}

async function runOfflineTask(
  task: OfflineTask,
  progress: Progress,
  offline: OfflineResult[],
  discarded: OfflineResult[],
): Promise<void> {
  const main = task.workload === MAIN.workload;
  const run = async (batchSizes: readonly number[], attempt: string): Promise<OfflineResult[]> => {
    const name = `offline ${task.workload.padEnd(5)} ${task.round > 1 ? `r${task.round} ` : '   '}`;
    progress.begin(`${name}batches of ${batchSizes.join('/')}${attempt}`, weightOf({ ...task, batchSizes }));
    progress.update('waiting for a quiet machine');
    await waitForQuiet(quietWaitMs(progress, main));
    const results = await measureOffline(task.workload, batchSizes, OFFLINE_SECONDS, task.round, (finished) =>
      progress.update(`${finished}/${batchSizes.length} batch sizes`),
    );
    progress.end(
      `${name}${results.map((r) => `b${r.batch_size}: ${r.items_per_s.toFixed(0)} items/s (others ${r.other_cpu_pct.toFixed(0)}%)`).join('  ')}${attempt}`,
    );
    return results;
  };
  const results = await run(task.batchSizes, '');
  // The main configuration's limit is measured again when other work was busy, like its server points.
  const limit = results.find((result) => result.batch_size === MAIN.maxBatchSize);
  const weight = weightOf({ ...task, batchSizes: [MAIN.maxBatchSize] });
  if (main && limit !== undefined && limit.other_cpu_pct > QUIET_PCT && slackS(progress) > weight + 15) {
    discarded.push(limit);
    progress.extend(weight);
    results.splice(results.indexOf(limit), 1, ...(await run([MAIN.maxBatchSize], ' (again: others were busy)')));
  }
  offline.push(...results);
}

async function main(): Promise<void> {
  if (args.report) {
    const summary = JSON.parse(await readFile(join(RESULTS_DIR, 'http.json'), 'utf8')) as Summary;
    const written = await writeReport(summary, RESULTS_DIR, summary.conditions.suite === 'full');
    console.log(
      `redrew ${written.join(', ')} from ${join(RESULTS_DIR, 'http.json')} (${summary.conditions.suite} run of ${summary.conditions.started_at})`,
    );
    return;
  }
  if (args['dry-run']) {
    for (const task of plan()) console.log(`${weightOf(task).toFixed(1).padStart(5)} s  ${JSON.stringify(task)}`);
    const planned = plan().reduce((sum, task) => sum + weightOf(task), 0);
    console.log(
      `planned: ${Math.round(planned)} s; up to ${Math.round(DEADLINE_S - planned)} s more for waiting for a quiet machine and repeating noisy key points`,
    );
    return;
  }
  const outDir = quick ? join(RESULTS_DIR, 'quick') : RESULTS_DIR;
  await mkdir(outDir, { recursive: true });
  // Servers run the package sources, but the inference worker always runs from dist/: rebuild it if stale.
  await ensureWorkerBuilt();
  await setupModels();
  if (suite === 'http') {
    const summary = await runDispatchSuite({ quick, rounds: ROUNDS });
    await writeFile(dispatchResultsPath(outDir), `${JSON.stringify(summary, null, 2)}\n`);
    if (!quick) await updateDispatchSection(BENCHMARKS_MD, summary);
    const fairness = await measureFairness(outDir);
    printDispatch(summary, (line) => console.log(line));
    printFairness(fairness, (line) => console.log(line));
    console.log(
      `wrote ${dispatchResultsPath(outDir)}, ${fairnessResultsPath(outDir)}${quick ? '' : ' and their sections of BENCHMARKS.md'}`,
    );
    return;
  }
  if (suite === 'fairness') {
    const fairness = await measureFairness(outDir);
    printFairness(fairness, (line) => console.log(line));
    console.log(`wrote ${fairnessResultsPath(outDir)}${quick ? '' : ' and the fairness section of BENCHMARKS.md'}`);
    return;
  }
  const tasks = plan();
  const progress = new Progress(tasks.reduce((sum, task) => sum + weightOf(task), 0));
  const machine = machineInfo();
  const startedAt = new Date();
  progress.log(
    `microbatch HTTP benchmark, suite "${suite}"${quick ? ' (quick)' : ''}: ${tasks.length} steps, about ${Math.round(
      tasks.reduce((sum, task) => sum + weightOf(task), 0) / 60,
    )} min on ${machine.nproc} cores (${machine.cpu_model})`,
  );
  const points: Point[] = [];
  const discarded: Point[] = [];
  const discardedOffline: OfflineResult[] = [];
  const offline: OfflineResult[] = [];
  for (const task of tasks) {
    if (task.kind === 'offline') await runOfflineTask(task, progress, offline, discardedOffline);
    else await runServerTask(task, progress, points, discarded);
  }
  const conditions: RunConditions = {
    suite,
    quick,
    started_at: startedAt.toISOString(),
    duration_s: Math.round(progress.elapsedS),
    machine,
    batch_wait_timeout_ms: BATCH_WAIT_MS,
    pool: { size: 1, threads: 1 },
    timing: {
      main: timing(true, false),
      other: timing(false, false),
      first_point_of_a_server: timing(false, true),
      offline_seconds_per_batch_size: OFFLINE_SECONDS,
    },
    rounds: ROUNDS,
    quiet_wait: { below_machine_cpu_pct_of_one_core: 30, main_max_s: 4, other_max_s: 1.5 },
    noisy_above_other_cpu_pct: QUIET_PCT,
    deadline_s: DEADLINE_S,
    discarded_noisy_points: discarded,
    discarded_noisy_offline: discardedOffline,
  };
  const summary = summarize({ main: MAIN, points, offline, conditions });
  await writeFile(join(outDir, 'http.json'), `${JSON.stringify(summary, null, 2)}\n`);
  const written = await writeReport(summary, outDir, suite === 'full' && !quick);
  progress.log(`\nwrote ${join(outDir, 'http.json')}, ${written.join(', ')} in ${Math.round(progress.elapsedS)} s`);
  for (const target of summary.targets)
    progress.log(`${target.met ? 'met   ' : 'MISSED'}  ${target.name}: ${target.detail}`);
}

/** Issue 11's fairness scenario (lib/fairness.ts): its JSON, and its BENCHMARKS.md section unless quick. */
async function measureFairness(outDir: string) {
  const progress = new Progress(fairnessSeconds(quick));
  progress.log(`fairness scenario: about ${Math.round(fairnessSeconds(quick))} s`);
  const fairness = await runFairness({ quick, progress });
  await writeFile(fairnessResultsPath(outDir), `${JSON.stringify(fairness, null, 2)}\n`);
  if (!quick) await updateFairnessSection(BENCHMARKS_MD, fairness);
  return fairness;
}

/** The charts, and the results section of BENCHMARKS.md (from a full run only). */
async function writeReport(summary: Summary, outDir: string, markdown: boolean): Promise<string[]> {
  const written: string[] = [];
  for (const workload of new Set(summary.sweep.map((point) => point.workload))) {
    const file = workload === summary.workload ? 'http.svg' : `http-${workload}.svg`;
    await writeFile(join(outDir, file), renderChart(summary, workload, summary.framework));
    written.push(file);
  }
  if (markdown) {
    await updateBenchmarksMd(BENCHMARKS_MD, summary);
    written.push('BENCHMARKS.md');
  }
  return written;
}
await main();
