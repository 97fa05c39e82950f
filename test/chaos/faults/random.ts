// The chaos loop's randomness: one seeded generator (mulberry32), so a run that found something is run again with
// the same faults at the same points by giving the seed it logged.

/** A generator of numbers in [0, 1). */
export type Random = () => number;

/**
 * A seeded generator of numbers in [0, 1) (mulberry32: small, fast, and the same sequence for a seed on every
 * machine).
 *
 * @example
 * ```ts
 * const random = seeded(42);
 * random(); // the same first number for seed 42, every run
 * ```
 */
export function seeded(seed: number): Random {
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffff_ffff) {
    throw new TypeError(`Expected the seed to be an integer from 0 to 2^32 - 1, got ${seed}`);
  }
  let state = seed;
  return () => {
    state = (state + 0x6d2b_79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A number drawn uniformly from [min, max). */
export function uniform(random: Random, min: number, max: number): number {
  return min + (max - min) * random();
}

/** One of `items`, drawn uniformly. */
export function pick<T>(random: Random, items: readonly T[]): T {
  if (items.length === 0) throw new TypeError('Expected at least one item to pick from');
  return items[Math.floor(random() * items.length)] as T;
}

/** `items` shuffled in place (Fisher-Yates) and returned. */
export function shuffle<T>(random: Random, items: T[]): T[] {
  for (let index = items.length - 1; index > 0; index -= 1) {
    const other = Math.floor(random() * (index + 1));
    [items[index], items[other]] = [items[other] as T, items[index] as T];
  }
  return items;
}
