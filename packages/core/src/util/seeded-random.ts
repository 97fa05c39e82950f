/**
 * A small, fast deterministic generator of numbers in [0, 1) (mulberry32): the same seed gives the same stream on
 * every run and machine, with no dependency. Good for sampling tokens and for reproducible tests and fixtures, not
 * for anything secret.
 *
 * @example
 * ```ts
 * const random = seededRandom(42);
 * random(); // the same first value every time
 * ```
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
