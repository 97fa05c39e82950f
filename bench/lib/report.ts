// Turns the measured points into the results JSON (main-configuration figures, targets, full sweep) and into the
// generated section of BENCHMARKS.md. Every repeated point is reported as its median over rounds.
import { readFile, writeFile } from 'node:fs/promises';
import type { MachineInfo } from './machine.js';
import type { Point } from './measure.js';
import type { OfflineResult } from './offline.js';
import type { Framework } from './servers.js';
import { median, round } from './stats.js';
import { workloadOf } from './workloads.js';
import type { WorkloadName } from './workloads.js';

export interface MainConfiguration {
  readonly workload: WorkloadName;
  readonly framework: Framework;
  readonly concurrency: number;
  readonly maxBatchSize: number;
}

export interface RunConditions {
  readonly suite: 'full' | 'http';
  readonly quick: boolean;
  readonly started_at: string;
  readonly duration_s: number;
  readonly machine: MachineInfo;
  readonly batch_wait_timeout_ms: number;
  readonly pool: { readonly size: number; readonly threads: number };
  readonly timing: Record<string, unknown>;
  readonly rounds: number;
  readonly quiet_wait: Record<string, number>;
  readonly noisy_above_other_cpu_pct: number;
  readonly deadline_s: number;
  /** Main-configuration points measured again because other work was busy; not used in any figure. */
  readonly discarded_noisy_points: readonly Point[];
  readonly discarded_noisy_offline: readonly OfflineResult[];
}

export interface Target {
  readonly name: string;
  readonly met: boolean;
  readonly detail: string;
}

/** The main configuration's figures in one round (the sweep is round 1). */
export interface RoundFigures {
  readonly round: number;
  readonly offline_items_per_s: number;
  readonly unbatched_items_per_s: number;
  readonly batched_items_per_s: number;
  readonly unbatched_p99_ms: number;
  readonly batched_p99_ms: number;
  readonly unbatched_p50_ms_c1: number;
  readonly batched_p50_ms_c1: number;
  /** The most CPU other processes used during one of the round's five measurements, in % of one core. */
  readonly max_other_cpu_pct: number;
}

export interface Summary {
  readonly offline_items_per_s: number;
  readonly unbatched_items_per_s: number;
  readonly batched_items_per_s: number;
  readonly batched_p99_ms: number;
  readonly unbatched_p99_ms: number;
  readonly concurrency: number;
  readonly max_batch_size: number;
  readonly workload: WorkloadName;
  readonly framework: Framework;
  readonly batch_wait_timeout_ms: number;
  /** The concurrency-1 latency check. */
  readonly concurrency_1: { readonly unbatched_p50_ms: number; readonly batched_p50_ms: number };
  readonly batched_vs_unbatched: number;
  readonly batched_vs_offline: number;
  readonly targets: readonly Target[];
  readonly figures_basis: string;
  readonly figure_measurements: readonly { figure: string; used: number; measured: number; noisy: boolean }[];
  readonly rounds: readonly RoundFigures[];
  readonly conditions: RunConditions;
  /** Offline limit per workload and batch size, every round. */
  readonly offline: readonly OfflineResult[];
  /** Every measured point, every round. */
  readonly sweep: readonly Point[];
}

/**
 * A measurement taken while other processes used more than this share of one core does not describe the 2-core
 * machine the targets are about (it ran on what the neighbours left). Figures are medians over the measurements
 * below it, or over all of them (marked noisy) when there is none.
 */
export const QUIET_PCT = 50;

function quietOrAll<T extends { readonly other_cpu_pct: number }>(
  list: readonly T[],
): { readonly used: readonly T[]; readonly noisy: boolean } {
  const quiet = list.filter((item) => item.other_cpu_pct <= QUIET_PCT);
  return quiet.length > 0 ? { used: quiet, noisy: false } : { used: list, noisy: true };
}

export interface Cell {
  readonly items_per_s: number;
  readonly p50_ms: number;
  readonly p99_ms: number;
  readonly mean_batch_size: number;
  /** Measurements the medians are over, and how many there were in all. */
  readonly used: number;
  readonly measured: number;
  /** True when every measurement of the point was taken on a busy machine. */
  readonly noisy: boolean;
}

/** The median over (quiet) rounds of one point of the sweep, or undefined when it was not measured. */
export function cellOf(
  points: readonly Point[],
  workload: WorkloadName,
  framework: Framework,
  maxBatchSize: number,
  concurrency: number,
): Cell | undefined {
  const matching = points.filter(
    (point) =>
      point.workload === workload &&
      point.framework === framework &&
      point.max_batch_size === maxBatchSize &&
      point.concurrency === concurrency,
  );
  if (matching.length === 0) return undefined;
  const { used, noisy } = quietOrAll(matching);
  const of = (key: 'items_per_s' | 'p50_ms' | 'p99_ms' | 'mean_batch_size') => median(used.map((point) => point[key]));
  return {
    items_per_s: of('items_per_s'),
    p50_ms: of('p50_ms'),
    p99_ms: of('p99_ms'),
    mean_batch_size: of('mean_batch_size'),
    used: used.length,
    measured: matching.length,
    noisy,
  };
}

/** The median (quiet) offline limit of a workload at a batch size. */
export function offlineCellOf(
  offline: readonly OfflineResult[],
  workload: WorkloadName,
  batchSize: number,
): { value: number; used: number; measured: number; noisy: boolean } {
  const matching = offline.filter((result) => result.workload === workload && result.batch_size === batchSize);
  const { used, noisy } = quietOrAll(matching);
  return {
    value: median(used.map((result) => result.items_per_s)),
    used: used.length,
    measured: matching.length,
    noisy,
  };
}

export function offlineOf(offline: readonly OfflineResult[], workload: WorkloadName, batchSize: number): number {
  return offlineCellOf(offline, workload, batchSize).value;
}

function roundsOf(
  main: MainConfiguration,
  points: readonly Point[],
  offline: readonly OfflineResult[],
): RoundFigures[] {
  const rounds = [...new Set(points.map((point) => point.round))].sort((a, b) => a - b);
  return rounds.flatMap((roundNo) => {
    const find = (maxBatchSize: number, concurrency: number) =>
      points.find(
        (point) =>
          point.round === roundNo &&
          point.workload === main.workload &&
          point.framework === main.framework &&
          point.max_batch_size === maxBatchSize &&
          point.concurrency === concurrency,
      );
    const unbatched = find(1, main.concurrency);
    const batched = find(main.maxBatchSize, main.concurrency);
    const unbatched1 = find(1, 1);
    const batched1 = find(main.maxBatchSize, 1);
    const limit = offline.find(
      (result) =>
        result.round === roundNo && result.workload === main.workload && result.batch_size === main.maxBatchSize,
    );
    if (!unbatched || !batched || !unbatched1 || !batched1 || !limit) return [];
    return [
      {
        round: roundNo,
        offline_items_per_s: limit.items_per_s,
        unbatched_items_per_s: unbatched.items_per_s,
        batched_items_per_s: batched.items_per_s,
        unbatched_p99_ms: unbatched.p99_ms,
        batched_p99_ms: batched.p99_ms,
        unbatched_p50_ms_c1: unbatched1.p50_ms,
        batched_p50_ms_c1: batched1.p50_ms,
        max_other_cpu_pct: Math.max(
          limit.other_cpu_pct,
          unbatched.other_cpu_pct,
          batched.other_cpu_pct,
          unbatched1.other_cpu_pct,
          batched1.other_cpu_pct,
        ),
      },
    ];
  });
}

export function summarize(input: {
  readonly main: MainConfiguration;
  readonly points: readonly Point[];
  readonly offline: readonly OfflineResult[];
  readonly conditions: RunConditions;
}): Summary {
  const { main, points, offline, conditions } = input;
  const rounds = roundsOf(main, points, offline);
  const cell = (maxBatchSize: number, concurrency: number): Cell => {
    const found = cellOf(points, main.workload, main.framework, maxBatchSize, concurrency);
    if (found === undefined)
      throw new Error(
        `the main configuration has no point at maxBatchSize ${maxBatchSize}, concurrency ${concurrency}`,
      );
    return found;
  };
  const limitCell = offlineCellOf(offline, main.workload, main.maxBatchSize);
  const unbatchedCell = cell(1, main.concurrency);
  const batchedCell = cell(main.maxBatchSize, main.concurrency);
  const unbatched1 = cell(1, 1);
  const batched1 = cell(main.maxBatchSize, 1);
  const offlineLimit = round(limitCell.value);
  const unbatched = round(unbatchedCell.items_per_s);
  const batched = round(batchedCell.items_per_s);
  const batchedP99 = round(batchedCell.p99_ms, 2);
  const unbatchedP99 = round(unbatchedCell.p99_ms, 2);
  const unbatchedP50 = round(unbatched1.p50_ms, 2);
  const batchedP50 = round(batched1.p50_ms, 2);
  const basis = (name: string, c: { used: number; measured: number; noisy: boolean }) => ({ figure: name, ...c });
  const figureBasis = [
    basis('offline limit', limitCell),
    basis(`unbatched c=${main.concurrency}`, unbatchedCell),
    basis(`batched c=${main.concurrency}`, batchedCell),
    basis('unbatched c=1', unbatched1),
    basis('batched c=1', batched1),
  ].map(({ figure, used, measured, noisy }) => ({ figure, used, measured, noisy }));
  const wait = conditions.batch_wait_timeout_ms;
  const speedup = round(batched / unbatched, 2);
  const efficiency = round(batched / offlineLimit, 3);
  const targets: Target[] = [
    {
      name: `batched ≥ 3x unbatched items/s (c=${main.concurrency})`,
      met: speedup >= 3,
      detail: `${batched} / ${unbatched} = ${speedup}x`,
    },
    {
      name: 'batched ≥ 0.85x the offline limit',
      met: efficiency >= 0.85,
      detail: `${batched} / ${offlineLimit} = ${efficiency}x`,
    },
    {
      name: `batched p99 ≤ unbatched p99 (c=${main.concurrency})`,
      met: batchedP99 <= unbatchedP99,
      detail: `${batchedP99} ms vs ${unbatchedP99} ms`,
    },
    {
      name: `c=1: batched p50 ≤ unbatched p50 + batchWaitTimeoutMs (${wait}) + 2 ms`,
      met: batchedP50 <= unbatchedP50 + wait + 2,
      detail: `${batchedP50} ms vs ${unbatchedP50} + ${wait} + 2 = ${round(unbatchedP50 + wait + 2, 2)} ms`,
    },
  ];
  return {
    offline_items_per_s: offlineLimit,
    unbatched_items_per_s: unbatched,
    batched_items_per_s: batched,
    batched_p99_ms: batchedP99,
    unbatched_p99_ms: unbatchedP99,
    concurrency: main.concurrency,
    max_batch_size: main.maxBatchSize,
    workload: main.workload,
    framework: main.framework,
    batch_wait_timeout_ms: wait,
    concurrency_1: { unbatched_p50_ms: unbatchedP50, batched_p50_ms: batchedP50 },
    batched_vs_unbatched: speedup,
    batched_vs_offline: efficiency,
    targets,
    figures_basis: `medians over the measurements during which other processes used at most ${QUIET_PCT}% of one core (over all of them where none did: noisy)`,
    figure_measurements: figureBasis,
    rounds,
    conditions,
    offline,
    sweep: points,
  };
}

// ---- BENCHMARKS.md -------------------------------------------------------------------------------------------

const START = '<!-- bench:results:start (generated by `pnpm bench`; edits here are overwritten) -->';
const END = '<!-- bench:results:end -->';

const fmt = (value: number, digits = 0) => (Number.isFinite(value) ? value.toFixed(digits) : '–');
const modeName = (maxBatchSize: number): string => (maxBatchSize === 1 ? 'unbatched' : `batched ≤${maxBatchSize}`);

function modesOf(points: readonly Point[], workload: WorkloadName): number[] {
  return [...new Set(points.filter((point) => point.workload === workload).map((point) => point.max_batch_size))].sort(
    (a, b) => a - b,
  );
}

function concurrenciesOf(points: readonly Point[]): number[] {
  return [...new Set(points.map((point) => point.concurrency))].sort((a, b) => a - b);
}

function frameworksOf(points: readonly Point[], workload: WorkloadName): Framework[] {
  const order: Framework[] = ['express', 'koa', 'nest'];
  return order.filter((framework) =>
    points.some((point) => point.workload === workload && point.framework === framework),
  );
}

function sweepTable(summary: Summary, workload: WorkloadName): string {
  const { sweep } = summary;
  const concurrencies = concurrenciesOf(sweep);
  const lines = [
    `| framework | mode | ${concurrencies.map((c) => `c=${c}`).join(' | ')} |`,
    `| --- | --- | ${concurrencies.map(() => '---:').join(' | ')} |`,
  ];
  for (const framework of frameworksOf(sweep, workload)) {
    for (const maxBatchSize of modesOf(sweep, workload)) {
      const cells = concurrencies.map((concurrency) => {
        const cell = cellOf(sweep, workload, framework, maxBatchSize, concurrency);
        if (cell === undefined) return '';
        return `**${fmt(cell.items_per_s)}**/s · ${fmt(cell.p50_ms, 1)} / ${fmt(cell.p99_ms, 1)} ms · ×${fmt(cell.mean_batch_size, 1)}${cell.noisy ? ' †' : ''}`;
      });
      lines.push(`| ${framework} | ${modeName(maxBatchSize)} | ${cells.join(' | ')} |`);
    }
  }
  return lines.join('\n');
}

function offlineLine(summary: Summary, workload: WorkloadName): string {
  const sizes = [
    ...new Set(summary.offline.filter((result) => result.workload === workload).map((result) => result.batch_size)),
  ].sort((a, b) => a - b);
  return `Offline limit (model called directly in its worker, full batches back to back): ${sizes
    .map((size) => {
      const limit = offlineCellOf(summary.offline, workload, size);
      return `batch ${size}: **${fmt(limit.value)}** items/s${limit.noisy ? ' †' : ''}`;
    })
    .join(', ')}.`;
}

/** Where the time goes at the highest concurrency: worker, event loop, CPU shares. */
function anatomyTable(summary: Summary, workload: WorkloadName, framework: Framework): string {
  const concurrency = Math.max(...concurrenciesOf(summary.sweep));
  const rows = modesOf(summary.sweep, workload).flatMap((maxBatchSize) => {
    const matching = summary.sweep.filter(
      (point) =>
        point.workload === workload &&
        point.framework === framework &&
        point.max_batch_size === maxBatchSize &&
        point.concurrency === concurrency,
    );
    if (matching.length === 0) return [];
    const { used } = quietOrAll(matching);
    const of = (key: keyof Point) => median(used.map((point) => point[key] as number));
    const padding = used[0]?.padding_efficiency_pct === null ? '–' : `${fmt(of('padding_efficiency_pct'))}%`;
    return [
      `| ${modeName(maxBatchSize)} | ${fmt(of('worker_busy_pct'))}% | ${fmt(of('event_loop_utilization_pct'))}% | ${fmt(of('event_loop_delay_p99_ms'), 1)} ms | ${fmt(of('server_cpu_pct'))}% | ${fmt(of('load_generator_cpu_pct'))}% | ${fmt(of('other_cpu_pct'))}% | ${padding} |`,
    ];
  });
  return [
    `| mode | worker busy | event-loop utilization | event-loop delay p99 | server CPU | autocannon CPU | other CPU | padding efficiency |`,
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows,
  ].join('\n');
}

export function resultsMarkdown(summary: Summary): string {
  const { conditions: c } = summary;
  const m = c.machine;
  const workloads = [...new Set(summary.sweep.map((point) => point.workload))];
  const roundsTable = [
    '| round | offline items/s | unbatched items/s | batched items/s | batched / unbatched | batched / offline | unbatched p99 | batched p99 | c=1 unbatched p50 | c=1 batched p50 | others, at most |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...summary.rounds.map(
      (r) =>
        `| ${r.round} | ${fmt(r.offline_items_per_s)} | ${fmt(r.unbatched_items_per_s)} | ${fmt(r.batched_items_per_s)} | ${fmt(r.batched_items_per_s / r.unbatched_items_per_s, 2)}x | ${fmt(r.batched_items_per_s / r.offline_items_per_s, 2)}x | ${fmt(r.unbatched_p99_ms, 1)} ms | ${fmt(r.batched_p99_ms, 1)} ms | ${fmt(r.unbatched_p50_ms_c1, 2)} ms | ${fmt(r.batched_p50_ms_c1, 2)} ms | ${fmt(r.max_other_cpu_pct)}% |`,
    ),
  ].join('\n');
  const parts = [
    START,
    '',
    `**Run** of ${c.started_at.slice(0, 16).replace('T', ' ')} UTC, suite \`${c.suite}\`, ${Math.round(c.duration_s / 60)} min.`,
    '',
    `**Machine:** ${m.nproc} cores (\`nproc\` / \`os.availableParallelism()\`; \`os.cpus()\`: ${m.cpus} × ${m.cpu_model}), ${m.memory_gib} GiB, ${m.os}, Node ${m.node}, onnxruntime-node ${m.onnxruntime_node}, transformers.js ${m.transformers_js}; load average at start ${m.load_average_at_start.join(' / ')}.`,
    '',
    `### Main configuration: ${summary.framework}, ${workloadOf(summary.workload).title}, concurrency ${summary.concurrency}`,
    '',
    `Batched = \`maxBatchSize: ${summary.max_batch_size}\`, \`batchWaitTimeoutMs: ${summary.batch_wait_timeout_ms}\`. Each figure is the median of its measurements in ${summary.rounds.length} interleaved rounds, counting only those during which other processes used at most ${QUIET_PCT}% of one core: ${summary.figure_measurements.map((f) => `${f.figure} ${f.used} of ${f.measured}${f.noisy ? ' (none was quiet: all used)' : ''}`).join(', ')}.`,
    '',
    '| | items/s | p99 |',
    '| --- | ---: | ---: |',
    `| offline limit (batches of ${summary.max_batch_size}) | **${fmt(summary.offline_items_per_s)}** | |`,
    `| unbatched server (\`maxBatchSize: 1\`) | **${fmt(summary.unbatched_items_per_s)}** | ${fmt(summary.unbatched_p99_ms, 1)} ms |`,
    `| batched server (\`maxBatchSize: ${summary.max_batch_size}\`) | **${fmt(summary.batched_items_per_s)}** | ${fmt(summary.batched_p99_ms, 1)} ms |`,
    '',
    '| target | result | |',
    '| --- | --- | --- |',
    ...summary.targets.map((target) => `| ${target.name} | ${target.detail} | ${target.met ? 'met' : '**missed**'} |`),
    '',
    'Every round, as measured (others: the most CPU other processes used during one of its five measurements, in % of one core):',
    '',
    roundsTable,
    '',
    ...workloads.flatMap((workload) => [
      `### ${workloadOf(workload).title}`,
      '',
      `![Throughput and p99 latency against concurrency, ${workload}](bench/results/${workload === summary.workload ? 'http.svg' : `http-${workload}.svg`})`,
      '',
      offlineLine(summary, workload),
      '',
      `Each cell: **items/s** · p50 / p99 latency · mean batch size (items per model call); † measured only while other processes used more than ${QUIET_PCT}% of one core.`,
      '',
      sweepTable(summary, workload),
      '',
      `Where the time goes (${summary.framework}, c=${Math.max(...concurrenciesOf(summary.sweep))}; shares of one core over the window):`,
      '',
      anatomyTable(summary, workload, summary.framework),
      '',
    ]),
    END,
  ];
  return parts.join('\n');
}

/** Replaces the generated section of BENCHMARKS.md (between the markers), keeping the hand-written text around it. */
export async function updateBenchmarksMd(path: string, summary: Summary): Promise<void> {
  const current = await readFile(path, 'utf8').catch(() => `# Benchmarks\n\n${START}\n${END}\n`);
  const start = current.indexOf(START.slice(0, 26));
  const end = current.indexOf(END);
  if (start < 0 || end < start) throw new Error(`${path} has no generated section markers (${START} … ${END})`);
  await writeFile(path, `${current.slice(0, start)}${resultsMarkdown(summary)}${current.slice(end + END.length)}`);
}
