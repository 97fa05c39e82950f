import { randomBytes } from 'node:crypto';
import {
  type Enqueued,
  ReplicaQueue,
  type TransportBatcher,
  type TransportQueue,
  type TransportStreamingBatcher,
  parseWorkerSettings,
  toReplyEntry,
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
 * all replicas' traffic. `ready` resolves once both connections (commands, replies) are ready for the first time.
 *
 * @example
 * ```ts
 * const queue = createRedisQueue({ url: 'redis://127.0.0.1:6379', queue: 'tinystories-656k' });
 * const generate = queue.batcher<TextGenerationInput, TextGenerationOutput>('generate');
 * app.get('/', batchRoute({ batcher: generate, input: (req) => parse(req.query) }));
 * ```
 */
export interface RedisQueue extends TransportQueue {
  batcher<I, O>(name: string): RedisBatcher<I, O>;
  streamingBatcher<I, O>(name: string): RedisStreamingBatcher<I, O>;
}

/** A core `Batcher` whose `stats()` also samples the shared queue (see `QueueBatcherStats`). */
export type RedisBatcher<I, O> = TransportBatcher<I, O>;
/** A core `StreamingBatcher` whose `stats()` also samples the shared queue (see `QueueBatcherStats`). */
export type RedisStreamingBatcher<I, O> = TransportStreamingBatcher<I, O>;

const MAX_REPLIES_PER_READ = 1_000;
const REPLY_BLOCK_MS = 1_000;

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
  return new RedisReplica(settings, queueKeys(settings.prefix, settings.queue), replicaId).facade(replicaId);
}

type Settings = ReturnType<typeof resolveQueueOptions>;

/** A replica on Redis: items are entries of the queue's stream, answers arrive on this replica's reply stream. */
class RedisReplica extends ReplicaQueue {
  readonly brokerName = 'Redis';
  readonly workerFactory = 'createRedisWorker';
  protected readonly workerSign = 'heartbeated';
  readonly ready: Promise<void>;
  readonly #settings: Settings;
  readonly #keys: QueueKeys;
  readonly #commands: Connection;
  readonly #replies: Connection;
  #lastReplyId = '0-0';
  #commandsUp = false;
  #repliesUp = false;
  #readLoop: Promise<void> | undefined;
  #wakeReader: (() => void) | undefined;

  constructor(settings: Settings, keys: QueueKeys, replicaId: string) {
    super(settings, keys.reply(replicaId));
    this.#settings = settings;
    this.#keys = keys;
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
        this.connectionLost();
      },
    });
    this.#readLoop = this.#readReplies();
  }

  /** Reports Redis lost or back once per change (down as soon as either connection is, up once both are). */
  #onConnection(error?: unknown): void {
    if (!this.connected && !this.brokerKnown) return; // still connecting: not "down"
    this.brokerChanged(this.connected, error);
  }

  get connected(): boolean {
    return this.#commandsUp && this.#repliesUp;
  }

  /** Redis's `ENQUEUE` script checks for a live worker itself, with the bound, in one step. */
  protected knownWorkers(): undefined {
    return undefined;
  }

  /**
   * One round trip: records this replica's heartbeat (workers drop the entries of a replica whose heartbeat
   * expired), forgets workers silent for `heartbeatTtlMs`, and samples the queue.
   */
  protected async probe(ownWaiting: number): Promise<void> {
    if (!this.#commandsUp) return;
    let reply: unknown;
    const before = Date.now();
    try {
      reply = await runScript((args) => this.#commands.sendCommand(args), PROBE, PROBE_SHA, this.#probeKeys(), [
        String(this.#settings.heartbeatTtlMs),
        this.#repliesUp ? this.replyAddress : '',
        this.#keys.group,
        this.fleet.published(),
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
    this.sampled({
      waiting: Math.max(0, Number(length) - Number(pending)),
      running: Number(pending),
      workersAlive: Number(alive),
      workerSettings: rest.slice(Number(loadCount)).map(String).flatMap(parseWorkerSettings),
      loads: rest.slice(0, Number(loadCount)).map(String),
      ownWaiting,
      clockOffsetMs: Number(redisNow) - (before + Date.now()) / 2,
    });
    this.observeWorkers(Number(alive));
  }

  #probeKeys(): string[] {
    const keys = this.#keys;
    return [keys.workers, keys.workerSettings, keys.requests, keys.replicas, keys.replicaLoads];
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

  /** One script admits the group or refuses it: a live worker, and room for all of it under the global bound. */
  protected async enqueue(requests: ReadonlyArray<readonly string[]>): Promise<Enqueued> {
    const fields = requests.flat();
    if (fields.length !== requests.length * REQUEST_FIELD_COUNT) throw new Error('Malformed request entry');
    const { maxQueueSize, heartbeatTtlMs } = this.#settings;
    const reply = await runScript(
      (args) => this.#commands.sendCommand(args),
      ENQUEUE,
      ENQUEUE_SHA,
      [this.#keys.requests, this.#keys.workers, this.#keys.replicas],
      [String(maxQueueSize), String(heartbeatTtlMs), this.replyAddress, String(requests.length), ...fields],
    );
    const [added, ...rest] = reply as [number, ...Array<string | number>];
    if (added === 1) return { entryIds: rest.map(String) };
    return { entryIds: [], refused: added === -1 ? { noWorker: true } : { full: `${Number(rest[0])} entries` } };
  }

  protected remove(entryId: string): void {
    this.#commands.sendCommand(['XDEL', this.#keys.requests, entryId]).catch(() => undefined);
  }

  async #readReplies(): Promise<void> {
    while (!this.stopped) {
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
          this.replyAddress,
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
        if (entry !== undefined) this.onReply(entry);
      }
      // Read once, never again: the stream holds only what this replica has not read yet.
      this.#commands.sendCommand(['XDEL', this.replyAddress, ...entries.map(([id]) => id)]).catch(() => undefined);
    }
  }

  protected async disconnect(): Promise<void> {
    await Promise.all([closeConnection(this.#commands), closeConnection(this.#replies, true)]);
    await this.#readLoop;
  }
}
