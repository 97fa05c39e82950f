// What a worker's decode loop reports to the main thread (an `activity` message), and what
// `pool.onDecodeActivity` listeners get.

/**
 * What one worker's decode loop did in a window of `ms` milliseconds. A step is one loop iteration that produced
 * tokens: one prefill call for newcomers, then one decode step over every running row; its rows are the sequences
 * that got a token in it.
 *
 * @example
 * ```ts
 * pool.onDecodeActivity(({ steps, tokens, ms }) => console.log(`${steps} steps, ${(tokens / ms) * 1000} tokens/s`));
 * ```
 */
export interface DecodeActivity {
  /** The worker's index in the pool. */
  readonly worker: number;
  /** The window's length. */
  readonly ms: number;
  readonly steps: number;
  /** `stepsByRows[r]`: how many of the steps had `r` rows (the histogram of rows per step). */
  readonly stepsByRows: readonly number[];
  /** Tokens generated (a newcomer gets two in its first step: prefill's and the decode step's). */
  readonly tokens: number;
  /** Sequences that got their first token. */
  readonly joined: number;
  /** Sequences that finished or were cancelled after joining. */
  readonly left: number;
  /** Newcomers whose prompt was looked up in the prefix cache (0 without a cache: `runner.prefixCacheMb: 0`). */
  readonly prefixCacheLookups: number;
  /** Newcomers that reused cached blocks of their prompt. */
  readonly prefixCacheHits: number;
  /** Prompt tokens whose KV came from the prefix cache instead of a prefill. */
  readonly prefixCacheTokens: number;
  /** Cached blocks evicted to stay within the budget. */
  readonly prefixCacheEvictions: number;
  /** Bytes the worker's prefix cache holds at the end of the window (a level, not a count). */
  readonly prefixCacheBytes: number;
}
