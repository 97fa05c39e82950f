// Per-row sampling: every row of a decode step has its own temperature, top_p and random stream, so sampling
// parameters never split a batch and a row's draws do not depend on which other rows share its steps.
import { seededRandom } from '@microbatch/core/util';
import type { TokenMatcher } from '../../grammar/grammar-engine.js';

/** A random number generator returning floats in [0, 1). */
export type Random = () => number;

/**
 * Each sequence gets its own stream of `seededRandom` (seeded from the runner's seed and the sequence's arrival
 * number) so that batch composition never changes the tokens a seeded request draws.
 */
export { seededRandom };

/** The sampling parameters of one row. */
export interface SamplingParams {
  /** 0 is greedy. */
  readonly temperature: number;
  /** Nucleus mass in (0, 1]; ignored when greedy. */
  readonly topP: number;
  readonly random: Random;
  /** Record each token's log-probability and this many alternatives; absent: none. */
  readonly logprobs?: number;
  /**
   * The row's grammar (structured outputs): its mask is applied to the logits before temperature and top-p, and
   * each sampled token advances it. Absent: free text.
   */
  readonly grammar?: TokenMatcher;
}

/** The index of the largest logit (the first one on ties, as argmax does). */
export function argmax(logits: Float32Array): number {
  let best = 0;
  let max = logits[0] as number;
  for (let index = 1; index < logits.length; index += 1) {
    const value = logits[index] as number;
    if (value > max) {
      max = value;
      best = index;
    }
  }
  return best;
}

/**
 * Picks the next token from one row's logits. `scratch` is a reusable buffer of at least the vocabulary size, so
 * a step allocates nothing per row. Top-p keeps the most likely tokens whose probability mass reaches `topP`
 * (ties at the threshold are all kept) and renormalizes.
 */
export function sampleToken(logits: Float32Array, params: SamplingParams, scratch: Float64Array): number {
  const { temperature, topP, random } = params;
  if (temperature === 0) return argmax(logits);
  const size = logits.length;
  let max = Number.NEGATIVE_INFINITY;
  for (let index = 0; index < size; index += 1) if ((logits[index] as number) > max) max = logits[index] as number;
  const weights = scratch.subarray(0, size);
  let total = 0;
  for (let index = 0; index < size; index += 1) {
    const weight = Math.exp(((logits[index] as number) - max) / temperature);
    weights[index] = weight;
    total += weight;
  }
  let floor = 0;
  if (topP < 1) {
    // The smallest weight still inside the nucleus: sort a copy descending and walk it until the mass reaches topP.
    const sorted = Float64Array.from(weights).sort().reverse();
    let mass = 0;
    floor = sorted[0] as number;
    for (const weight of sorted) {
      floor = weight;
      mass += weight;
      if (mass >= topP * total) break;
    }
    total = 0;
    for (let index = 0; index < size; index += 1) {
      if ((weights[index] as number) < floor) weights[index] = 0;
      else total += weights[index] as number;
    }
  }
  let target = random() * total;
  let last = 0;
  for (let index = 0; index < size; index += 1) {
    const weight = weights[index] as number;
    if (weight === 0) continue;
    last = index;
    target -= weight;
    if (target < 0) return index;
  }
  return last;
}
