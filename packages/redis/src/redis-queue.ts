import { randomBytes } from 'node:crypto';
import { BatchError, ErrorCode } from '@microbatch/core';
import type { Batcher, CallOptions, CloseOptions, FleetLoad, StreamingBatcher } from '@microbatch/core';
import {
  EMPTY_SNAPSHOT,
  WaiterRegistry,
  WorkerGrace,
  type QueueBackend,
  type QueueBatcher,
  type QueueBatcherStats,
  type QueueSnapshot,
  type ReplyEntry,
  StateReporter,
  type Submission,
  FleetView,
  describeError as describe,
  emitStatus,
  fleetKey,
  mergeLoads,
  namedBatcher,
  parseWorkerSettings,
  requestFields,
  routeReply,
  toReplyEntry,
  traceItem,
  unavailable,
} from '@microbatch/transport';
import { type Connection, closeConnection, openConnection } from './connection.js';
import { type QueueKeys, queueKeys } from './keys.js';
import { type RedisQueueOptions, resolveQueueOptions } from './options.js';
import { ENQUEUE, PROBE, REQUEST_FIELD_COUNT, runScript, scriptSha } from './scripts.js';
import { streamEntries } from './stream-entries.js';

const ENQUEUE_SHA = scriptSha(ENQUEUE);
const PROBE_SHA = scriptSha(PROBE);

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
  batcher<I, O>(name: string): RedisBatcher<I, O>;
  /** A streaming batcher whose items run on the workers' `streamingHandlers[name]`; values arrive as produced. */
  streamingBatcher<I, O>(name: string): RedisStreamingBatcher<I, O>;
  /** Whether both connections (commands, replies) are up now. */
  isConnected(): boolean;
  /** How many workers heartbeated recently; 0 if Redis cannot be asked. */
  workersAlive(): Promise<number>;
  /** The whole queue as last sampled (every 50 ms at most): waiting, running, live workers. */
  snapshot(): QueueSnapshot;
  /**
   * The fleet's load now, for latency-aware and fair admission across replicas (serving's `ReplicaAdmission`):
   * the queue's waiting items, each live worker's latency fit and running batches, and the items in flight of each
   * fairness key across every replica (from the last sample, plus what this replica did since).
   */
  load(): FleetLoad;
  /** The longest deadline an item can have here (`timeoutMs`): an HTTP server's timeouts must be longer. */
  readonly timeoutMs: number;
  /** Connected and at least one worker alive: for readiness probes. */
  isReady(): Promise<boolean>;
  /** Closes every batcher (new calls `CLOSED`), waits for the items in flight, then closes the connections. */
  close(options?: CloseOptions): Promise<void>;
}

/** A core `Batcher` whose `stats()` also samples the shared queue (see {@link QueueBatcherStats}). */
export interface RedisBatcher<I, O> extends Batcher<I, O> {
  stats(): QueueBatcherStats;
}
/** A core `StreamingBatcher` whose `stats()` also samples the shared queue (see {@link QueueBatcherStats}). */
export interface RedisStreamingBatcher<I, O> extends StreamingBatcher<I, O> {
  stats(): QueueBatcherStats;
}

const MAX_REPLIES_PER_READ = 1_000;
const REPLY_BLOCK_MS = 1_000;
/**
 * The most ms between two samples of the queue: admission across replicas reads the other replicas' work from
 * them, so a replica sees the others' arrivals this late at most (its own, at once).
 */
const SAMPLE_MS = 50;

/**
 * Connects a web replica to a Redis queue: see {@link RedisQueue}. Returns at once; while Redis is unreachable, or
 * no worker is alive, calls are refused with 503 `UNAVAILABLE` at once and items waiting for answers fail the same
 * way, and both connections reconnect on their own.
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
    snapshot: () => core.snapshot,
    load: () => core.load(),
    timeoutMs: settings.timeoutMs,
    isReady: async () => core.connected && (await core.workersAlive()) > 0,
    close: (closeOptions) => core.close(closeOptions),
  };
}

type Settings = ReturnType<typeof resolveQueueOptions>;

class QueueCore implements QueueBackend {
  readonly brokerName = 'Redis';
  readonly workerFactory = 'createRedisWorker';
  readonly ready: Promise<void>;
  readonly #settings: Settings;
  readonly #keys: QueueKeys;
  readonly #replyKey: string;
  readonly #commands: Connection;
  readonly #replies: Connection;
  readonly #batchers = new Map<string, QueueBatcher>();
  #lastReplyId = '0-0';
  #stopped = false;
  #commandsUp = false;
  #repliesUp = false;
  #readLoop: Promise<void> | undefined;
  #wakeReader: (() => void) | undefined;
  #snapshot: QueueSnapshot = EMPTY_SNAPSHOT;
  readonly #probeTimer: NodeJS.Timeout;
  readonly #broker = new StateReporter();
  readonly #fleet = new FleetView();
  readonly #waiters = new WaiterRegistry(this.#fleet, (entryId) => this.#delete(entryId));
  readonly #workers: WorkerGrace;

  constructor(settings: Settings, keys: QueueKeys, replicaId: string) {
    this.#settings = settings;
    this.#keys = keys;
    this.#replyKey = keys.reply(replicaId);
    this.#workers = new WorkerGrace({
      graceMs: settings.workerGraceMs,
      queue: settings.queue,
      onStatus: settings.onStatus,
      waiters: this.#waiters,
      noWorker: () =>
        unavailable(
          `No worker has served the queue \`${settings.queue}\` for ${settings.heartbeatTtlMs} ms` +
            (settings.workerGraceMs > 0 ? ` and none came back within ${settings.workerGraceMs} ms; retry` : '; retry'),
          settings.retryAfterSeconds,
        ),
    });
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
        this.#onConnection();
      },
      onDown: (error) => {
        this.#commandsUp = false;
        this.#onConnection(error);
      },
    });
    // The reply stream's own connection: its blocking read would hold up every other command.
    this.#replies = openConnection(url, `microbatch:replies:${replicaId}`, commandTimeoutMs + REPLY_BLOCK_MS, {
      onReady: () => {
        this.#repliesUp = true;
        readyReplies();
        this.#wakeReader?.();
        this.#onConnection();
      },
      onDown: (error) => {
        this.#repliesUp = false;
        this.#onConnection(error);
        // Their answers can no longer reach us (and a restarted Redis lost their entries): fail them now.
        this.#waiters.failAll(
          unavailable('Lost the connection to the queue (Redis); retry', this.#settings.retryAfterSeconds),
        );
      },
    });
    this.#readLoop = this.#readReplies();
    // Heartbeats this replica (workers drop the entries of a replica whose heartbeat expired) and samples the queue.
    this.#probeTimer = setInterval(
      () => void this.#probe(),
      Math.max(1, Math.min(SAMPLE_MS, settings.heartbeatTtlMs / 3)),
    );
    this.#probeTimer.unref();
  }

  get snapshot(): QueueSnapshot {
    return this.#snapshot;
  }

  load(): FleetLoad {
    return this.#fleet.load(this.#ownWaiting());
  }

  /** This replica's items not yet started by a worker. */
  #ownWaiting(): number {
    let waiting = 0;
    for (const batcher of this.#batchers.values()) waiting += batcher.tally.waiting;
    return waiting;
  }

  /** Reports Redis lost or back once per change (down as soon as either connection is, up once both are). */
  #onConnection(error?: unknown): void {
    const connected = this.connected;
    if (!connected && this.#broker.state === undefined) return; // still connecting: not "down"
    if (!this.#broker.set(connected)) return;
    const queue = this.#settings.queue;
    emitStatus(
      this.#settings.onStatus,
      connected ? { event: 'broker-up', queue } : { event: 'broker-down', queue, error: describe(error) },
    );
    if (connected) void this.#probe();
  }

  /**
   * One round trip: records this replica's heartbeat, forgets workers silent for `heartbeatTtlMs`, and samples the
   * queue. When no worker has been alive for `workerGraceMs`, nobody will answer the items waiting: they are
   * answered 503 then (a replacement within the grace serves them).
   */
  async #probe(): Promise<void> {
    if (this.#stopped || !this.#commandsUp) return;
    let reply: unknown;
    const ownWaiting = this.#ownWaiting();
    const before = Date.now();
    try {
      reply = await runScript((args) => this.#commands.sendCommand(args), PROBE, PROBE_SHA, this.#probeKeys(), [
        String(this.#settings.heartbeatTtlMs),
        this.#repliesUp ? this.#replyKey : '',
        this.#keys.group,
        this.#fleet.published(),
      ]);
    } catch {
      return; // The connection's own events report Redis down.
    }
    const [alive, length, pending, redisNow, loadCount, ...rest] = reply as [
      number,
      number,
      number,
      number,
      number,
      ...string[],
    ];
    const loads = rest.slice(0, Number(loadCount)).map(String);
    const workerSettings = rest.slice(Number(loadCount)).map(String).flatMap(parseWorkerSettings);
    const queued = Math.max(0, Number(length) - Number(pending));
    this.#snapshot = {
      waiting: queued,
      running: Number(pending),
      workersAlive: Number(alive),
      workerSettings,
      sampledAt: Date.now(),
    };
    this.#fleet.sampled({
      waiting: queued,
      ownWaiting,
      workers: workerSettings,
      others: mergeLoads(loads),
      clockOffsetMs: Number(redisNow) - (before + Date.now()) / 2,
    });
    // Reports workers gone or back; once none has been alive for `workerGraceMs`, answers the items waiting 503.
    this.#workers.observe(Number(alive));
  }

  #probeKeys(): string[] {
    const keys = this.#keys;
    return [keys.workers, keys.workerSettings, keys.requests, keys.replicas, keys.replicaLoads];
  }

  get connected(): boolean {
    return this.#commandsUp && this.#repliesUp;
  }

  batcher(name: string, streaming: boolean): QueueBatcher {
    return namedBatcher(this.#batchers, name, streaming, this);
  }

  async workersAlive(): Promise<number> {
    if (!this.#commandsUp) return 0;
    try {
      const [alive] = (await runScript(
        (args) => this.#commands.sendCommand(args),
        PROBE,
        PROBE_SHA,
        this.#probeKeys(),
        [String(this.#settings.heartbeatTtlMs), '', this.#keys.group, ''],
      )) as [number];
      return Number(alive);
    } catch {
      return 0;
    }
  }

  /**
   * Sends a group of items (one for a single call): checked here, then admitted together or refused together by
   * one script on Redis (a live worker, room for all of them under the global bound); each settles with its answer.
   */
  submit(owner: QueueBatcher, items: readonly Submission[], call: CallOptions): void {
    const refuse = (error: unknown): void => {
      for (const item of items) {
        owner.count(error);
        item.settle(error);
      }
    };
    const { retryAfterSeconds, maxQueueSize } = this.#settings;
    if (items.length === 0) return;
    if (owner.closed)
      return refuse(new BatchError(ErrorCode.CLOSED, `The batcher \`${owner.name}\` is closed`, { retryAfterSeconds }));
    if (call.signal?.aborted) return refuse(call.signal.reason);
    if (!this.connected) return refuse(unavailable('The queue (Redis) is unreachable; retry', retryAfterSeconds));
    if (this.#waiters.size + items.length > maxQueueSize) return refuse(this.#queueFull(undefined, items.length));
    let fairnessKey: string | undefined;
    try {
      fairnessKey = fleetKey(call.fairnessKey);
    } catch (error) {
      return refuse(error);
    }
    const payloads: string[] = [];
    for (const { input } of items) {
      try {
        payloads.push(JSON.stringify(input) ?? 'null');
      } catch (error) {
        return refuse(
          new BatchError(
            ErrorCode.INVALID_INPUT,
            'The input cannot be sent to the queue: it is not JSON-serialisable',
            { cause: error },
          ),
        );
      }
    }
    const timeoutMs = Math.min(this.#settings.timeoutMs, call.timeoutMs ?? Number.POSITIVE_INFINITY);
    const waiters = items.map((item) =>
      this.#waiters.register(owner, item, call, timeoutMs, fairnessKey, traceItem(this.#settings.tracer, owner.name)),
    );
    const fields = waiters.flatMap((waiter, index) =>
      requestFields(
        waiter.itemId,
        owner.name,
        this.#replyKey,
        Number.isFinite(timeoutMs) ? timeoutMs : undefined,
        owner.streaming,
        payloads[index] as string,
        waiter.trace.field,
      ),
    );
    if (fields.length !== waiters.length * REQUEST_FIELD_COUNT) throw new Error('Malformed request entry');
    runScript(
      (args) => this.#commands.sendCommand(args),
      ENQUEUE,
      ENQUEUE_SHA,
      [this.#keys.requests, this.#keys.workers, this.#keys.replicas],
      [String(maxQueueSize), String(this.#settings.heartbeatTtlMs), this.#replyKey, String(waiters.length), ...fields],
    )
      .then((reply) => {
        const [added, ...rest] = reply as [number, ...Array<string | number>];
        if (added !== 1) {
          const error = added === -1 ? this.#noWorker() : this.#queueFull(Number(rest[0]), waiters.length);
          for (const waiter of waiters) waiter.settle(error);
          return;
        }
        waiters.forEach((waiter, index) => {
          waiter.entryId = String(rest[index]);
          // Cancelled or expired while the entry was being added: take it back out.
          if (!this.#waiters.has(waiter.itemId)) this.#delete(waiter.entryId);
        });
      })
      .catch((error: unknown) => {
        const refusal = unavailable('The queue (Redis) did not take the item; retry', retryAfterSeconds, error);
        for (const waiter of waiters) waiter.settle(refusal);
      });
  }

  #noWorker(): BatchError {
    return unavailable(
      `No worker is serving the queue \`${this.#settings.queue}\` (none heartbeated within ${this.#settings.heartbeatTtlMs} ms); retry`,
      this.#settings.retryAfterSeconds,
    );
  }

  #delete(entryId: string): void {
    this.#commands.sendCommand(['XDEL', this.#keys.requests, entryId]).catch(() => undefined);
  }

  #queueFull(length?: number, adding = 1): BatchError {
    const size = length === undefined ? `${this.#waiters.size} items of this replica` : `${length} entries`;
    const what = adding === 1 ? '' : `: no room for ${adding} items together`;
    return new BatchError(
      ErrorCode.QUEUE_FULL,
      `The queue is full (${size}, limit ${this.#settings.maxQueueSize})${what}`,
      {
        retryAfterSeconds: this.#settings.retryAfterSeconds,
      },
    );
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
    if (waiter !== undefined) routeReply(waiter, entry, this.#settings.retryAfterSeconds);
  }

  async closeBatcher(batcher: QueueBatcher, options: CloseOptions = {}): Promise<void> {
    await this.#waiters.closeBatcher(batcher, options);
  }

  async close(options: CloseOptions = {}): Promise<void> {
    await Promise.all([...this.#batchers.values()].map((batcher) => batcher.close(options)));
    this.#stopped = true;
    clearInterval(this.#probeTimer);
    await Promise.all([closeConnection(this.#commands), closeConnection(this.#replies, true)]);
    await this.#readLoop;
  }
}
