import { randomBytes } from 'node:crypto';
import { BatchError, ErrorCode } from '@microbatch/core';
import type { Batcher, CallOptions, CloseOptions, DispatchInfo, StreamingBatcher } from '@microbatch/core';
import { type Connection, closeConnection, openConnection } from './connection.js';
import { type QueueKeys, queueKeys } from './keys.js';
import { type RedisQueueOptions, resolveQueueOptions } from './options.js';
import { type QueueBackend, QueueBatcher } from './queue-batcher.js';
import type { ReplyChannel } from './reply-channel.js';
import { ALIVE_WORKERS, ENQUEUE, runScript, scriptSha } from './scripts.js';

const ENQUEUE_SHA = scriptSha(ENQUEUE);
import {
  type ReplyEntry,
  ReplyKind,
  type WireBatch,
  fromWireError,
  requestFields,
  streamEntries,
  toReplyEntry,
} from './wire.js';

/**
 * A web replica's side of a Redis queue: batchers whose items are entries of the queue's stream, answered by
 * whichever worker pulls them. Every replica's items meet in the same stream, so workers pull batches formed from
 * all replicas' traffic.
 *
 * @example
 * ```ts
 * const queue = createRedisQueue({ url: 'redis://127.0.0.1:6379', queue: 'tinystories-656k' });
 * const generate = queue.batcher<TextGenerationInput, TextGenerationOutput>('generate');
 * app.get('/', batchRoute({ batcher: generate, input: (req) => parse(req.query) }));
 * ```
 */
export interface RedisQueue {
  /** This replica's id (its reply stream's name). */
  readonly replicaId: string;
  /** Resolves once both connections are ready for the first time. */
  readonly ready: Promise<void>;
  /** A batcher whose items run on the workers' `handlers[name]`. */
  batcher<I, O>(name: string): Batcher<I, O>;
  /** A streaming batcher whose items run on the workers' `streamingHandlers[name]`; values arrive as produced. */
  streamingBatcher<I, O>(name: string): StreamingBatcher<I, O>;
  /** Whether both connections (commands, replies) are up now. */
  isConnected(): boolean;
  /** How many workers heartbeated recently; 0 if Redis cannot be asked. */
  workersAlive(): Promise<number>;
  /** Connected and at least one worker alive: for readiness probes. */
  isReady(): Promise<boolean>;
  /** Closes every batcher (new calls `CLOSED`), waits for the items in flight, then closes the connections. */
  close(options?: CloseOptions): Promise<void>;
}

/** One item waiting for its answer. */
interface Waiter {
  readonly itemId: string;
  readonly owner: QueueBatcher;
  entryId: string | undefined;
  /** The batch id of the worker that streams it (the first to send a chunk). */
  producer: string | undefined;
  readonly onDispatch: ((info: DispatchInfo) => void) | undefined;
  dispatched: boolean;
  readonly channel: ReplyChannel<unknown> | undefined;
  settle(error: unknown, value?: unknown): void;
}

const MAX_REPLIES_PER_READ = 1_000;
const REPLY_BLOCK_MS = 1_000;

/**
 * Connects a web replica to a Redis queue: see {@link RedisQueue}. Returns at once; while Redis is unreachable,
 * calls are refused with 503 `UNAVAILABLE` at once and items waiting for answers fail the same way, and both
 * connections reconnect on their own.
 *
 * @example
 * ```ts
 * const queue = createRedisQueue({ url: process.env.REDIS_URL, queue: 'tinystories-656k', maxQueueSize: 512 });
 * await queue.ready;
 * ```
 */
export function createRedisQueue(options: RedisQueueOptions): RedisQueue {
  const settings = resolveQueueOptions(options);
  const replicaId = settings.replicaId ?? randomBytes(6).toString('hex');
  const keys = queueKeys(settings.prefix, settings.queue);
  const core = new QueueCore(settings, keys, replicaId);
  return {
    replicaId,
    ready: core.ready,
    batcher: (name) => core.batcher(name, false).facade as never,
    streamingBatcher: (name) => core.batcher(name, true).facade as never,
    isConnected: () => core.connected,
    workersAlive: () => core.workersAlive(),
    isReady: async () => core.connected && (await core.workersAlive()) > 0,
    close: (closeOptions) => core.close(closeOptions),
  };
}

type Settings = ReturnType<typeof resolveQueueOptions>;

class QueueCore implements QueueBackend {
  readonly ready: Promise<void>;
  readonly #settings: Settings;
  readonly #keys: QueueKeys;
  readonly #replyKey: string;
  readonly #commands: Connection;
  readonly #replies: Connection;
  readonly #waiters = new Map<string, Waiter>();
  readonly #batchers = new Map<string, QueueBatcher>();
  #sequence = 0;
  #lastReplyId = '0-0';
  #stopped = false;
  #commandsUp = false;
  #repliesUp = false;
  #readLoop: Promise<void> | undefined;
  #wakeReader: (() => void) | undefined;

  constructor(settings: Settings, keys: QueueKeys, replicaId: string) {
    this.#settings = settings;
    this.#keys = keys;
    this.#replyKey = keys.reply(replicaId);
    const { url, commandTimeoutMs } = settings;
    let readyCommands!: () => void;
    let readyReplies!: () => void;
    const commandsReady = new Promise<void>((resolve) => (readyCommands = resolve));
    const repliesReady = new Promise<void>((resolve) => (readyReplies = resolve));
    this.ready = Promise.all([commandsReady, repliesReady]).then(() => undefined);
    this.#commands = openConnection(url, `microbatch:replica:${replicaId}`, commandTimeoutMs, {
      onReady: () => {
        this.#commandsUp = true;
        readyCommands();
      },
      onDown: () => {
        this.#commandsUp = false;
      },
    });
    // The reply stream's own connection: its blocking read would hold up every other command.
    this.#replies = openConnection(url, `microbatch:replies:${replicaId}`, commandTimeoutMs + REPLY_BLOCK_MS, {
      onReady: () => {
        this.#repliesUp = true;
        readyReplies();
        this.#wakeReader?.();
      },
      onDown: () => {
        this.#repliesUp = false;
        // Their answers can no longer reach us (and a restarted Redis lost their entries): fail them now.
        this.#failAll(unavailable('Lost the connection to the queue (Redis); retry', this.#settings.retryAfterSeconds));
      },
    });
    this.#readLoop = this.#readReplies();
  }

  get connected(): boolean {
    return this.#commandsUp && this.#repliesUp;
  }

  batcher(name: string, streaming: boolean): QueueBatcher {
    if (typeof name !== 'string' || name === '')
      throw new TypeError(`Expected \`name\` to be a non-empty string, got ${JSON.stringify(name)}`);
    const existing = this.#batchers.get(name);
    if (existing !== undefined) {
      if (existing.streaming !== streaming)
        throw new TypeError(
          `The handler name \`${name}\` is already used by a ${existing.streaming ? 'streaming ' : ''}batcher`,
        );
      return existing;
    }
    const created = new QueueBatcher(name, streaming, this);
    this.#batchers.set(name, created);
    return created;
  }

  async workersAlive(): Promise<number> {
    if (!this.#commandsUp) return 0;
    try {
      const alive = await this.#commands.sendCommand([
        'EVAL',
        ALIVE_WORKERS,
        '1',
        this.#keys.workers,
        String(this.#settings.heartbeatTtlMs),
      ]);
      return Number(alive);
    } catch {
      return 0;
    }
  }

  get pending(): number {
    return this.#waiters.size;
  }

  /** Sends one item; resolves (or streams) with its answer. */
  submit(
    owner: QueueBatcher,
    input: unknown,
    call: CallOptions,
    channel: ReplyChannel<unknown> | undefined,
    settle: (error: unknown, value?: unknown) => void,
  ): void {
    const { signal } = call;
    if (owner.closed)
      return settle(
        new BatchError(ErrorCode.CLOSED, `The batcher \`${owner.name}\` is closed`, {
          retryAfterSeconds: this.#settings.retryAfterSeconds,
        }),
      );
    if (signal?.aborted) return settle(signal.reason);
    if (!this.connected)
      return settle(unavailable('The queue (Redis) is unreachable; retry', this.#settings.retryAfterSeconds));
    if (this.#waiters.size >= this.#settings.maxQueueSize) return settle(this.#queueFull());
    let payload: string;
    try {
      payload = JSON.stringify(input) ?? 'null';
    } catch (error) {
      return settle(
        new BatchError(ErrorCode.INVALID_INPUT, 'The input cannot be sent to the queue: it is not JSON-serialisable', {
          cause: error,
        }),
      );
    }
    const timeoutMs = Math.min(this.#settings.timeoutMs, call.timeoutMs ?? Number.POSITIVE_INFINITY);
    const itemId = (++this.#sequence).toString(36);
    let timer: NodeJS.Timeout | undefined;
    const onAbort = (): void => {
      this.#cancel(waiter, signal?.reason);
    };
    const waiter: Waiter = {
      itemId,
      owner,
      entryId: undefined,
      producer: undefined,
      onDispatch: call.onDispatch,
      dispatched: false,
      channel,
      settle: (error, value) => {
        if (!this.#waiters.delete(itemId)) return;
        if (timer !== undefined) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        owner.count(error);
        settle(error, value);
      },
    };
    // Registered before the entry exists: a fast worker may answer before `XADD`'s own reply reaches us.
    this.#waiters.set(itemId, waiter);
    signal?.addEventListener('abort', onAbort, { once: true });
    if (Number.isFinite(timeoutMs)) {
      timer = setTimeout(() => {
        this.#cancel(
          waiter,
          new BatchError(ErrorCode.DEADLINE_EXCEEDED, `The item was not answered within ${timeoutMs} ms`),
        );
      }, timeoutMs);
    }
    const fields = requestFields(
      itemId,
      owner.name,
      this.#replyKey,
      Number.isFinite(timeoutMs) ? timeoutMs : undefined,
      owner.streaming,
      payload,
    );
    runScript(
      (args) => this.#commands.sendCommand(args),
      ENQUEUE,
      ENQUEUE_SHA,
      [this.#keys.requests],
      [String(this.#settings.maxQueueSize), ...fields],
    )
      .then((reply) => {
        const [added, idOrLength] = reply as [number, string | number];
        if (added !== 1) return waiter.settle(this.#queueFull(Number(idOrLength)));
        waiter.entryId = String(idOrLength);
        // Cancelled or expired while the entry was being added: take it back out.
        if (!this.#waiters.has(itemId)) this.#delete(waiter.entryId);
      })
      .catch((error: unknown) =>
        waiter.settle(
          unavailable('The queue (Redis) did not take the item; retry', this.#settings.retryAfterSeconds, error),
        ),
      );
  }

  #cancel(waiter: Waiter, reason: unknown): void {
    if (!this.#waiters.has(waiter.itemId)) return;
    waiter.settle(reason);
    // Still queued: no worker will take it. Already running: its answer will be ignored.
    if (waiter.entryId !== undefined) this.#delete(waiter.entryId);
  }

  #delete(entryId: string): void {
    this.#commands.sendCommand(['XDEL', this.#keys.requests, entryId]).catch(() => undefined);
  }

  #queueFull(length?: number): BatchError {
    const size = length === undefined ? `${this.#waiters.size} items of this replica` : `${length} entries`;
    return new BatchError(ErrorCode.QUEUE_FULL, `The queue is full (${size}, limit ${this.#settings.maxQueueSize})`, {
      retryAfterSeconds: this.#settings.retryAfterSeconds,
    });
  }

  #failAll(error: BatchError): void {
    for (const waiter of [...this.#waiters.values()]) waiter.settle(error);
  }

  async #readReplies(): Promise<void> {
    while (!this.#stopped) {
      if (!this.#repliesUp) {
        await new Promise<void>((resolve) => {
          this.#wakeReader = resolve;
          setTimeout(resolve, 200).unref();
        });
        continue;
      }
      let reply: unknown;
      try {
        reply = await this.#replies.sendCommand([
          'XREAD',
          'COUNT',
          String(MAX_REPLIES_PER_READ),
          'BLOCK',
          String(REPLY_BLOCK_MS),
          'STREAMS',
          this.#replyKey,
          this.#lastReplyId,
        ]);
      } catch {
        // The connection went down (its waiters failed with it) or is closing; the loop waits for it to return.
        await new Promise((resolve) => setTimeout(resolve, 50).unref());
        continue;
      }
      const entries = streamEntries(reply);
      if (entries.length === 0) continue;
      for (const [entryId, fields] of entries) {
        this.#lastReplyId = entryId;
        const entry = toReplyEntry(entryId, fields);
        if (entry !== undefined) this.#onReply(entry);
      }
      // Read once, never again: the stream holds only what this replica has not read yet.
      this.#commands.sendCommand(['XDEL', this.#replyKey, ...entries.map(([id]) => id)]).catch(() => undefined);
    }
  }

  #onReply(entry: ReplyEntry): void {
    const waiter = this.#waiters.get(entry.itemId);
    // Answered already (first answer wins), cancelled, or expired.
    if (waiter === undefined) return;
    const batch = parseBatch(entry.batch);
    if (entry.kind === ReplyKind.ERROR) return waiter.settle(fromWireError(entry.data));
    if (waiter.channel === undefined) {
      if (entry.kind !== ReplyKind.RESULT) return;
      dispatch(waiter, batch);
      return waiter.settle(undefined, JSON.parse(entry.data));
    }
    if (waiter.producer === undefined) {
      waiter.producer = batch.id;
      dispatch(waiter, batch);
    } else if (waiter.producer !== batch.id) {
      // A second worker took the item over after the first stopped mid-stream: what was sent cannot be unsent.
      return waiter.settle(
        unavailable('The worker streaming this item stopped; retry', this.#settings.retryAfterSeconds),
      );
    }
    if (entry.kind === ReplyKind.CHUNK) waiter.channel.push(JSON.parse(entry.data));
    else if (entry.kind === ReplyKind.END) waiter.settle(undefined);
  }

  async closeBatcher(batcher: QueueBatcher, options: CloseOptions = {}): Promise<void> {
    const mine = () => [...this.#waiters.values()].filter((waiter) => waiter.owner === batcher);
    if (options.force === true) {
      for (const waiter of mine())
        this.#cancel(waiter, new BatchError(ErrorCode.CLOSED, `The batcher \`${batcher.name}\` was closed`));
    }
    // Every waiter settles: by its answer, its deadline, its cancellation, or the connection failing.
    while (mine().length > 0) await new Promise((resolve) => setTimeout(resolve, 20));
  }

  async close(options: CloseOptions = {}): Promise<void> {
    await Promise.all([...this.#batchers.values()].map((batcher) => batcher.close(options)));
    this.#stopped = true;
    await Promise.all([closeConnection(this.#commands), closeConnection(this.#replies, true)]);
    await this.#readLoop;
  }
}

function parseBatch(text: string): WireBatch {
  try {
    const batch = JSON.parse(text) as Partial<WireBatch>;
    return { id: String(batch.id ?? ''), size: Number(batch.size ?? 0), queueMs: Number(batch.queueMs ?? 0) };
  } catch {
    return { id: '', size: 0, queueMs: 0 };
  }
}

function dispatch(waiter: Waiter, batch: WireBatch): void {
  if (waiter.dispatched) return;
  waiter.dispatched = true;
  // A global id (`<worker>-<sequence>`): two replicas' items that shared a worker batch show the same one.
  waiter.onDispatch?.({ batchId: batch.id, batchSize: batch.size, queueTimeMs: batch.queueMs, key: undefined });
}

function unavailable(message: string, retryAfterSeconds: number, cause?: unknown): BatchError {
  return new BatchError(ErrorCode.UNAVAILABLE, message, {
    retryAfterSeconds,
    ...(cause === undefined ? {} : { cause }),
  });
}
