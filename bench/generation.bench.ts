// `pnpm bench:generation`: text generation in the decode loop, each figure against a baseline measured in the same
// run (rounds interleaved, medians). Scenarios (`--scenario`, comma-separated; all by default):
//   - `mixed`: continuous vs request-level scheduling on a mixed-length workload at c=8/32/64, against the decode
//     limit (generation/mixed.ts), on the bundled model and on the ~30M Llama-shaped one (`--model bundled,30m`;
//     on the larger model continuous only at c=32/64, as request-level batches run to their longest request);
//   - `long-prompts`: running streams' inter-token gap while ~400-token prompts arrive, with and without a per-step
//     token budget (generation/long-prompts.ts; the ~30M model unless `--model`);
//   - `prefix`: time to first token of requests sharing a ~380-token prefix with and without the prefix KV cache
//     (generation/prefix.ts; the ~30M model unless `--model`).
//   - `--dtype q4,q8,fp32` (alone): one model (the ~100M one unless `--model`) in each weight format, tokens/s and
//     TTFT at c=1 and c=32 and RSS per dtype (generation/dtypes.ts).
// The Llama-shaped models are written by `pnpm bench:models` (done here too when missing). Results go to
// bench/results/generation.json (the parts of a partial run replace theirs) and BENCHMARKS.md.
// `--report` rewrites the BENCHMARKS.md sections from the last results without running anything.
import { execFileSync } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { TEXT_GENERATION_DEFAULTS } from '@microbatch/inference';
import type { TextGenerationRunnerSpec } from '@microbatch/inference';
import { BENCH_DTYPES, BENCH_MODEL_NAMES, benchModelDir, ensureBenchModel } from './lib/bench-models.js';
import { measureDtypeInChild } from './generation/dtypes.js';
import type { DtypePlan, DtypeResult } from './generation/dtypes.js';
import { writeDtypesSection } from './generation/dtypes-report.js';
import type { DtypesOutput } from './generation/dtypes-report.js';
import { TEXT_MODEL_DIR } from './lib/paths.js';
import { renderGenerationChart } from './generation/chart.js';
import { runLongPrompts } from './generation/long-prompts.js';
import { measureMemoryInChild } from './generation/memory.js';
import { MAX_BATCH, runMixed } from './generation/mixed.js';
import { runPrefix } from './generation/prefix.js';
import { runnerHas } from './generation/streams.js';
import { writeGenerationSection } from './generation/report.js';
import { writeModelSizesSection } from './generation/sizes-report.js';
import { machineInfo } from './lib/machine.js';
import { MAX_TOKENS_CLASSES } from './generation/workload.js';

const SCENARIOS = ['mixed', 'long-prompts', 'prefix'] as const;
type Scenario = (typeof SCENARIOS)[number];
const MODELS = ['bundled', ...BENCH_MODEL_NAMES] as const;
type ModelName = (typeof MODELS)[number];
const RESULTS = new URL('./results/generation.json', import.meta.url);
const BENCHMARKS = new URL('../BENCHMARKS.md', import.meta.url);

const { values: args } = parseArgs({
  options: {
    scenario: { type: 'string', default: SCENARIOS.join(',') },
    model: { type: 'string' },
    rounds: { type: 'string' },
    'max-step-tokens': { type: 'string' },
    'prefix-cache-mb': { type: 'string' },
    'long-every-ms': { type: 'string', default: '2000' },
    'max-sequences': { type: 'string' },
    'window-s': { type: 'string', default: '10' },
    report: { type: 'boolean', default: false },
    dtype: { type: 'string' },
  },
});

function listOf<T extends string>(flag: string, value: string, allowed: readonly T[]): T[] {
  const items = value.split(',').filter((item) => item !== '');
  for (const item of items) {
    if (!allowed.includes(item as T)) {
      throw new TypeError(`Expected \`--${flag}\` to list some of ${allowed.join(', ')}, got \`${item}\``);
    }
  }
  return items as T[];
}

function positive(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const number = Number(value);
  if (!Number.isInteger(number) || number < 0) {
    throw new TypeError(`Expected \`--${flag}\` to be an integer >= 0, got \`${value}\``);
  }
  return number;
}

/**
 * Runner options given as plain data: the per-step budget and the prefix cache (issue 27) are checked by the runner
 * that runs them, which refuses them where it does not have them (the scenario then reports the refusal).
 */
function runnerOptions(options: Record<string, number>): Partial<TextGenerationRunnerSpec> {
  return options;
}

/** The commit the measured code is at (with `+` when the work tree has changes), for the results. */
function headCommit(): string {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no', '--', 'packages'], {
      encoding: 'utf8',
    });
    return dirty.trim() === '' ? commit : `${commit}+`;
  } catch {
    return 'unknown';
  }
}

async function modelDir(name: ModelName): Promise<string> {
  if (name === 'bundled') return TEXT_MODEL_DIR;
  await ensureBenchModel(name);
  return benchModelDir(name);
}

/** The bundled model's mixed runs: the original benchmark (request-level too, memory after long prompts). */
async function mixedBundled(rounds: number): Promise<Record<string, unknown>> {
  const concurrencies = (process.env.CONCURRENCY ?? '8,32,64').split(',').map(Number);
  const mixed = await runMixed({
    model: TEXT_MODEL_DIR,
    concurrencies,
    rounds,
    requestsPerClient: 8,
    minRequests: 128,
    request: true,
    // The loop as it was before issue 27, in the same run: a prefill call of up to 512 tokens and a decode step of
    // every row (64) per iteration, no prefix cache.
    asBefore: runnerHas('maxStepTokens')
      ? runnerOptions({ maxStepTokens: 512 + MAX_BATCH, ...(runnerHas('prefixCacheMb') ? { prefixCacheMb: 0 } : {}) })
      : undefined,
  });
  await writeFile(new URL('./results/generation.svg', import.meta.url), renderGenerationChart(mixed.chart));
  console.table(mixed.table);
  for (const [key, value] of Object.entries(mixed.results)) {
    const { continuous, request } = value as { continuous: Record<string, unknown>; request: Record<string, unknown> };
    console.log(`${key} latency p50/p99 ms by max_tokens (continuous | request):`);
    const rows: Record<string, Record<string, string>> = {};
    for (const max of MAX_TOKENS_CLASSES) {
      const c = (continuous.latency_by_max_tokens as Record<number, { p50_ms: number; p99_ms: number }>)[max];
      const r = (request.latency_by_max_tokens as Record<number, { p50_ms: number; p99_ms: number }>)[max];
      rows[max] = { continuous: `${c?.p50_ms} / ${c?.p99_ms}`, request: `${r?.p50_ms} / ${r?.p99_ms}` };
    }
    console.table(rows);
    console.log('  TTFT p50/p99 ms:', continuous.ttft, request.ttft);
    console.log('  continuous step split:', continuous.steps);
  }
  // Memory after long prompts, in child processes of their own (one continuous pool each, nothing else running).
  process.stdout.write('memory after long prompts...\n');
  const memory = {
    glibc_defaults: await measureMemoryInChild(TEXT_MODEL_DIR),
    mmap_threshold_64k: await measureMemoryInChild(TEXT_MODEL_DIR, { MALLOC_MMAP_THRESHOLD_: '65536' }),
  };
  console.log('memory after long prompts (MiB):', memory);
  return {
    max_batch_size: MAX_BATCH,
    rounds,
    workload:
      'greedy; prompts of 3-48 words (~5-65 tokens); max_tokens uniform over 8/16/32/64/128; half the clients stream',
    results: mixed.results,
    memory,
  };
}

/** A Llama-shaped model's mixed runs: continuous only, c=32 and c=64, 2 requests per client, a time-bounded limit. */
async function mixedLlama(name: ModelName, rounds: number): Promise<Record<string, unknown>> {
  const mixed = await runMixed({
    model: await modelDir(name),
    concurrencies: [32, 64],
    rounds,
    requestsPerClient: 2,
    minRequests: 64,
    request: false,
    limitBudgetMs: 1000,
  });
  console.table(mixed.table);
  return {
    rounds,
    workload:
      'the same mixed workload, 2 requests per client, continuous scheduling only (request-level batches run to their longest request: minutes a run at this size)',
    results: mixed.results,
  };
}

/** `--dtype`: the model in each listed weight format, one child process each, figures against fp32's. */
async function dtypes(list: string): Promise<void> {
  const wanted = listOf('dtype', list, BENCH_DTYPES);
  const [model = '100m', ...more] = listOf('model', args.model ?? '100m', BENCH_MODEL_NAMES);
  if (more.length > 0) throw new TypeError('Expected one `--model` with `--dtype`');
  const plan: DtypePlan = { concurrencies: [1, 32], requestsAtOne: 3, maxNewTokens: 32, promptWords: 24 };
  const machine = machineInfo();
  const began = Date.now();
  const results: DtypeResult[] = [];
  for (const dtype of wanted) {
    const written = await ensureBenchModel(model, dtype);
    console.log(`\n== ${dtype}: ${written.written ? 'written' : 'already written'} ${written.dir} ==`);
    const result = await measureDtypeInChild(written.dir, dtype, plan);
    console.log(JSON.stringify(result));
    results.push(result);
  }
  const output: DtypesOutput = {
    model,
    started: new Date(began).toISOString(),
    minutes: Math.round((Date.now() - began) / 6000) / 10,
    commit: headCommit(),
    load_average_at_start: machine.load_average_at_start,
    cpu_model: machine.cpu_model,
    nproc: machine.nproc,
    plan: { concurrencies: plan.concurrencies, maxNewTokens: plan.maxNewTokens, promptWords: plan.promptWords },
    results,
  };
  const previous = JSON.parse(await readFile(RESULTS, 'utf8').catch(() => '{}')) as Record<string, unknown>;
  await writeFile(RESULTS, `${JSON.stringify({ ...previous, dtypes: output }, null, 2)}\n`);
  await writeDtypesSection(BENCHMARKS, output);
  const fp32 = results.find((result) => result.dtype === 'fp32');
  console.table(
    Object.fromEntries(
      results.flatMap((result) =>
        Object.entries(result.by_concurrency).map(([level, figures]) => [
          `${result.dtype} ${level}`,
          {
            tokens_per_s: figures.tokens_per_s,
            vs_fp32:
              fp32 === undefined
                ? ''
                : (figures.tokens_per_s / (fp32.by_concurrency[level]?.tokens_per_s ?? NaN)).toFixed(2),
            ttft_p50_ms: figures.ttft_p50_ms,
            rss_peak_mib: result.rss_peak_mib,
          },
        ]),
      ),
    ),
  );
}

async function main(): Promise<void> {
  const scenarios = listOf('scenario', args.scenario, SCENARIOS);
  // The runner's defaults where it has the options (a build without them refuses those variants by name).
  const numberDefault = (key: string, fallback: number) => {
    const value = (TEXT_GENERATION_DEFAULTS as Readonly<Record<string, unknown>>)[key];
    return typeof value === 'number' ? value : fallback;
  };
  const stepTokens = (args['max-step-tokens'] ?? String(numberDefault('maxStepTokens', 64)))
    .split(',')
    .map((value) => positive('max-step-tokens', value, 0));
  // `--max-sequences` (long-prompts): the loop's rows on every pool of the scenario; the budget must exceed it.
  const rows: { maxSequences?: number } =
    args['max-sequences'] === undefined ? {} : { maxSequences: positive('max-sequences', args['max-sequences'], 32) };
  const cacheMb = positive('prefix-cache-mb', args['prefix-cache-mb'], numberDefault('prefixCacheMb', 64));
  const previous = JSON.parse(await readFile(RESULTS, 'utf8').catch(() => '{}')) as Record<string, unknown>;
  const output: Record<string, unknown> = { ...previous };
  const sizes = { ...(previous.model_sizes as Record<string, unknown> | undefined) };
  const run = async (scenario: Scenario, fallbackModels: string) => {
    const models = listOf('model', args.model ?? fallbackModels, MODELS);
    for (const name of models) {
      const key = `${scenario}:${name}`;
      const began = Date.now();
      console.log(`\n== ${scenario} on ${name === 'bundled' ? 'the bundled model' : `llama-${name}`} ==`);
      if (scenario === 'mixed' && name === 'bundled') {
        const machine = { ...machineInfo(), pool: '1 worker, 1 intra-op thread per scheduling' };
        Object.assign(output, await mixedBundled(positive('rounds', args.rounds ?? process.env.ROUNDS, 3)), {
          run: {
            started: new Date(began).toISOString(),
            minutes: Math.round((Date.now() - began) / 6000) / 10,
            commit: headCommit(),
          },
          machine,
        });
        continue;
      }
      const load = machineInfo().load_average_at_start;
      const commit = headCommit();
      let result: Record<string, unknown>;
      if (scenario === 'mixed') result = await mixedLlama(name, positive('rounds', args.rounds, 2));
      else if (scenario === 'long-prompts') {
        result = await runLongPrompts({
          model: await modelDir(name),
          rounds: positive('rounds', args.rounds, 3),
          windowMs: positive('window-s', args['window-s'], 10) * 1000,
          streams: 8,
          longEveryMs: positive('long-every-ms', args['long-every-ms'], 2000),
          longWords: 510,
          // Without the budget: what the loop did before it, one prefill call of up to 512 tokens (the old
          // maxPrefillTokens) and a decode step of every row per iteration.
          baselineRunner: runnerOptions({
            ...rows,
            ...(runnerHas('maxStepTokens') ? { maxStepTokens: 512 + (rows.maxSequences ?? 32) } : {}),
          }),
          budgetRunners: stepTokens.map((maxStepTokens) => runnerOptions({ ...rows, maxStepTokens })),
        });
      } else {
        result = await runPrefix({
          model: await modelDir(name),
          rounds: positive('rounds', args.rounds, 3),
          requests: 12,
          clients: 1,
          prefixWords: 485,
          cacheRunner: runnerOptions({ prefixCacheMb: cacheMb }),
          // A build without the cache is the baseline as it is.
          noCacheRunner: runnerHas('prefixCacheMb') ? runnerOptions({ prefixCacheMb: 0 }) : {},
        });
      }
      sizes[key] = {
        ...result,
        started: new Date(began).toISOString(),
        minutes: Math.round((Date.now() - began) / 6000) / 10,
        load_average_at_start: load,
        commit,
      };
      console.log(JSON.stringify(sizes[key], null, 2));
    }
  };
  for (const scenario of scenarios) await run(scenario, scenario === 'mixed' ? 'bundled,30m' : '30m');
  output.model_sizes = sizes;
  await writeFile(RESULTS, `${JSON.stringify(output, null, 2)}\n`);
  await writeReport(output);
}

async function writeReport(output: Record<string, unknown>): Promise<void> {
  if (output.results !== undefined) {
    await writeGenerationSection(BENCHMARKS, output as unknown as Parameters<typeof writeGenerationSection>[1]);
  }
  if (output.model_sizes !== undefined) {
    await writeModelSizesSection(BENCHMARKS, output as unknown as Parameters<typeof writeModelSizesSection>[1]);
  }
  if (output.dtypes !== undefined) await writeDtypesSection(BENCHMARKS, output.dtypes as DtypesOutput);
}

if (args.report) await writeReport(JSON.parse(await readFile(RESULTS, 'utf8')) as Record<string, unknown>);
else if (args.dtype !== undefined) await dtypes(args.dtype);
else await main();
