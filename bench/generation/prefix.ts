// `pnpm bench:generation --scenario prefix` (issue 27 (b)): requests that share a ~380-token prefix (a system prompt,
// a chat template's preamble) and end differently, sent one after another by `clients` clients; time to first token
// with the prefix KV cache (`prefixCacheMb` > 0, `--prefix-cache-mb`) against without (0), rounds interleaved. Each
// round uses a prefix of its own, so its first request is a cold one on both pools; the figures are over the
// requests after it (warm for the cache), and the first requests' TTFT is reported apart.
import type { TextGenerationRunnerSpec } from '@microbatch/inference';
import { waitForQuiet } from '../lib/machine.js';
import { round } from './summary.js';
import { TOKENS_PER_WORD, quantile, statsDelta, storyWords, streamOne, variantPool } from './streams.js';
import type { Pool, Streamed, Streamer } from './streams.js';

export interface PrefixOptions {
  readonly model: string;
  readonly rounds: number;
  /** Requests per run (the first one cold). @default 12 */
  readonly requests: number;
  /** Clients sending them (each waits for its previous answer). @default 1 */
  readonly clients: number;
  /** Words of the shared prefix (the story's words are ~0.78 tokens each). @default 485 (~380 tokens) */
  readonly prefixWords: number;
  /** Runner options of the pool with the cache. */
  readonly cacheRunner: Partial<TextGenerationRunnerSpec>;
  /** Runner options of the pool without it. */
  readonly noCacheRunner: Partial<TextGenerationRunnerSpec>;
}

const VARIANTS = ['no-cache', 'cache'] as const;
type Variant = (typeof VARIANTS)[number];

interface RunFigures {
  readonly cold: Streamed;
  readonly warm: Streamed[];
}

async function run(streamer: Streamer, options: PrefixOptions, seed: number): Promise<RunFigures> {
  const prefix = `Chapter ${seed}. ${storyWords(options.prefixWords, seed * 17)}`;
  const input = (k: number) => ({
    prompt: `${prefix} Question ${k}: what did ${['Lily', 'Tom', 'Sue', 'Max', 'Ben', 'Ann'][k % 6]} do with the ball number ${k}?`,
    max_new_tokens: 8,
    temperature: 0,
    stop: [],
  });
  const cold = await streamOne(streamer, input(0));
  const warm: Streamed[] = [];
  let next = 1;
  const client = async () => {
    while (next < options.requests) warm.push(await streamOne(streamer, input(next++)));
  };
  await Promise.all(Array.from({ length: options.clients }, client));
  return { cold, warm };
}

/** Runs the scenario; returns its JSON results (TTFT over every warm request of all rounds, ratios cache / none). */
export async function runPrefix(options: PrefixOptions): Promise<Record<string, unknown>> {
  const pools: Partial<Record<Variant, { pool: Pool; streamer: Streamer }>> = {};
  const refused: Partial<Record<Variant, string>> = {};
  for (const [variant, runner] of [
    ['no-cache', options.noCacheRunner],
    ['cache', options.cacheRunner],
  ] as const) {
    const entry = await variantPool(options.model, runner);
    if ('refused' in entry) refused[variant] = entry.refused;
    else pools[variant] = entry;
  }
  const runs: Record<Variant, RunFigures[]> = { 'no-cache': [], cache: [] };
  // The runner's own cache counters (hits, cached tokens, evictions), where it has them, over the measured rounds.
  const CACHE_STATS = /prefix|cache/i;
  const counters: Partial<Record<Variant, Record<string, number>>> = {};
  try {
    for (const entry of Object.values(pools)) await run(entry.streamer, { ...options, requests: 3 }, 999);
    for (const variant of VARIANTS) {
      const entry = pools[variant];
      if (entry !== undefined) counters[variant] = await statsDelta(entry.pool, CACHE_STATS);
    }
    for (let round = 0; round < options.rounds; round += 1) {
      await waitForQuiet(10_000);
      for (const variant of VARIANTS) {
        const entry = pools[variant];
        if (entry === undefined) continue;
        process.stdout.write(`\rprefix round ${round + 1}/${options.rounds} ${variant}        `);
        runs[variant].push(await run(entry.streamer, options, round));
      }
    }
    process.stdout.write('\n');
    for (const variant of VARIANTS) {
      const entry = pools[variant];
      if (entry !== undefined) counters[variant] = await statsDelta(entry.pool, CACHE_STATS, counters[variant]);
    }
  } finally {
    for (const entry of Object.values(pools)) {
      await entry.streamer.close();
      await entry.pool.close();
    }
  }
  const summary = (variant: Variant) => {
    if (refused[variant] !== undefined) return { refused: refused[variant] };
    const figures = runs[variant];
    const warm = figures.flatMap((run) => run.warm);
    const ttfts = warm.map((result) => result.ttftMs);
    return {
      requests: warm.length,
      prompt_tokens_mean: Math.round(warm.reduce((sum, result) => sum + result.promptTokens, 0) / warm.length),
      ttft_p50_ms: round(quantile(ttfts, 0.5)),
      ttft_p90_ms: round(quantile(ttfts, 0.9)),
      first_request_ttft_p50_ms: round(
        quantile(
          figures.map((run) => run.cold.ttftMs),
          0.5,
        ),
      ),
      runner_cache_counters: counters[variant] ?? {},
    };
  };
  const results = { 'no-cache': summary('no-cache'), cache: summary('cache') };
  const p50 = (variant: Variant) => (results[variant] as { ttft_p50_ms?: number }).ttft_p50_ms ?? Number.NaN;
  return {
    workload: `${options.clients} client(s), ${options.requests} requests a run sharing a ~${Math.round(options.prefixWords * TOKENS_PER_WORD)}-token prefix (a new one each round) with a different question at the end; 8 tokens each, greedy, streamed; TTFT over the requests after each run's first`,
    rounds: options.rounds,
    runners: { cache: options.cacheRunner, no_cache: options.noCacheRunner },
    results,
    ratios: { ttft_p50_cache_over_no_cache: round(p50('cache') / p50('no-cache'), 2) },
  };
}
