import type { Batcher, FleetLoad, StreamingBatcher } from '@microbatch/core';
import { checkString, fail } from '@microbatch/core/util';
import { createTextGenerationParser } from '@microbatch/inference';
import type {
  TextGenerationChunk,
  TextGenerationInput,
  TextGenerationLimits,
  TextGenerationOutput,
} from '@microbatch/inference';
import { ReplicaAdmission } from './replica-admission.js';
import type { TextCompletionService } from './text-completion-service.js';

/**
 * The handler names a text-completion worker serves on a queue, and web replicas call.
 *
 * @example
 * ```ts
 * createRedisWorker({ ..., handlers: { [TEXT_COMPLETION_HANDLERS.generate]: pool.handler } });
 * ```
 */
export const TEXT_COMPLETION_HANDLERS = { generate: 'generate', stream: 'stream' } as const;

/**
 * A queue that web replicas send items to (for example `@microbatch/redis`'s `createRedisQueue`).
 *
 * @example
 * ```ts
 * const queue: TextCompletionQueue = createRedisQueue({ url, queue: 'tinystories-656k' });
 * ```
 */
export interface TextCompletionQueue {
  readonly ready: Promise<void>;
  batcher<I, O>(name: string): Batcher<I, O>;
  streamingBatcher<I, O>(name: string): StreamingBatcher<I, O>;
  /** Connected, with at least one worker alive. */
  isReady(): boolean | PromiseLike<boolean>;
  /** The fleet's load (workers' latency fits, waiting items, fairness keys in flight): needed for `maxLatencyMs`. */
  load?(): FleetLoad;
  close(): Promise<void>;
}

/**
 * Options of {@link createQueuedTextCompletionService}.
 *
 * @example
 * ```ts
 * createQueuedTextCompletionService(queue, { id: 'tinystories-656k', limits: { maxNewTokens: 128 } });
 * ```
 */
export interface QueuedTextCompletionServiceOptions {
  /** The name responses report as `model`. */
  readonly id: string;
  /** Bounds on prompts and `max_tokens`, checked here before anything is queued; workers count tokens. */
  readonly limits?: TextGenerationLimits;
  /**
   * Refuse at once (503 `OVERLOADED` + `Retry-After`) a request the fleet is predicted to answer later than this
   * many ms, by core's rule over the workers' published latency fits and the shared queue's load, and a client
   * (fairness key) holding its share of the fleet (see `ReplicaAdmission`; the queue must have `load()`). The
   * queue's own bound (`maxQueueSize`) applies as well.
   * @default Infinity (no prediction)
   */
  readonly maxLatencyMs?: number;
}

/**
 * A text-completion service whose model runs elsewhere: on workers behind a queue. The same apps serve it
 * (`@microbatch/serving/express` ...). Requests are checked here before they are queued (the workers count prompt
 * tokens, whose refusals come back as the same 400); readiness means the queue is connected and a worker is alive.
 *
 * @example
 * ```ts
 * const service = createQueuedTextCompletionService(createRedisQueue({ url, queue: 'tinystories-656k' }), { id: 'tinystories-656k' });
 * await startTextCompletionApp(service, { port: 8000, host: '127.0.0.1' });
 * ```
 */
export function createQueuedTextCompletionService(
  queue: TextCompletionQueue,
  options: QueuedTextCompletionServiceOptions,
): TextCompletionService {
  if (typeof queue?.batcher !== 'function' || typeof queue.streamingBatcher !== 'function') {
    fail('queue', 'a queue with `batcher()` and `streamingBatcher()`, such as `createRedisQueue()`', queue);
  }
  checkString('id', options?.id);
  let generate = queue.batcher<TextGenerationInput, TextGenerationOutput>(TEXT_COMPLETION_HANDLERS.generate);
  let streamer = queue.streamingBatcher<TextGenerationInput, TextGenerationChunk>(TEXT_COMPLETION_HANDLERS.stream);
  const { maxLatencyMs } = options;
  if (maxLatencyMs !== undefined && maxLatencyMs !== Number.POSITIVE_INFINITY) {
    if (typeof queue.load !== 'function') {
      throw new TypeError(
        "`maxLatencyMs` needs a queue with `load()` (the fleet's latency fits), such as `createRedisQueue()`",
      );
    }
    // One rule for both: they share the queue and its workers.
    const admission = new ReplicaAdmission(maxLatencyMs, () => queue.load!());
    generate = admission.guard(generate);
    streamer = admission.guard(streamer);
  }
  const batchers = [generate, streamer] as const;
  const drain = async (): Promise<void> => {
    await Promise.all(batchers.map((batcher) => batcher.close()));
  };
  return {
    id: options.id,
    generate,
    streamer,
    batchers,
    ready: queue.ready,
    isReady: () => queue.isReady(),
    validate: createTextGenerationParser(options.limits),
    drain,
    close: async () => {
      await drain();
      await queue.close();
    },
  };
}
