// A text-generation model in worker threads of this process behind two batchers (whole and streamed completions),
// the `TextCompletionService` the apps serve; its options and their checks are `text-completion-options.ts`'s.
import { basename, resolve } from 'node:path';
import { createBatcher, createStreamingBatcher } from '@microbatch/core';
import { otelTracer } from '@microbatch/core/otel';
import { checkOneOf, checkString, dropUndefined, fail } from '@microbatch/core/util';
import {
  DTYPE_CHOICES,
  SCHEDULINGS,
  TEXT_GENERATION_DEFAULTS,
  createTextGenerationParser,
  createTextGenerationValidator,
  createTokenizerThreads,
  createWorkerPool,
  decoderScheduling,
  defaultMaxStepTokens,
} from '@microbatch/inference';
import type {
  TextGenerationChunk,
  TextGenerationInput,
  TextGenerationOutput,
  TextGenerationParser,
  TextGenerationValidator,
  WorkerPool,
} from '@microbatch/inference';
import { logBatches, logDecodeLoop, logRefusals, logSchedulingFallback } from './batch-log.js';
import { loadChatTemplate } from '../openai/chat-template.js';
import {
  type TextCompletionModelOptions,
  checkModelFolder,
  checkScheduledOptions,
  givenSettings,
  mergeBatcherOptions,
} from './text-completion-options.js';
import type { TextCompletionService } from './text-completion-service.js';

/**
 * A text-generation model served through batchers on worker threads of this process.
 *
 * @example
 * ```ts
 * const model = createTextCompletionModel({ model: 'models/tinystories-656k' });
 * await model.ready;
 * model.pool.stats().readyWorkers; // 1
 * ```
 */
export interface TextCompletionModel extends TextCompletionService {
  /** The worker threads running the model. */
  readonly pool: WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>;
  /** Whether the model can serve now, for readiness probes. */
  readonly isReady: () => boolean;
}

/**
 * The work one generation weighs, for admission's latency estimate: the tokens it may generate (a decode step each)
 * plus its prompt (about 4 characters a token; the tokenizer may not be loaded yet) at `promptTokensPerStep` tokens
 * a step. Under request scheduling a prompt token weighs what a generated one does (the default, 1); the continuous
 * loop prefills up to its step budget (`maxStepTokens`) a step, so there a 450-token prompt adds about
 * 450 / maxStepTokens steps, and a 5-token one about none.
 *
 * @example
 * ```ts
 * textCompletionCost({ prompt: 'Once upon a time ', max_new_tokens: 16 }); // 21
 * textCompletionCost({ prompt: 'x'.repeat(1800), max_new_tokens: 16 }, 64); // 16 + 450 / 64
 * ```
 */
export function textCompletionCost(input: TextGenerationInput, promptTokensPerStep = 1): number {
  return Math.ceil(input.prompt.length / 4) / promptTokensPerStep + (input.max_new_tokens ?? 16);
}

/**
 * Starts a text-generation model in worker threads behind two batchers (whole and streamed completions) that share
 * its workers, and logs one line per batch (and refusals, at most one line a second). Returns at once: the model
 * loads in the background (`ready`), so a server can listen, and report not-ready, meanwhile. A `model` that is not
 * a transformers.js folder (no `config.json` / `tokenizer.json`) throws an `Error` naming the folder at once; one
 * with no ONNX file for `dtype` rejects `ready`, naming the dtypes it has.
 *
 * @example
 * ```ts
 * const model = createTextCompletionModel({ model: 'models/tinystories-656k', maxSequences: 16, maxLatencyMs: 1500 });
 * await model.ready;
 * ```
 */
export function createTextCompletionModel(options: TextCompletionModelOptions): TextCompletionModel {
  if (typeof options !== 'object' || options === null) fail('options', 'an object', options);
  const model = checkString('model', options.model);
  const { limits } = options;
  const log = options.logger ?? options.log ?? console.log;
  checkModelFolder(model);
  const requested =
    options.scheduling === undefined ? undefined : checkOneOf('scheduling', options.scheduling, SCHEDULINGS);
  const dtype = checkOneOf('dtype', options.dtype ?? 'auto', DTYPE_CHOICES);
  // The scheduling rules' fallback: a decoder graph without a KV cache runs under request scheduling where none was
  // asked for (logged below), and continuous asked for it is an `Error` saying why. Its header is read here, once at
  // start-up; the file a dtype names is loaded (and a missing one named) in the worker.
  const { scheduling, fallback } = decoderScheduling({
    model,
    dtype,
    scheduling: requested,
    given: givenSettings(options),
    name: (setting) => `\`${setting}\``,
  });
  checkScheduledOptions(scheduling, options);
  const pool = createWorkerPool({
    runner: {
      task: 'text-generation',
      model,
      scheduling,
      dtype,
      ...dropUndefined({
        maxSequences: options.maxSequences,
        maxStepTokens: options.maxStepTokens,
        prefixCacheMb: options.prefixCacheMb,
      }),
    },
    ...dropUndefined({ size: options.workers, threads: options.threads, executionProvider: options.executionProvider }),
  });
  // Whole and streamed completions are separate batchers (their handlers differ) on the same workers. The pool says
  // how it wants to be fed (continuous: one request per call, many at once; request: batches split by sampling);
  // the user's settings come on top, and one the pool sets differently is refused, never replaced.
  let batcherOptions: ReturnType<typeof mergeBatcherOptions>;
  try {
    batcherOptions = mergeBatcherOptions(
      {
        maxBatchSize: options.maxBatchSize,
        batchWaitTimeoutMs: options.batchWaitTimeoutMs,
        maxLatencyMs: options.maxLatencyMs,
        maxQueueSize: options.maxQueueSize,
      },
      pool.batcherOptions,
      scheduling,
    );
  } catch (error) {
    // Its worker threads would keep the process alive.
    pool.close().catch(() => undefined);
    throw error;
  }
  // Each batch an OpenTelemetry span linked to the requests it served, once the app registers an SDK.
  const tracer = otelTracer();
  // The continuous loop prefills a prompt over steps of its budget: its tokens weigh that much less than decoding.
  const stepTokens =
    options.maxStepTokens ?? defaultMaxStepTokens(options.maxSequences ?? TEXT_GENERATION_DEFAULTS.maxSequences);
  const cost =
    pool.scheduling === 'continuous'
      ? (input: TextGenerationInput) => textCompletionCost(input, stepTokens)
      : (input: TextGenerationInput) => textCompletionCost(input);
  const generate = createBatcher(pool.handler, {
    ...batcherOptions,
    cost,
    tracer,
    name: 'generate',
  });
  const streamer = createStreamingBatcher(pool.streamingHandler, {
    ...batcherOptions,
    cost,
    tracer,
    name: 'stream',
  });
  const batchers = [generate, streamer] as const;
  const decodeLoop = pool.scheduling === 'continuous' ? pool : undefined;
  let stopLoopLog = (): void => undefined;
  if (log !== false) {
    for (const batcher of batchers) {
      // Continuous: the batchers' batches are single requests; the loop's log says how they were batched.
      if (decodeLoop === undefined) logBatches(batcher, log);
      logRefusals(batcher, log);
    }
    if (decodeLoop !== undefined) stopLoopLog = logDecodeLoop(decodeLoop, log);
    if (fallback !== undefined) logSchedulingFallback(fallback, log);
  }

  // Until the tokenizer is loaded, the cheap parser checks requests; the worker then makes the token check itself.
  const parse: TextGenerationParser = createTextGenerationParser(limits);
  let validate: TextGenerationValidator | undefined;
  const tokenizer = createTextGenerationValidator({ ...limits, model }).then((loaded) => {
    validate = loaded;
  });
  // The endpoints' token counts run here, so that a burst of long prompts (each tokenized before it is refused or
  // admitted) never holds the main thread's routes and probes; `validate` keeps its own count for sync callers.
  const threads = createTokenizerThreads(model);
  const countOnThread = async (prompt: string): Promise<number> =>
    (await threads.encodeAll([prompt])).encodings[0]?.ids.length ?? 0;
  const ready = Promise.all([pool.ready, tokenizer, threads.ready]).then(() => undefined);
  // A model nobody awaits must not crash the process with an unhandled rejection; `ready` still rejects.
  ready.catch(() => undefined);

  const drain = async (): Promise<void> => {
    await Promise.all(batchers.map((batcher) => batcher.close()));
  };
  return {
    id: options.id ?? basename(resolve(model)),
    pool,
    generate,
    streamer,
    batchers,
    ...(decodeLoop === undefined ? {} : { decodeLoop }),
    chatTemplate: loadChatTemplate(model),
    ready,
    isReady: () =>
      pool.isReady && validate !== undefined && threads.isReady() && !batchers.some((batcher) => batcher.closed),
    validate: (body) => (validate ?? parse)(body),
    validateOffThread: (body) =>
      validate !== undefined && threads.isReady() ? validate.withCount(body, countOnThread) : (validate ?? parse)(body),
    drain,
    close: async () => {
      await drain();
      // Every answer is out, and the loop's last steps were reported before them: the log's last line goes now.
      stopLoopLog();
      await Promise.all([pool.close(), threads.close()]);
    },
  };
}
