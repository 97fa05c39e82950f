import { resolve } from 'node:path';
import {
  checkBoolean,
  checkInteger,
  checkNumber,
  checkOneOf,
  checkString,
  definedEntries,
  fail,
} from '@microbatch/core/util';
import type {
  FeatureExtractionRunnerSpec,
  OnnxRunnerSpec,
  ResolvedRunnerSpec,
  RunnerSpec,
  TextClassificationRunnerSpec,
  TextGenerationRunnerSpec,
} from '../contract/runner-specs.js';
import type { TextGenerationChunk, TextGenerationInput } from '../contract/text-generation-types.js';
import { SCHEDULINGS, settingsWhere } from './scheduling-rules.js';
import { DTYPE_CHOICES } from './model-dtypes.js';

/**
 * The stop string the bundled TinyStories model family spells out at the end of every story.
 *
 * @example
 * ```ts
 * createWorkerPool({ runner: { task: 'text-generation', model, stop: [END_OF_STORY, '\n\n'] } });
 * ```
 */
export const END_OF_STORY = '<|end_story|>';

/**
 * Library defaults of the text-generation runner; documented on {@link TextGenerationRunnerSpec}.
 *
 * @example
 * ```ts
 * TEXT_GENERATION_DEFAULTS.maxNewTokens; // 64
 * ```
 */
export const TEXT_GENERATION_DEFAULTS = {
  task: 'text-generation',
  model: '',
  stop: [END_OF_STORY],
  maxNewTokens: 64,
  temperature: 1,
  topP: 1,
  contextLength: 0,
  seed: -1,
  scheduling: 'continuous',
  maxSequences: 32,
  maxStepTokens: 64,
  prefixCacheMb: 64,
  dtype: 'auto',
} as const satisfies Required<TextGenerationRunnerSpec>;

const FEATURE_EXTRACTION_DEFAULTS = {
  task: 'feature-extraction',
  model: '',
  pooling: 'mean',
  normalize: true,
  dtype: 'auto',
} as const satisfies Required<FeatureExtractionRunnerSpec>;

const TEXT_CLASSIFICATION_DEFAULTS = {
  task: 'text-classification',
  model: '',
  topK: 1,
  dtype: 'auto',
} as const satisfies Required<TextClassificationRunnerSpec>;

const ONNX_DEFAULTS = {
  task: 'onnx',
  model: '',
  outputs: [],
  paddingSide: 'right',
  padValues: {},
  attentionMaskInput: 'attention_mask',
  trimOutputs: 'auto',
} as const satisfies Required<OnnxRunnerSpec>;

const TASKS = ['text-generation', 'feature-extraction', 'text-classification', 'onnx'] as const;

/** Checks an array of non-empty strings (stop strings, output names). */
function checkStringArray(name: string, value: unknown): readonly string[] {
  if (!Array.isArray(value) || value.some((item) => typeof item !== 'string' || item.length === 0)) {
    fail(name, 'an array of non-empty strings', value);
  }
  return value as readonly string[];
}

/**
 * The decode loop's step budget (`runner.maxStepTokens`) when none is given: 64 tokens, or twice `maxSequences` when
 * that is more, so a step always has room for its rows and as many prompt tokens.
 *
 * @example
 * ```ts
 * defaultMaxStepTokens(32); // 64
 * defaultMaxStepTokens(48); // 96
 * ```
 */
export function defaultMaxStepTokens(maxSequences: number): number {
  return Math.max(TEXT_GENERATION_DEFAULTS.maxStepTokens, 2 * maxSequences);
}

// The runner's settings that request scheduling does not read, from the one table of scheduling rules.
const LOOP_SETTINGS = settingsWhere((rule) => !rule.serve.includes('request')).filter(
  (setting): setting is 'maxSequences' | 'maxStepTokens' | 'prefixCacheMb' => setting in TEXT_GENERATION_DEFAULTS,
);

/**
 * Checks the continuous loop's settings (refused under request scheduling, where no loop reads them) and resolves the
 * step budget's default.
 */
function checkLoopBudgets(
  resolved: Required<TextGenerationRunnerSpec>,
  given: Partial<TextGenerationRunnerSpec>,
): { maxStepTokens: number; prefixCacheMb: number } {
  if (resolved.scheduling === 'request') {
    for (const key of LOOP_SETTINGS) {
      if (given[key] !== undefined) {
        throw new TypeError(
          `\`runner.${key}\` (${String(given[key])}) bounds the decode loop of 'continuous' scheduling; with ` +
            "`scheduling: 'request'` no loop runs: remove it",
        );
      }
    }
  }
  checkNumber('runner.prefixCacheMb', resolved.prefixCacheMb, 0, Number.MAX_SAFE_INTEGER);
  if (given.maxStepTokens === undefined) {
    return { maxStepTokens: defaultMaxStepTokens(resolved.maxSequences), prefixCacheMb: resolved.prefixCacheMb };
  }
  const { maxStepTokens, maxSequences } = resolved;
  if (!Number.isInteger(maxStepTokens) || maxStepTokens <= maxSequences) {
    throw new TypeError(
      `Expected \`runner.maxStepTokens\` to be an integer > \`runner.maxSequences\` (${maxSequences}: a step decodes ` +
        `every running row and needs room for a prompt token), got \`${String(maxStepTokens)}\` (${typeof maxStepTokens})`,
    );
  }
  return { maxStepTokens, prefixCacheMb: resolved.prefixCacheMb };
}

/** Whether a task's runner can stream per-step output. */
export function taskStreams(task: RunnerSpec['task']): boolean {
  return task === 'text-generation';
}

/**
 * Applies the defaults to a runner spec and validates it once, throwing `TypeError` on misuse.
 *
 * @example
 * ```ts
 * resolveRunnerSpec({ task: 'onnx', model: 'model.onnx' }).paddingSide; // 'right'
 * ```
 */
export function resolveRunnerSpec(spec: RunnerSpec): ResolvedRunnerSpec {
  if (typeof spec !== 'object' || spec === null) fail('runner', 'an object', spec);
  const task = checkOneOf('runner.task', spec.task, TASKS);
  const model = resolve(checkString('runner.model', spec.model));
  const given = definedEntries('runner', spec);
  switch (task) {
    case 'text-generation': {
      const resolved = { ...TEXT_GENERATION_DEFAULTS, ...given, model } as Required<TextGenerationRunnerSpec>;
      checkStringArray('runner.stop', resolved.stop);
      checkInteger('runner.maxNewTokens', resolved.maxNewTokens, 1);
      checkNumber('runner.temperature', resolved.temperature, 0, 2);
      checkNumber('runner.topP', resolved.topP, 0, 1, true);
      checkInteger('runner.contextLength', resolved.contextLength, 0);
      checkInteger('runner.seed', resolved.seed, -1);
      checkOneOf('runner.scheduling', resolved.scheduling, SCHEDULINGS);
      if ('maxBatchSize' in given) {
        throw new TypeError(
          '`runner.maxBatchSize` is now `runner.maxSequences` (the rows of a decode step); the batcher keeps ' +
            `\`maxBatchSize\`, got \`runner.maxBatchSize: ${String(given.maxBatchSize)}\``,
        );
      }
      if ('maxPrefillTokens' in given) {
        throw new TypeError(
          '`runner.maxPrefillTokens` is now `runner.maxStepTokens` (the tokens of a whole loop iteration: its decode ' +
            `rows and its prefill), got \`runner.maxPrefillTokens: ${String(given.maxPrefillTokens)}\``,
        );
      }
      checkInteger('runner.maxSequences', resolved.maxSequences, 1);
      checkOneOf('runner.dtype', resolved.dtype, DTYPE_CHOICES);
      return {
        ...resolved,
        ...checkLoopBudgets(resolved, given as Partial<TextGenerationRunnerSpec>),
        stop: [...resolved.stop],
      };
    }
    case 'feature-extraction': {
      const resolved = { ...FEATURE_EXTRACTION_DEFAULTS, ...given, model } as Required<FeatureExtractionRunnerSpec>;
      checkOneOf('runner.pooling', resolved.pooling, ['mean', 'cls', 'last_token']);
      checkBoolean('runner.normalize', resolved.normalize);
      checkOneOf('runner.dtype', resolved.dtype, DTYPE_CHOICES);
      return resolved;
    }
    case 'text-classification': {
      const resolved = { ...TEXT_CLASSIFICATION_DEFAULTS, ...given, model } as Required<TextClassificationRunnerSpec>;
      checkInteger('runner.topK', resolved.topK, 1);
      checkOneOf('runner.dtype', resolved.dtype, DTYPE_CHOICES);
      return resolved;
    }
    case 'onnx': {
      const resolved = { ...ONNX_DEFAULTS, ...given, model } as Required<OnnxRunnerSpec>;
      checkStringArray('runner.outputs', resolved.outputs);
      checkOneOf('runner.paddingSide', resolved.paddingSide, ['left', 'right']);
      const { padValues, trimOutputs } = resolved;
      if (
        typeof padValues !== 'object' ||
        padValues === null ||
        Object.values(padValues).some((value) => typeof value !== 'number' || !Number.isFinite(value))
      ) {
        fail('runner.padValues', 'an object of finite numbers', padValues);
      }
      checkString('runner.attentionMaskInput', resolved.attentionMaskInput);
      if (trimOutputs !== 'auto') checkStringArray('runner.trimOutputs', trimOutputs);
      return {
        ...resolved,
        outputs: [...resolved.outputs],
        padValues: { ...padValues },
        trimOutputs: trimOutputs === 'auto' ? 'auto' : [...trimOutputs],
      };
    }
  }
}

/**
 * The sampling partition of a text-generation input, for `scheduling: 'request'`: requests share one `generate()`
 * call only when their temperature and top_p agree, because transformers.js applies one generation config to the
 * whole batch. `max_new_tokens` and `stop` are per row and do not partition. Greedy requests (temperature 0) ignore
 * top_p. `pool.batcherOptions` includes it for request scheduling; continuous scheduling samples each row on its
 * own and needs no key. The request runner also partitions by it, so a batcher without it is still correct, only
 * slower (the partitions of one batch run one after the other).
 *
 * @example
 * ```ts
 * const batcher = createBatcher(pool.handler, { batchKey: textGenerationBatchKey, maxConcurrentBatches: pool.size });
 * textGenerationBatchKey({ prompt: 'Once ', temperature: 0, top_p: 0.5 }); // 'greedy'
 * ```
 */
export function textGenerationBatchKey(input: TextGenerationInput): string {
  return samplingKey(input.temperature, input.top_p);
}

/** The partition key of a temperature / top_p pair; `undefined` stands for the runner's default. */
export function samplingKey(temperature: number | undefined, topP: number | undefined): string {
  if (temperature === 0) return 'greedy';
  return `sample:t=${temperature ?? 'default'}:p=${topP ?? 'default'}`;
}

/**
 * How a streamed text generation resumes on another worker (continuous scheduling): the input continues after the
 * token ids already sent (`resume_tokens`), and each chunk carries its ids (`tokens`). `@microbatch/redis`'s worker
 * takes it as `resumable`, so a stream whose worker died finishes on another, each token sent once.
 *
 * @example
 * ```ts
 * createRedisWorker({ ..., streamingHandlers: { stream: pool.streamingHandler }, resumable: textGenerationResume });
 * ```
 */
export const textGenerationResume = {
  withTokens: (input: TextGenerationInput, tokens: readonly number[]): TextGenerationInput => ({
    ...input,
    resume_tokens: tokens,
  }),
  tokensOf: (chunk: TextGenerationChunk): readonly number[] | undefined => chunk.tokens,
};
