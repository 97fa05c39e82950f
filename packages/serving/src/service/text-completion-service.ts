// The text-completion service contract: what the endpoints and apps serve, wherever the model runs (worker threads
// of this process, `createTextCompletionModel`; or workers pulling from a shared queue, `@microbatch/redis`).
import type { Batcher, BatcherBase, StreamingBatcher } from '@microbatch/core';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput } from '@microbatch/inference';
import type { ChatTemplate } from '../openai/chat-template.js';
import type { DecodeLoopSource } from './batch-log.js';

/**
 * What the apps serve: text completion behind batchers, wherever the model runs (worker threads of this process,
 * `createTextCompletionModel`; or workers pulling from a shared queue, `@microbatch/redis`).
 *
 * @example
 * ```ts
 * const { text } = await service.generate(service.validate({ prompt: 'Once upon a time, ', max_tokens: 16 }));
 * ```
 */
export interface TextCompletionService {
  /** The name responses report as `model`. */
  readonly id: string;
  /** Whole completions: one input in, one output out; concurrent calls share a model call. */
  readonly generate: Batcher<TextGenerationInput, TextGenerationOutput>;
  /** Streamed completions: `streamer.stream(input)` yields the caller's chunks as they are decoded. */
  readonly streamer: StreamingBatcher<TextGenerationInput, TextGenerationChunk>;
  /** How `/v1/chat/completions` renders a conversation; the plain role-prefixed fallback when absent. */
  readonly chatTemplate?: ChatTemplate;
  /** Both batchers, for health checks and metrics. */
  readonly batchers: readonly BatcherBase[];
  /**
   * Continuous scheduling in this process: the decode loops, whose activity the log and the metrics report (the
   * batchers then hand the loops one request at a time, so their batch sizes are 1 by construction).
   */
  readonly decodeLoop?: DecodeLoopSource;
  /** Resolves once the service can serve; rejects (naming the reason) if it never will. */
  readonly ready: Promise<void>;
  /** Whether the service can serve now, for readiness probes. */
  readonly isReady: () => boolean | PromiseLike<boolean>;
  /**
   * Checks an untrusted `{ prompt, max_tokens, temperature, top_p, stop }` body; throws `BatchError('INVALID_INPUT')`
   * naming the field.
   */
  readonly validate: (body: unknown) => TextGenerationInput;
  /**
   * {@link validate}'s checks with the prompt's tokens counted off the main thread (a tokenizer thread): synchronous
   * where no count is needed, else a promise rejecting with the same errors. The endpoints use it where present, so
   * a flood of long prompts never holds the routes and probes; absent, they call `validate`.
   */
  readonly validateOffThread?: (body: unknown) => TextGenerationInput | PromiseLike<TextGenerationInput>;
  /** Refuses new calls (`CLOSED`, 503) and resolves once queued and running batches have finished. */
  readonly drain: () => Promise<void>;
  /** {@link drain}, then releases what the service holds (workers, connections). */
  readonly close: () => Promise<void>;
}
