// What the decode loop did since its last report: the pool hears it a few times a second and hands it to the
// loop's log and metrics on the main thread (`pool.onDecodeActivity`).
import type { DecodeActivity } from '../../contract/decode-activity.js';
import type { PrefixCacheCounters } from './prefix-cache.js';

/** How often a busy loop reports its activity; an idle loop reports once, when it stops. */
export const ACTIVITY_REPORT_MS = 250;

/** One report window's counters (the worker index is added by the runner). */
export type ActivityWindow = Omit<DecodeActivity, 'worker'>;

/** Counts the loop's steps, rows, tokens, joins and leaves until {@link ActivityCounter.take} empties it. */
export class ActivityCounter {
  #started = performance.now();
  #steps = 0;
  #stepsByRows: number[] = [];
  #tokens = 0;
  #joined = 0;
  #left = 0;
  /** The prefix cache's cumulative counters at the last report. */
  #cache: PrefixCacheCounters = { lookups: 0, hits: 0, tokens: 0, evictions: 0 };

  /** A step in which `rows` sequences got `tokens` tokens (a newcomer gets two: prefill's and the decode step's). */
  step(rows: number, tokens: number): void {
    this.#steps += 1;
    this.#tokens += tokens;
    this.#stepsByRows[rows] = (this.#stepsByRows[rows] ?? 0) + 1;
  }

  /** Sequences that got their first token (they are in the loop now). */
  joined(count: number): void {
    this.#joined += count;
  }

  /** Sequences that finished or were cancelled after joining. */
  left(count: number): void {
    this.#left += count;
  }

  /** Whether a report is due: something happened and the window is `ACTIVITY_REPORT_MS` old, or `force`. */
  due(force: boolean): boolean {
    const any = this.#steps > 0 || this.#joined > 0 || this.#left > 0;
    return any && (force || performance.now() - this.#started >= ACTIVITY_REPORT_MS);
  }

  /** The window's counters (the prefix cache's as the change since the last window, and the bytes it holds now). */
  take(cache: PrefixCacheCounters & { readonly bytes: number }): ActivityWindow {
    const now = performance.now();
    const last = this.#cache;
    const window: ActivityWindow = {
      ms: now - this.#started,
      steps: this.#steps,
      stepsByRows: Array.from(this.#stepsByRows, (count) => count ?? 0),
      tokens: this.#tokens,
      joined: this.#joined,
      left: this.#left,
      prefixCacheLookups: cache.lookups - last.lookups,
      prefixCacheHits: cache.hits - last.hits,
      prefixCacheTokens: cache.tokens - last.tokens,
      prefixCacheEvictions: cache.evictions - last.evictions,
      prefixCacheBytes: cache.bytes,
    };
    this.#cache = { lookups: cache.lookups, hits: cache.hits, tokens: cache.tokens, evictions: cache.evictions };
    this.#started = now;
    this.#steps = 0;
    this.#stepsByRows = [];
    this.#tokens = 0;
    this.#joined = 0;
    this.#left = 0;
    return window;
  }
}
