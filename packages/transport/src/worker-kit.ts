// What every transport's worker shares besides running a batch: checking its handlers and log option, and its log.
import type { BatchHandler, StreamingBatchHandler } from '@microbatch/core';
import { checkString, fail, isObjectLike } from '@microbatch/core/util';
import type { StatusListener } from './status.js';
import type { HandlerSettings } from './worker-batch.js';

/** A pino-compatible logger: what a worker's `log` option may be besides a line printer. */
export interface WorkerLogger {
  info(fields: object, message?: string): void;
  warn(fields: object, message?: string): void;
  error(fields: object, message?: string): void;
}

/** Where a worker reports: a line printer, a pino-compatible logger, or `false` (off). */
export type WorkerLog = ((line: string) => void) | WorkerLogger | false;

/** The options every transport's worker takes to run batches. */
export interface WorkerHandlerOptions<I = unknown, O = unknown, C = unknown> {
  /** The batch handlers by name: a replica's `queue.batcher(name)` reaches `handlers[name]`. */
  readonly handlers?: Readonly<Record<string, BatchHandler<I, O>>>;
  /** The streaming batch handlers by name: a replica's `queue.streamingBatcher(name)` reaches them. */
  readonly streamingHandlers?: Readonly<Record<string, StreamingBatchHandler<I, C>>>;
  /**
   * Partitions a pulled batch: only inputs with equal keys share a handler call.
   * @default () => undefined
   */
  readonly batchKey?: (input: I) => unknown;
  /**
   * The worker's id, the first half of its global batch ids (`<id>-<sequence>`).
   * @default a random id
   */
  readonly workerId?: string;
  /**
   * Where one line per batch, and failures, are reported: a line printer, or a pino-compatible logger (pino,
   * Fastify's `app.log`) that gets the facts as fields (`{ worker, batchId, handler, batchSize, replicas,
   * queueWaitMs, maxQueueWaitMs, executionMs, failed }`, "batch"); `false` turns it off.
   * @default console.log
   */
  readonly log?: WorkerLog;
  /** Told once per change when the broker is lost or back (also logged through `log`). */
  readonly onStatus?: StatusListener;
}

/**
 * Checks a worker's handlers, `batchKey`, `workerId`, `onStatus` and `log` (a misuse is a `TypeError` naming the
 * option) and fills in their defaults.
 *
 * @example
 * ```ts
 * const { handlers, streamingHandlers, batchKey, log } = checkWorkerHandlers(options);
 * ```
 */
export function checkWorkerHandlers<I, O, C>(
  options: WorkerHandlerOptions<I, O, C>,
): HandlerSettings & { readonly log: WorkerLog } {
  const handlers = options.handlers ?? {};
  const streamingHandlers = options.streamingHandlers ?? {};
  for (const [group, map] of [
    ['handlers', handlers],
    ['streamingHandlers', streamingHandlers],
  ] as const) {
    if (!isObjectLike(map)) fail(group, 'an object of handlers by name', map);
    for (const [name, handler] of Object.entries(map))
      if (typeof handler !== 'function') fail(`${group}.${name}`, 'a function', handler);
  }
  if (Object.keys(handlers).length + Object.keys(streamingHandlers).length === 0) {
    throw new TypeError('Expected `handlers` or `streamingHandlers` to name at least one handler');
  }
  const both = Object.keys(handlers).filter((name) => Object.hasOwn(streamingHandlers, name));
  if (both.length > 0)
    throw new TypeError(
      `Expected each handler name once, got \`${both[0]}\` in both \`handlers\` and \`streamingHandlers\``,
    );
  if (options.batchKey !== undefined && typeof options.batchKey !== 'function')
    fail('batchKey', 'a function', options.batchKey);
  if (options.workerId !== undefined) checkString('workerId', options.workerId);
  if (options.onStatus !== undefined && typeof options.onStatus !== 'function')
    fail('onStatus', 'a function', options.onStatus);
  const log = options.log ?? console.log;
  const isLogger =
    isObjectLike(log) &&
    ['info', 'warn', 'error'].every((level) => typeof (log as Record<string, unknown>)[level] === 'function');
  if (log !== false && typeof log !== 'function' && !isLogger)
    fail('log', 'a function, a pino-compatible logger or false', log);
  return {
    handlers: handlers as HandlerSettings['handlers'],
    streamingHandlers: streamingHandlers as HandlerSettings['streamingHandlers'],
    batchKey: options.batchKey as HandlerSettings['batchKey'],
    log,
  };
}

/** One line to a line printer, or the fields and a short message to a pino-compatible logger. */
export function writeLog(
  log: WorkerLog,
  workerId: string,
  level: 'info' | 'warn' | 'error',
  line: string,
  fields: Record<string, unknown>,
  message: string,
): void {
  if (log === false) return;
  if (typeof log === 'function') log(line);
  else log[level]({ worker: workerId, ...fields }, message);
}

/** What one finished batch reports. */
export interface BatchReport {
  readonly id: string;
  readonly handler: string;
  readonly size: number;
  /** Distinct web replicas whose items it ran. */
  readonly replicas: number;
  /** Each item's wait in the queue, ms. */
  readonly waits: readonly number[];
  readonly executionMs: number;
  readonly failed: number;
}

/**
 * The one line per batch every worker logs: its size, how many replicas' items it joined, queue wait, execution.
 *
 * @example
 * ```ts
 * logBatch(settings.log, workerId, { id, handler: 'embed', size: 8, replicas: 2, waits, executionMs, failed: 0 });
 * ```
 */
export function logBatch(log: WorkerLog, workerId: string, report: BatchReport): void {
  const { id, handler, size, replicas, waits, executionMs, failed } = report;
  const mean = waits.length === 0 ? 0 : waits.reduce((sum, wait) => sum + wait, 0) / waits.length;
  const maxWait = waits.length === 0 ? 0 : Math.max(...waits);
  writeLog(
    log,
    workerId,
    'info',
    `[worker ${workerId}] batch ${id} (${handler}): size ${size} from ${replicas} replica(s), ` +
      `queue wait ${mean.toFixed(1)} ms (max ${maxWait.toFixed(1)} ms), execution ${executionMs.toFixed(1)} ms` +
      (failed === 0 ? '' : `, ${failed} failed`),
    {
      batchId: id,
      handler,
      batchSize: size,
      replicas,
      queueWaitMs: round1(mean),
      maxQueueWaitMs: round1(maxWait),
      executionMs: round1(executionMs),
      failed,
    },
    'batch',
  );
}

export function round1(value: number): number {
  return Math.round(value * 10) / 10;
}

/** `n entries` / `1 entry`. */
export function plural(count: number): string {
  return `${count} entr${count === 1 ? 'y' : 'ies'}`;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * How a streaming handler's items resume on another worker (a worker's `resumable` option, Redis and NATS): each
 * chunk's token ids are stored as it is sent, and a worker taking the item over runs it with those tokens.
 *
 * @example
 * ```ts
 * const resumable: StreamResume<TextGenerationInput, TextGenerationChunk> = {
 *   withTokens: (input, tokens) => ({ ...input, resume_tokens: tokens }),
 *   tokensOf: (chunk) => chunk.tokens,
 * };
 * ```
 */
export interface StreamResume<I, C> {
  /** The input that continues after `tokens` (every item of a streaming handler gets it; `[]` when fresh). */
  withTokens(input: I, tokens: readonly number[]): I;
  /** The token ids a chunk carries; `undefined` for a chunk that carries none. */
  tokensOf(chunk: C): readonly number[] | undefined;
}

/** Throws the `TypeError` for a `resumable` option that is not a {@link StreamResume}. */
export function checkResumable(resumable: unknown): void {
  if (
    resumable !== undefined &&
    (!isObjectLike(resumable) ||
      typeof (resumable as Partial<StreamResume<unknown, unknown>>).withTokens !== 'function' ||
      typeof (resumable as Partial<StreamResume<unknown, unknown>>).tokensOf !== 'function')
  )
    fail('resumable', 'an object with `withTokens` and `tokensOf` functions', resumable);
}
