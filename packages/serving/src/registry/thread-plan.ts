// One thread budget for every model of a process: each model's worker threads times their onnxruntime threads,
// summed over the models that can be loaded at once, against `maxThreads` (by default the machine's cores).
import { availableParallelism } from 'node:os';

/** One model's share of the budget. */
export interface ThreadDemand {
  readonly name: string;
  /** Worker threads (the pool's size). */
  readonly workers: number;
  /** onnxruntime intra-op threads per worker thread. */
  readonly threads: number;
}

/** What {@link planThreads} found. */
export interface ThreadPlan {
  /** The budget. */
  readonly maxThreads: number;
  /** The threads of the models that can be loaded at once, the largest first (all of them without a cap). */
  readonly peak: number;
  /** Every model's threads (`workers x threads`), by name. */
  readonly models: Readonly<Record<string, number>>;
  /** Whether `peak` fits in `maxThreads`. */
  readonly fits: boolean;
  /** One line for the start-up log, or the refusal: who takes what. */
  readonly summary: string;
}

/**
 * The thread plan of `models` under `maxThreads`, `maxLoadedModels` of them loaded at once at most (the largest
 * ones are counted: the worst case). Nothing is reduced: a caller refuses a plan that does not fit.
 *
 * @example
 * ```ts
 * planThreads([{ name: 'a', workers: 2, threads: 1 }, { name: 'b', workers: 1, threads: 2 }], 4).fits; // true
 * ```
 */
export function planThreads(
  models: readonly ThreadDemand[],
  maxThreads: number = availableParallelism(),
  maxLoadedModels: number = Number.POSITIVE_INFINITY,
): ThreadPlan {
  const each = models.map((model) => ({ name: model.name, total: model.workers * model.threads, model }));
  const largest = [...each].sort((a, b) => b.total - a.total).slice(0, maxLoadedModels);
  const peak = largest.reduce((sum, model) => sum + model.total, 0);
  const fits = peak <= maxThreads;
  const parts = each.map(({ name, total, model }) => `${name} ${model.workers}x${model.threads}=${total}`).join(', ');
  const atOnce =
    Number.isFinite(maxLoadedModels) && maxLoadedModels < models.length
      ? ` (${maxLoadedModels} loaded at once: the largest ${largest.map((model) => model.name).join(', ')})`
      : '';
  const summary = `${peak} of ${maxThreads} threads${atOnce}: ${parts} (workers x threads)`;
  return { maxThreads, peak, models: Object.fromEntries(each.map(({ name, total }) => [name, total])), fits, summary };
}
