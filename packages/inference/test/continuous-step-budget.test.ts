// The loop's per-step token budget (chunked prefill) and its prefix KV cache, on the fake decoder: every count here
// is of iterations, tokens and blocks, never of time. The fake model checks each row's past token by token, so a
// cached block copied from the wrong place, or a chunk prefilled at the wrong position, changes the tokens.
import { describe, expect, it } from 'vitest';
import type { DecodeLoopOptions } from '../src/runners/continuous/decode-loop.js';
import { PREFIX_BLOCK_TOKENS, PrefixCache } from '../src/runners/continuous/prefix-cache.js';
import type { Sequence } from '../src/runners/continuous/sequence.js';
import { GEOMETRY, alone, idsOf, maxOf, prompt, runLoop, sequence } from './helpers/fake-decoder.js';

const costModel = { callMs: 0.01, rowMs: 0.001, rowPastMs: 0.001, copyMs: 0.000_01 };
const BLOCK_BYTES = PrefixCache.blockBytes(GEOMETRY);

function options(overrides: Partial<DecodeLoopOptions>): DecodeLoopOptions {
  return { maxSequences: 4, maxStepTokens: 64, prefixCacheBytes: 0, maxGroups: 2, costModel, ...overrides };
}

/** A prompt whose first two tokens spell `seed` (distinct for seeds below 225), then `length - 2` more. */
const distinct = (length: number, seed: number): number[] => [
  seed % 15,
  Math.floor(seed / 15) % 15,
  ...prompt(length - 2, seed),
];

describe('the step budget', () => {
  it('runs at most maxStepTokens a step and advances every running row at each one while a long prompt is chunked', async () => {
    // Streams that meet no EOS in 40 tokens: they run through the whole long prefill.
    const seeds = Array.from({ length: 300 }, (_, seed) => seed).filter(
      (seed) => alone(distinct(4, seed), 40).length === 40,
    );
    const streams = seeds.slice(0, 3).map((seed) => sequence(distinct(4, seed), 40));
    expect(streams).toHaveLength(3);
    const long = sequence(prompt(200, 7), 5);
    const plan = [...streams.map((each) => ({ at: 0, sequence: each })), { at: 3, sequence: long }];
    let last = { prefillTokens: 0, decodedRows: 0 };
    const generated = new Map<Sequence, number>();
    let stepsWhileChunking = 0;
    let chunkedIterations = 0;
    const stats = await runLoop(plan, options({ maxSequences: 4, maxStepTokens: 16 }), (now) => {
      const prefilled = now.prefillTokens - last.prefillTokens;
      const decoded = now.decodedRows - last.decodedRows;
      // The budget: every decode row and every (padded) prompt token of this iteration.
      expect(prefilled + decoded).toBeLessThanOrEqual(16);
      last = { prefillTokens: now.prefillTokens, decodedRows: now.decodedRows };
      if (long.prefilled > 0 && long.output.generated === 0) chunkedIterations += 1;
      for (const stream of streams) {
        const before = generated.get(stream);
        const count = stream.output.generated;
        // A running row gets exactly one token per iteration, the long prompt's chunks notwithstanding.
        if (before !== undefined && !stream.done) {
          expect(count).toBe(before + 1);
          if (long.prefilled > 0 && long.output.generated === 0) stepsWhileChunking += 1;
        }
        generated.set(stream, count);
      }
    });
    for (const { sequence: each } of plan) expect(idsOf(each)).toEqual(alone(each.prompt, maxOf(each)));
    // 200 prompt tokens beside 3 decode rows, 13 at most a step: 16 iterations of chunks, each advancing 3 rows.
    expect(chunkedIterations).toBeGreaterThanOrEqual(15);
    expect(stepsWhileChunking).toBe(3 * chunkedIterations);
    expect(stats.prefillCalls).toBeGreaterThanOrEqual(16);
  });

  it('never cuts a prompt that fits a step whole: a newcomer that does not fit what is left waits for the next step', async () => {
    const seeds = Array.from({ length: 300 }, (_, seed) => seed).filter(
      (seed) => alone(distinct(4, seed), 12).length === 12,
    );
    const streams = seeds.slice(0, 2).map((seed) => sequence(distinct(4, seed), 12));
    // Three 20-token prompts at once beside 2 (then 3, 4) running rows: a step's room (40 less the rows) holds one
    // whole, not two, so the second and third would be cut at what the first left.
    const newcomers = [1, 2, 3].map((seed) => sequence(distinct(20, seed + 100), 3));
    const plan = [
      ...streams.map((each) => ({ at: 0, sequence: each })),
      ...newcomers.map((each) => ({ at: 2, sequence: each })),
    ];
    const stats = await runLoop(plan, options({ maxSequences: 5, maxStepTokens: 40 }));
    for (const { sequence: each } of plan) expect(idsOf(each)).toEqual(alone(each.prompt, maxOf(each)));
    // The streams' padded call, then one call per newcomer, each its whole prompt: no chunks.
    expect(stats.prefillCalls).toBe(4);
    expect(stats.prefillTokens).toBe(2 * 4 + 3 * 20);
  });

  it('gives the same tokens with whole and chunked prefill, with the cache on and off, as sequences join mid-run', async () => {
    const shared = prompt(40, 3);
    // Lengths around the 16-token blocks and the chunks; some share a prefix of 40, 33 or 16 tokens.
    const prompts = [
      [...shared, 1, 2, 3],
      prompt(15, 1),
      prompt(16, 2),
      [...shared.slice(0, 33), 4],
      prompt(17, 4),
      [...shared, 5, 6],
      prompt(31, 5),
      [...shared.slice(0, 16), 7],
      prompt(32, 6),
      shared.slice(0, 32),
      prompt(49, 8),
      [...shared, ...prompt(30, 9)],
    ];
    const runs: { prefillTokens: number; hits: number; cachedTokens: number }[] = [];
    for (const maxStepTokens of [10, 21, 1000]) {
      for (const prefixCacheBytes of [0, 64 * BLOCK_BYTES]) {
        const plan = prompts.map((each, index) => ({
          at: index < 3 ? 0 : 2 + index * 4,
          sequence: sequence(each, 3 + ((index * 7) % 20)),
        }));
        let cache = { hits: 0, tokens: 0 };
        const stats = await runLoop(plan, options({ maxStepTokens, prefixCacheBytes }), (_, loop) => {
          cache = loop.prefixCache();
        });
        for (const { sequence: each } of plan) expect(idsOf(each)).toEqual(alone(each.prompt, maxOf(each)));
        runs.push({ prefillTokens: stats.prefillTokens, hits: cache.hits, cachedTokens: cache.tokens });
      }
    }
    // Without a cache nothing is reused; with one, the shared prefixes are (and not prefilled again).
    for (const [index, run] of runs.entries()) {
      if (index % 2 === 0) expect(run).toMatchObject({ hits: 0, cachedTokens: 0 });
      else {
        expect(run.hits).toBeGreaterThan(2);
        expect(run.prefillTokens).toBeLessThan((runs[index - 1] as { prefillTokens: number }).prefillTokens);
      }
    }
  });
});

describe('the prefix cache', () => {
  it('counts lookups, hits and reused tokens, in whole blocks, always prefilling the last prompt token', async () => {
    const shared = prompt(40, 3);
    const prompts = [
      [...shared, 1, 2, 3], // miss: stores blocks 0 and 1 (43 tokens: 2 whole blocks)
      [...shared, 4, 5], // hit: both blocks (32 tokens)
      [...shared.slice(0, 20), 9, 9, 9, 9, 9, 9, 9, 9, 9, 9], // hit: block 0 only (16)
      shared.slice(0, 32), // hit: block 0 only, as its last token must be prefilled (16)
      prompt(12, 9), // shorter than a block: a miss that stores nothing
    ];
    // One after another: each is looked up once the previous one is done and stored.
    const plan = prompts.map((each, index) => ({ at: index === 0 ? 0 : 10_000, sequence: sequence(each, 4) }));
    let cache = { lookups: 0, hits: 0, tokens: 0, evictions: 0, bytes: 0 };
    const stats = await runLoop(plan, options({ prefixCacheBytes: 64 * BLOCK_BYTES }), (_, loop) => {
      cache = loop.prefixCache();
    });
    for (const { sequence: each } of plan) expect(idsOf(each)).toEqual(alone(each.prompt, maxOf(each)));
    expect(cache).toEqual({ lookups: 5, hits: 3, tokens: 32 + 16 + 16, evictions: 0, bytes: 2 * BLOCK_BYTES });
    expect(plan.map(({ sequence: each }) => each.cachedTokens)).toEqual([0, 32, 16, 16, 0]);
    const promptTokens = prompts.reduce((sum, each) => sum + each.length, 0);
    expect(stats.prefillTokens).toBe(promptTokens - 64);
  });

  it('never holds more than its byte budget under a stream of distinct prompts, evicting the oldest', async () => {
    const budget = 5 * BLOCK_BYTES + BLOCK_BYTES / 2;
    const prompts = Array.from({ length: 30 }, (_, seed) => distinct(2 * PREFIX_BLOCK_TOKENS + 3, seed));
    const plan = prompts.map((each, index) => ({ at: index, sequence: sequence(each, 3) }));
    let cache = { lookups: 0, hits: 0, tokens: 0, evictions: 0, bytes: 0 };
    let most = 0;
    await runLoop(plan, options({ prefixCacheBytes: budget }), (_, loop) => {
      cache = loop.prefixCache();
      most = Math.max(most, cache.bytes);
    });
    for (const { sequence: each } of plan) expect(idsOf(each)).toEqual(alone(each.prompt, maxOf(each)));
    expect(most).toBeLessThanOrEqual(budget);
    // 30 prompts of two whole blocks each; five blocks fit: every other one was evicted, none reused.
    expect(cache).toEqual({ lookups: 30, hits: 0, tokens: 0, evictions: 60 - 5, bytes: 5 * BLOCK_BYTES });
  });

  it('keeps a reused prefix over newer distinct prompts (least recently used goes first)', async () => {
    const shared = distinct(2 * PREFIX_BLOCK_TOKENS + 2, 200);
    const prompts: number[][] = [];
    // The shared prompt comes back after every two distinct ones (three blocks): five blocks fit, and its two,
    // used again each round, outlive the distinct ones.
    for (let round = 0; round < 6; round += 1) {
      prompts.push([...shared, round], distinct(2 * PREFIX_BLOCK_TOKENS + 1, 2 * round), distinct(20, 2 * round + 1));
    }
    const plan = prompts.map((each, index) => ({ at: index === 0 ? 0 : 10_000, sequence: sequence(each, 2) }));
    let cache = { lookups: 0, hits: 0, tokens: 0, evictions: 0, bytes: 0 };
    await runLoop(plan, options({ prefixCacheBytes: 5 * BLOCK_BYTES }), (_, loop) => {
      cache = loop.prefixCache();
    });
    for (const { sequence: each } of plan) expect(idsOf(each)).toEqual(alone(each.prompt, maxOf(each)));
    expect(cache.hits).toBe(5);
    expect(cache.tokens).toBe(5 * 2 * PREFIX_BLOCK_TOKENS);
    expect(cache.bytes).toBe(5 * BLOCK_BYTES);
    // Inserted: the shared prompt's two blocks once, three blocks of distinct prompts a round; five are left.
    expect(cache.evictions).toBe(2 + 6 * 3 - 5);
  });
});
