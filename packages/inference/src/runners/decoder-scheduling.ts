// Which scheduling a text-generation model folder runs under, decided on the main thread before any worker starts
// (the pool's batcher options and capacity depend on it): the graph the dtype picks is found by name, its inputs read
// from its header, and the scheduling rules' fallback applied (`spec/scheduling-rules.ts`, `schedulingForGraph`).
import { relative } from 'node:path';
import type { ModelDtype } from '../spec/model-dtypes.js';
import { schedulingForGraph } from '../spec/scheduling-rules.js';
import type { Scheduling, SchedulingChoice, SchedulingSetting } from '../spec/scheduling-rules.js';
import { graphInputNames, hasKvCache } from './graph-inputs.js';
import { GRAPH_NAMES, findModelFile } from './model-files.js';

/**
 * What {@link decoderScheduling} reads.
 *
 * @example
 * ```ts
 * const options: DecoderSchedulingOptions = { model: 'models/gpt2', dtype: 'auto', given: ['maxSequences'] };
 * ```
 */
export interface DecoderSchedulingOptions {
  /** The model folder. */
  readonly model: string;
  /** The runner's dtype, which picks the graph. */
  readonly dtype: 'auto' | ModelDtype;
  /** The scheduling the user asked for; `undefined`: left out (the graph decides). */
  readonly scheduling?: Scheduling | undefined;
  /**
   * The scheduling-rule settings the user gave, refused when the graph's scheduling gives them no effect.
   * @default []
   */
  readonly given?: readonly SchedulingSetting[];
  /**
   * Where the model runs, for the refusals' reasons.
   * @default 'serve'
   */
  readonly place?: 'serve' | 'worker';
  /**
   * How a setting is named in messages (a CLI flag, an option).
   * @default (setting) => `runner.${setting}`
   */
  readonly name?: (setting: SchedulingSetting) => string;
}

/**
 * The scheduling a text-generation model folder runs under (see `schedulingForGraph`): continuous, or request for a
 * decoder graph without a KV cache when the scheduling was left out (`fallback` says why, to be logged). A folder
 * whose graph cannot be found or read keeps the scheduling asked for (or the default): the worker's load then names
 * the problem, as it does for every model.
 *
 * @example
 * ```ts
 * decoderScheduling({ model: 'models/no-kv-gpt', dtype: 'auto' }); // { scheduling: 'request', fallback: '...' }
 * ```
 */
export function decoderScheduling(options: DecoderSchedulingOptions): SchedulingChoice {
  const { model, dtype, scheduling } = options;
  // Request scheduling runs any decoder (transformers.js's generate): nothing to read.
  if (scheduling === 'request') return { scheduling };
  let file: string;
  let inputs: string[];
  try {
    const found = findModelFile(model, dtype, GRAPH_NAMES.decoder);
    file = relative(model, found.path);
    inputs = graphInputNames(found.path);
  } catch {
    return { scheduling: scheduling ?? 'continuous' };
  }
  return schedulingForGraph(
    scheduling,
    { file, kvCache: hasKvCache(inputs) },
    options.given ?? [],
    options.place ?? 'serve',
    options.name ?? ((setting) => `runner.${setting}`),
  );
}
