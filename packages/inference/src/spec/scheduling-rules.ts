// The one table of which text-generation settings mean something where: under continuous or request scheduling,
// on a web replica of a queue (which runs no model) and on a queue worker. The runner spec's checks, the CLI's flag
// checks and help, and serving's option checks read it, so a rule is written once.

/**
 * The ways requests share a text-generation model (`runner.scheduling`), the default first.
 *
 * @example
 * ```ts
 * SCHEDULINGS[0]; // 'continuous'
 * ```
 */
export const SCHEDULINGS = ['continuous', 'request'] as const;

/**
 * How requests share a text-generation model (`runner.scheduling`).
 *
 * @example
 * ```ts
 * const scheduling: Scheduling = 'continuous';
 * ```
 */
export type Scheduling = (typeof SCHEDULINGS)[number];

/**
 * Where a text-generation model is served from: a model in this process under one scheduling, a web replica of a
 * queue (`microbatch serve --queue`: no model, its workers run it), or a queue worker under one scheduling.
 *
 * @example
 * ```ts
 * const mode: RunMode = 'serve continuous';
 * ```
 */
export type RunMode = 'serve continuous' | 'serve request' | 'web replica' | 'worker continuous' | 'worker request';

/**
 * Why a setting has no effect somewhere; `name` spells another setting the caller's way (a CLI flag, an option).
 *
 * @example
 * ```ts
 * const why: RefusalReason = (name) => `a batch holds up to ${name('maxBatchSize')} requests`;
 * ```
 */
export type RefusalReason = (name: (setting: SchedulingSetting) => string) => string;

/**
 * Where one setting has an effect, and why it has none elsewhere.
 *
 * @example
 * ```ts
 * SCHEDULING_RULES.maxSequences.serve; // ['continuous']
 * ```
 */
export interface SchedulingRule {
  /** The `microbatch` flag that sets it. */
  readonly flag: `--${string}`;
  /** The schedulings under which a model served in this process reads it (`microbatch serve`, serving's model). */
  readonly serve: readonly Scheduling[];
  /** The schedulings under which `microbatch worker` reads it; empty: a worker has no such setting. */
  readonly worker: readonly Scheduling[];
  /** Whether a web replica (`serve --queue`), which runs no model, reads it. */
  readonly replica: boolean;
  /**
   * The value continuous scheduling fixes it to (`pool.batcherOptions`), for a setting continuous scheduling does not
   * read: a library caller may pass exactly this value; the CLI refuses the flag.
   */
  readonly continuousValue?: number;
  /** Why it has no effect under a scheduling that does not read it, or on a replica; absent where it does. */
  readonly why: Readonly<Partial<Record<Scheduling | 'replica', RefusalReason>>>;
}

/**
 * The settings the scheduling rules cover, by their library option name (`batchWaitTimeoutMs` is `--batch-wait-ms`,
 * `workers` the pool's `size`; `modelsDir` is the CLI's only; `dtype` is the runner spec's, which ONNX file loads).
 *
 * @example
 * ```ts
 * const setting: SchedulingSetting = 'prefixCacheMb';
 * ```
 */
export type SchedulingSetting =
  | 'modelsDir'
  | 'scheduling'
  | 'maxBatchSize'
  | 'batchWaitTimeoutMs'
  | 'maxSequences'
  | 'maxStepTokens'
  | 'prefixCacheMb'
  | 'maxLatencyMs'
  | 'maxQueueSize'
  | 'workerGraceMs'
  | 'workers'
  | 'threads'
  | 'executionProvider'
  | 'dtype';

const BOTH: readonly Scheduling[] = ['continuous', 'request'];
const CONTINUOUS: readonly Scheduling[] = ['continuous'];
const REQUEST: readonly Scheduling[] = ['request'];

// A replica only sends requests to the queue: what runs the model is set on the workers.
const RUNS_NO_MODEL: RefusalReason = (name) => {
  const names = replicaSettings().map(name);
  return (
    'runs no model, its workers do: set it on `microbatch worker` (a replica honours ' +
    `${names.slice(0, -1).join(', ')} and ${names.at(-1)})`
  );
};
// Continuous scheduling's batches are single requests: the decode loop, not the batcher, batches them.
const BATCH_OF_ONE: RefusalReason = (name) =>
  'the batcher hands the decode loop one request at a time (a batch of 1); bound the loop with ' + name('maxSequences');
// Only a web replica waits for queue workers: a server that is not one runs the model in its own process.
const RUNS_ITS_MODEL: RefusalReason = () =>
  'the server runs its model itself: only a web replica (--queue) waits for workers';
const NO_LOOP: RefusalReason = () => 'there is no decode loop (each batch is one generate call over whole prompts)';

/**
 * Which text-generation setting has an effect where: under `'continuous'` or `'request'` scheduling, on a web replica,
 * on a queue worker. Read it through {@link schedulingRefusal}; the CLI's flag checks and help text, and the runner
 * spec's checks, are built from it.
 *
 * @example
 * ```ts
 * SCHEDULING_RULES.batchWaitTimeoutMs.serve; // ['request']: continuous scheduling fixes it to 0
 * ```
 */
export const SCHEDULING_RULES: Readonly<Record<SchedulingSetting, SchedulingRule>> = {
  modelsDir: {
    flag: '--models-dir',
    serve: BOTH,
    worker: BOTH,
    replica: false,
    why: { replica: () => 'loads no model; --model only names the queue' },
  },
  scheduling: { flag: '--scheduling', serve: BOTH, worker: BOTH, replica: false, why: { replica: RUNS_NO_MODEL } },
  maxBatchSize: {
    flag: '--max-batch-size',
    serve: REQUEST,
    worker: BOTH,
    replica: false,
    continuousValue: 1,
    why: { continuous: BATCH_OF_ONE, replica: RUNS_NO_MODEL },
  },
  batchWaitTimeoutMs: {
    flag: '--batch-wait-ms',
    serve: REQUEST,
    worker: BOTH,
    replica: false,
    continuousValue: 0,
    why: { continuous: BATCH_OF_ONE, replica: RUNS_NO_MODEL },
  },
  maxSequences: {
    flag: '--max-sequences',
    serve: CONTINUOUS,
    worker: CONTINUOUS,
    replica: false,
    why: {
      request: (name) => `there is no decode loop; a batch holds up to ${name('maxBatchSize')} requests`,
      replica: RUNS_NO_MODEL,
    },
  },
  maxStepTokens: {
    flag: '--max-step-tokens',
    serve: CONTINUOUS,
    worker: CONTINUOUS,
    replica: false,
    why: { request: NO_LOOP, replica: RUNS_NO_MODEL },
  },
  prefixCacheMb: {
    flag: '--prefix-cache-mb',
    serve: CONTINUOUS,
    worker: CONTINUOUS,
    replica: false,
    why: { request: NO_LOOP, replica: RUNS_NO_MODEL },
  },
  maxLatencyMs: { flag: '--max-latency-ms', serve: BOTH, worker: [], replica: true, why: {} },
  maxQueueSize: { flag: '--max-queue-size', serve: BOTH, worker: [], replica: true, why: {} },
  workerGraceMs: {
    flag: '--worker-grace-ms',
    serve: [],
    worker: [],
    replica: true,
    why: { continuous: RUNS_ITS_MODEL, request: RUNS_ITS_MODEL },
  },
  workers: { flag: '--workers', serve: BOTH, worker: BOTH, replica: false, why: { replica: RUNS_NO_MODEL } },
  threads: { flag: '--threads', serve: BOTH, worker: BOTH, replica: false, why: { replica: RUNS_NO_MODEL } },
  executionProvider: {
    flag: '--execution-provider',
    serve: BOTH,
    worker: BOTH,
    replica: false,
    why: { replica: RUNS_NO_MODEL },
  },
  // Which of the folder's ONNX files loads: read where a model loads (a server, a worker), never on a replica.
  dtype: { flag: '--dtype', serve: BOTH, worker: BOTH, replica: false, why: { replica: RUNS_NO_MODEL } },
};

/** The settings a web replica reads, in the table's order. */
function replicaSettings(): SchedulingSetting[] {
  return settingsWhere((rule) => rule.replica);
}

/**
 * The settings whose rule passes `test`, in the table's order.
 *
 * @example
 * ```ts
 * settingsWhere((rule) => !rule.serve.includes('request')); // ['maxSequences', 'maxStepTokens', 'prefixCacheMb']
 * ```
 */
export function settingsWhere(test: (rule: SchedulingRule) => boolean): SchedulingSetting[] {
  return (Object.keys(SCHEDULING_RULES) as SchedulingSetting[]).filter((setting) => test(SCHEDULING_RULES[setting]));
}

/**
 * Whether `setting` has an effect in `mode`. A worker mode for a setting the worker does not have is `false`.
 *
 * @example
 * ```ts
 * appliesIn('maxSequences', 'serve request'); // false
 * ```
 */
export function appliesIn(setting: SchedulingSetting, mode: RunMode): boolean {
  const rule = SCHEDULING_RULES[setting];
  if (mode === 'web replica') return rule.replica;
  const [place, scheduling] = mode.split(' ') as ['serve' | 'worker', Scheduling];
  return rule[place].includes(scheduling);
}

/**
 * Why `setting` has no effect in `mode`, or `undefined` where it has one. The reason follows "with `'request'`
 * scheduling" or "a web replica" in the caller's words; `name` spells the other settings it mentions.
 *
 * @example
 * ```ts
 * schedulingRefusal('maxSequences', 'serve request', (setting) => SCHEDULING_RULES[setting].flag);
 * // 'there is no decode loop; a batch holds up to --max-batch-size requests'
 * ```
 */
export function schedulingRefusal(
  setting: SchedulingSetting,
  mode: RunMode,
  name: (setting: SchedulingSetting) => string,
): string | undefined {
  if (appliesIn(setting, mode)) return undefined;
  const { why } = SCHEDULING_RULES[setting];
  const reason = mode === 'web replica' ? why.replica : why[mode.split(' ')[1] as Scheduling];
  if (reason === undefined) {
    // A setting a worker has no flag for: commander refuses it before any rule is read.
    throw new TypeError(`No scheduling rule says why \`${setting}\` has no effect in ${mode}`);
  }
  return reason(name);
}

/**
 * The one scheduling fallback: a text-generation graph without a KV cache (no `past_key_values.*` inputs) cannot be
 * driven by the continuous decode loop, which feeds each step's keys and values back into the graph. Where the user
 * left the scheduling out, such a model runs under `to` scheduling (logged); where they asked for `from`, start-up
 * fails saying why ({@link schedulingForGraph}).
 *
 * @example
 * ```ts
 * NO_KV_CACHE_FALLBACK.to; // 'request'
 * ```
 */
export const NO_KV_CACHE_FALLBACK = {
  from: 'continuous',
  to: 'request',
  why: (file: string) =>
    `${file} has no KV cache (no past_key_values.* inputs): the continuous decode loop feeds each step's keys and ` +
    'values back into the graph',
} as const satisfies { from: Scheduling; to: Scheduling; why: (file: string) => string };

/**
 * The scheduling a text-generation model runs under, and the line to log when it is not the one the user would
 * expect.
 *
 * @example
 * ```ts
 * const choice: SchedulingChoice = { scheduling: 'request', fallback: 'onnx/model.onnx has no KV cache ...' };
 * ```
 */
export interface SchedulingChoice {
  readonly scheduling: Scheduling;
  /** Set when the scheduling was left out and the model's graph made it `'request'`: why, to be logged. */
  readonly fallback?: string;
}

/**
 * The scheduling of a text-generation model: `requested` where the graph allows it (or the default, continuous, where
 * nothing was requested and the graph has a KV cache); {@link NO_KV_CACHE_FALLBACK}'s `to` where nothing was requested
 * and the graph has none. Throws an `Error` when continuous was requested for a graph without a KV cache, and when a
 * setting in `given` has no effect under the fallback (a user's setting is never dropped in silence); `name` spells
 * settings the caller's way, `place` is where the model runs.
 *
 * @example
 * ```ts
 * schedulingForGraph(undefined, { file: 'onnx/model.onnx', kvCache: false }, [], 'serve', (s) => SCHEDULING_RULES[s].flag);
 * // { scheduling: 'request', fallback: 'onnx/model.onnx has no KV cache ...' }
 * ```
 */
export function schedulingForGraph(
  requested: Scheduling | undefined,
  graph: { readonly file: string; readonly kvCache: boolean },
  given: readonly SchedulingSetting[],
  place: 'serve' | 'worker',
  name: (setting: SchedulingSetting) => string,
): SchedulingChoice {
  if (graph.kvCache) return { scheduling: requested ?? SCHEDULINGS[0] };
  const { from, to, why } = NO_KV_CACHE_FALLBACK;
  if (requested === from) {
    throw new Error(
      `${from} scheduling cannot run this model: ${why(graph.file)}. Use ${to} scheduling ` +
        `(${name('scheduling')} ${to}, or leave ${name('scheduling')} out)`,
    );
  }
  if (requested !== undefined) return { scheduling: requested };
  for (const setting of given) {
    const refusal = schedulingRefusal(setting, `${place} ${to}`, name);
    if (refusal === undefined) continue;
    throw new Error(
      `${name(setting)} has no effect for this model: ${why(graph.file)}, so it runs under ${to} scheduling, where ` +
        refusal,
    );
  }
  return { scheduling: to, fallback: `${why(graph.file)}; serving it with ${to} scheduling` };
}
