import type { LatencyEstimate } from './types.js';

/** How many recent batches the fit covers: enough to average out noise, few enough to follow a model that drifts. */
const WINDOW = 50;
/** How many batches admission waits for before it trusts the fit. */
const MIN_SAMPLES = 5;
/**
 * Each batch counts this much less than the next one: the fit follows a model that slows down within a few
 * batches (a neighbour took the CPU, longer prompts came in) instead of the whole window, which at seconds per batch
 * would take minutes.
 */
const DECAY = 0.85;
/** How many of the newest batches bound a prediction from below (see `predict`). */
const RECENT = 10;

/**
 * A latency model's fit, as plain numbers: what {@link predictBatchMs} reads, and what a process can publish so
 * that another (a web replica in front of a shared queue) predicts with the same rule.
 *
 * @example
 * ```ts
 * const fit: LatencyFit = model.fit(); // { samples: 12, msPerCost: 1.5, msPerBatch: 40, flatCost: undefined, minMs: 41, spread: 0.1 }
 * predictBatchMs(fit, 8); // 52
 * ```
 */
export interface LatencyFit {
  /** Batches in the window; predictions are trusted from 5. */
  readonly samples: number;
  readonly msPerCost: number;
  readonly msPerBatch: number;
  /** The one cost every batch of the window had, if so (then no slope can be fitted). */
  readonly flatCost: number | undefined;
  /** The quickest of the newest batches: no prediction is below it. */
  readonly minMs: number;
  /** How much slower or faster than predicted a batch may turn out (see `LatencyModel.spread`). */
  readonly spread: number;
}

/**
 * Predicted handler milliseconds of one batch of this total cost under `fit`: the rule {@link LatencyModel.predict}
 * applies, for a fit that came from elsewhere.
 *
 * @example
 * ```ts
 * predictBatchMs({ samples: 5, msPerCost: 2, msPerBatch: 10, flatCost: undefined, minMs: 0, spread: 0 }, 4); // 18
 * ```
 */
export function predictBatchMs(fit: Omit<LatencyFit, 'samples' | 'spread'>, cost: number): number {
  const linear = fit.msPerCost * cost + fit.msPerBatch;
  if (fit.flatCost !== undefined && cost < fit.flatCost) return fit.msPerCost * fit.flatCost;
  // Never below the quickest of the last few batches: a batch at least as costly takes at least as long, and a
  // model whose time is mostly per call (per decode step) takes about as long for a small batch as for a large one,
  // whatever a noisy slope says. Cautious for a small batch after large ones only: its own time soon lowers it.
  return Math.max(linear, fit.minMs);
}

/** Whether a fit has seen enough batches for admission to trust it. */
export function isFitReady(fit: Pick<LatencyFit, 'samples'>): boolean {
  return fit.samples >= MIN_SAMPLES;
}

/**
 * Handler time as a function of batch cost, `msPerCost · cost + msPerBatch`, fitted by least squares over the last
 * {@link WINDOW} batches (BentoML's adaptive batching fits its last 50 too), recent batches weighing more
 * ({@link DECAY}), so the estimate follows a model that slows down or speeds up. A ring buffer, refitted lazily when
 * read after new batches (at most 50 terms).
 */
export class LatencyModel {
  readonly #cost = new Float64Array(WINDOW);
  readonly #ms = new Float64Array(WINDOW);
  #count = 0;
  #next = 0;
  #msPerCost = 0;
  #msPerBatch = 0;
  /** The one batch cost every batch in the window had, when they all had the same (see `#fit`). */
  #flatCost: number | undefined;
  /** The time of the quickest of the last RECENT batches (see `predict`). */
  #minMs = 0;
  /** Whether batches were added since the last fit: fitted when read, so batchers that never ask pay nothing. */
  #stale = false;
  /** The fit's relative error (see `relativeError`). */
  #relativeError = 0;

  get ready(): boolean {
    return this.#count >= MIN_SAMPLES;
  }

  get msPerCost(): number {
    if (this.#stale) this.#fit();
    return this.#msPerCost;
  }

  get msPerBatch(): number {
    if (this.#stale) this.#fit();
    return this.#msPerBatch;
  }

  /**
   * How far batch times stray from the fit, relative to it: the weighted root mean square of `(actual − predicted) /
   * predicted` over the window. 0 for a model whose batches take exactly what the fit says; ~0.1 for one whose times
   * wander ±10% (a shared CPU).
   */
  get relativeError(): number {
    if (this.#stale) this.#fit();
    return this.#relativeError;
  }

  /**
   * How much faster or slower than the fit a prediction may turn out: twice the relative error (two standard
   * deviations, were errors normal), at most half. Admission reads predictions that much slower, early refusal that
   * much faster.
   */
  get spread(): number {
    const error = this.relativeError;
    // Rounding in the fit of a model that is exact must not move its predictions.
    return error < 1e-9 ? 0 : Math.min(0.5, 2 * error);
  }

  /** Records one batch's total cost and handler time. */
  add(cost: number, ms: number): void {
    this.#cost[this.#next] = cost;
    this.#ms[this.#next] = ms;
    this.#next = (this.#next + 1) % WINDOW;
    if (this.#count < WINDOW) this.#count += 1;
    this.#stale = true;
  }

  /** Predicted handler milliseconds for one batch of this total cost. */
  predict(cost: number): number {
    if (this.#stale) this.#fit();
    return predictBatchMs(
      { msPerCost: this.#msPerCost, msPerBatch: this.#msPerBatch, flatCost: this.#flatCost, minMs: this.#minMs },
      cost,
    );
  }

  /** The fit as plain numbers, for {@link predictBatchMs} in another process. */
  fit(): LatencyFit {
    const spread = this.spread; // refits if stale
    return {
      samples: this.#count,
      msPerCost: this.#msPerCost,
      msPerBatch: this.#msPerBatch,
      flatCost: this.#flatCost,
      minMs: this.#minMs,
      spread,
    };
  }

  snapshot(): LatencyEstimate {
    return { ready: this.ready, samples: this.#count, msPerCost: this.msPerCost, msPerBatch: this.msPerBatch };
  }

  #fit(): void {
    this.#stale = false;
    this.#fitLine();
    let weights = 0;
    let squares = 0;
    let weight = 1;
    for (let age = 0; age < this.#count; age += 1) {
      const i = (this.#next - 1 - age + WINDOW) % WINDOW;
      const predicted = this.predict(this.#cost[i] as number);
      if (predicted > 0) {
        const error = ((this.#ms[i] as number) - predicted) / predicted;
        squares += weight * error * error;
        weights += weight;
      }
      weight *= DECAY;
    }
    this.#relativeError = weights === 0 ? 0 : Math.sqrt(squares / weights);
  }

  #fitLine(): void {
    const n = this.#count;
    // Weighted least squares, the newest batch weighing 1 and each older one DECAY times the next.
    let weights = 0;
    let sumX = 0;
    let sumY = 0;
    let weight = 1;
    for (let age = 0; age < n; age += 1) {
      const i = (this.#next - 1 - age + WINDOW) % WINDOW;
      weights += weight;
      sumX += weight * (this.#cost[i] as number);
      sumY += weight * (this.#ms[i] as number);
      weight *= DECAY;
    }
    const meanX = sumX / weights;
    const meanY = sumY / weights;
    this.#minMs = Number.POSITIVE_INFINITY;
    for (let age = 0; age < Math.min(n, RECENT); age += 1) {
      const i = (this.#next - 1 - age + WINDOW) % WINDOW;
      this.#minMs = Math.min(this.#minMs, this.#ms[i] as number);
    }
    let sxx = 0;
    let sxy = 0;
    let sumXX = 0;
    let sumXY = 0;
    weight = 1;
    for (let age = 0; age < n; age += 1) {
      const i = (this.#next - 1 - age + WINDOW) % WINDOW;
      const x = this.#cost[i] as number;
      const y = this.#ms[i] as number;
      sxx += weight * (x - meanX) * (x - meanX);
      sxy += weight * (x - meanX) * (y - meanY);
      sumXX += weight * x * x;
      sumXY += weight * x * y;
      weight *= DECAY;
    }
    // Costs that barely varied (under 10% around their mean, as when every batch is full) cannot separate fixed and
    // per-cost time: a slope fitted on them is noise, and could predict small batches nearly free.
    if (sxx / weights <= 0.01 * meanX * meanX) {
      // Every batch cost the same (say X, taking T): time cannot be split into fixed and per-cost parts. `predict`
      // then takes the cautious reading, T for any batch up to X (all fixed) and proportional beyond it, so neither
      // a smaller nor a larger batch is predicted cheaper than it may be.
      this.#flatCost = meanX;
      this.#msPerCost = meanX > 0 ? meanY / meanX : 0;
      this.#msPerBatch = meanX > 0 ? 0 : meanY;
      return;
    }
    this.#flatCost = undefined;
    let slope = sxy / sxx;
    let intercept = meanY - slope * meanX;
    if (slope < 0) {
      // Noise made larger batches look faster: time does not grow with cost here, so it is all fixed.
      slope = 0;
      intercept = meanY;
    } else if (intercept < 0) {
      // A negative fixed cost is noise too: fit through the origin.
      slope = sumXY / sumXX;
      intercept = 0;
    }
    this.#msPerCost = slope;
    this.#msPerBatch = intercept;
  }
}
