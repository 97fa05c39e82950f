// `pnpm bench:generation --scenario long-prompts` (issue 27 (a)): `streams` clients stream generations back to back
// while prompts of ~400 tokens arrive at a steady rate. Measured: the running streams' inter-token gaps (p50, p99) and
// the long prompts' own time to first token, in three variants run in interleaved rounds:
//   - `no-long`: the streams alone (the baseline gap),
//   - `long`: long prompts arriving, the runner without a per-step token budget,
//   - `long-budget`: the same arrivals with `maxStepTokens` (`--max-step-tokens`) set; more budgets (a comma list)
//     run as `long-budget-2`, `long-budget-3`, ... so a default can be chosen from one run.
// A variant whose runner refuses its options (a build without them) is reported as refused, with the reason.
import type { TextGenerationRunnerSpec } from '@microbatch/inference';
import { waitForQuiet } from '../lib/machine.js';
import { median, round } from './summary.js';
import { TOKENS_PER_WORD, quantile, sleep, storyWords, streamOne, variantPool } from './streams.js';
import type { Pool, Streamed, Streamer } from './streams.js';

export interface LongPromptOptions {
  readonly model: string;
  readonly rounds: number;
  /** How long each run measures, in ms (`--window-s`, 10 s by default). */
  readonly windowMs: number;
  /** Generating clients (8 in `pnpm bench:generation`). */
  readonly streams: number;
  /** One long prompt every this many ms. */
  readonly longEveryMs: number;
  /** Words of a long prompt (the story's words are ~0.78 tokens each; 510 words: ~400 tokens). */
  readonly longWords: number;
  /** Runner options of the pool without the budget (both no-long and long run on it). */
  readonly baselineRunner: Partial<TextGenerationRunnerSpec>;
  /** Runner options of the pools with a budget (the first one is `long-budget`). */
  readonly budgetRunners: readonly Partial<TextGenerationRunnerSpec>[];
}

/** One measured configuration: a pool, and whether long prompts arrive. */
interface Variant {
  readonly name: string;
  readonly runner: Partial<TextGenerationRunnerSpec>;
  readonly long: boolean;
  readonly entry: { pool: Pool; streamer: Streamer } | { refused: string };
}

interface RunFigures {
  readonly gapP50Ms: number;
  readonly gapP99Ms: number;
  readonly gaps: number;
  readonly streamTokensPerSecond: number;
  readonly longTtfts: number[];
  readonly longPromptTokens: number[];
}

/** One run: the streams for `windowMs` (plus a second of warm-up), long prompts arriving when `long`. */
async function run(streamer: Streamer, options: LongPromptOptions, long: boolean, seed: number): Promise<RunFigures> {
  const started = performance.now();
  const from = started + 1000;
  const until = from + options.windowMs;
  const gaps: number[] = [];
  let streamTokens = 0;
  const client = async (index: number) => {
    for (let request = 0; performance.now() < until; request += 1) {
      const words = 6 + ((index * 7 + request * 3) % 20);
      const result = await streamOne(streamer, {
        prompt: storyWords(words, index * 11 + request),
        max_new_tokens: 48,
        temperature: 0,
        stop: [],
      });
      // Gaps between successive chunks of one generation, both inside the window.
      result.chunkTimes.forEach((time, k) => {
        const previous = result.chunkTimes[k - 1];
        if (previous !== undefined && previous >= from && time <= until) gaps.push(time - previous);
      });
      streamTokens += result.chunkTimes.filter((time) => time >= from && time <= until).length;
    }
  };
  const longs: Promise<Streamed>[] = [];
  const arrivals = async () => {
    // A steady rate from the start of the window; each prompt starts differently (no shared prefix to reuse).
    for (let k = 0; from + k * options.longEveryMs < until; k += 1) {
      await sleep(from + k * options.longEveryMs - performance.now());
      const prompt = `Story ${seed * 100 + k}: ${storyWords(options.longWords, seed * 37 + k * 13)}`;
      longs.push(streamOne(streamer, { prompt, max_new_tokens: 16, temperature: 0, stop: [] }));
    }
  };
  await Promise.all([
    ...Array.from({ length: options.streams }, (_, index) => client(index)),
    long ? arrivals() : Promise.resolve(),
  ]);
  const done = await Promise.all(longs);
  return {
    gapP50Ms: quantile(gaps, 0.5),
    gapP99Ms: quantile(gaps, 0.99),
    gaps: gaps.length,
    streamTokensPerSecond: (streamTokens * 1000) / options.windowMs,
    longTtfts: done.map((result) => result.ttftMs),
    longPromptTokens: done.map((result) => result.promptTokens),
  };
}

/** Runs the scenario; returns its JSON results (medians of the rounds' figures, ratios to `no-long`). */
export async function runLongPrompts(options: LongPromptOptions): Promise<Record<string, unknown>> {
  const baseline = await variantPool(options.model, options.baselineRunner);
  if ('refused' in baseline) throw new Error(`the baseline pool failed to start: ${baseline.refused}`);
  const variants: Variant[] = [
    { name: 'no-long', runner: options.baselineRunner, long: false, entry: baseline },
    { name: 'long', runner: options.baselineRunner, long: true, entry: baseline },
  ];
  for (const [index, runner] of options.budgetRunners.entries()) {
    const name = index === 0 ? 'long-budget' : `long-budget-${index + 1}`;
    variants.push({ name, runner, long: true, entry: await variantPool(options.model, runner) });
  }
  const pools = new Set(variants.flatMap((variant) => ('refused' in variant.entry ? [] : [variant.entry])));
  const runs = new Map<string, RunFigures[]>(variants.map((variant) => [variant.name, []]));
  try {
    // Warm-up: every shape once on each pool (a long prompt and the streams).
    for (const entry of pools) {
      await run(entry.streamer, { ...options, windowMs: 2000, longEveryMs: 1000 }, true, 999);
    }
    for (let round = 0; round < options.rounds; round += 1) {
      await waitForQuiet(10_000);
      for (const variant of variants) {
        if ('refused' in variant.entry) continue;
        process.stdout.write(`\rlong-prompts round ${round + 1}/${options.rounds} ${variant.name}        `);
        runs.get(variant.name)?.push(await run(variant.entry.streamer, options, variant.long, round));
      }
    }
    process.stdout.write('\n');
  } finally {
    for (const entry of pools) {
      await entry.streamer.close();
      await entry.pool.close();
    }
  }
  const summary = (figures: RunFigures[]) => {
    const ttfts = figures.flatMap((run) => run.longTtfts);
    const promptTokens = figures.flatMap((run) => run.longPromptTokens);
    return {
      gap_p50_ms: round(median(figures.map((run) => run.gapP50Ms))),
      gap_p99_ms: round(median(figures.map((run) => run.gapP99Ms))),
      gaps_per_run: Math.round(median(figures.map((run) => run.gaps))),
      stream_tokens_per_s: round(median(figures.map((run) => run.streamTokensPerSecond))),
      ...(ttfts.length === 0
        ? {}
        : {
            long_prompts: ttfts.length,
            long_prompt_tokens_mean: Math.round(promptTokens.reduce((a, b) => a + b, 0) / promptTokens.length),
            long_ttft_p50_ms: round(quantile(ttfts, 0.5)),
            long_ttft_p99_ms: round(quantile(ttfts, 0.99)),
          }),
    };
  };
  const results: Record<string, Record<string, unknown>> = {};
  for (const variant of variants) {
    results[variant.name] =
      'refused' in variant.entry ? { refused: variant.entry.refused } : summary(runs.get(variant.name) ?? []);
  }
  const base = (results['no-long']?.gap_p99_ms as number | undefined) ?? Number.NaN;
  const ratios: Record<string, number> = {};
  for (const variant of variants.filter((entry) => entry.long)) {
    const p99 = (results[variant.name]?.gap_p99_ms as number | undefined) ?? Number.NaN;
    ratios[`gap_p99_${variant.name.replaceAll('-', '_')}_over_no_long`] = round(p99 / base, 2);
  }
  return {
    workload: `${options.streams} clients streaming 48-token generations back to back (greedy, short prompts); one ~${Math.round(options.longWords * TOKENS_PER_WORD)}-token prompt (16 tokens, streamed) every ${options.longEveryMs} ms during ${options.windowMs / 1000} s windows; gaps between successive chunks of one generation inside the window`,
    rounds: options.rounds,
    runners: Object.fromEntries(variants.map((variant) => [variant.name, variant.runner])),
    results,
    ratios,
  };
}
