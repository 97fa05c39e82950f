import {
  BrokerWorker,
  type BatchWriter,
  type OpenedBatch,
  type Refusal,
  type RequestEntry,
  type StreamProgress,
  type TransportWorker,
  type WorkerStats,
  describeError,
  plural,
  sleep,
  toRequestEntry,
} from '@microbatch/transport';
import { type Connection, closeConnection, isConnectionError, openConnection } from './connection.js';
import { type QueueKeys, queueKeys } from './keys.js';
import { type RedisWorkerOptions, type ResolvedWorkerOptions, resolveWorkerOptions } from './options.js';
import {
  ANSWER_AND_ACK,
  type Answer,
  CHUNK,
  HEARTBEAT,
  SWEEP,
  answerAndAckArgs,
  runScript,
  scriptSha,
} from './scripts.js';
import { type Claim, claimIdle, refreshHeld } from './reclaim.js';
import { entryTimeMs, streamEntries } from './stream-entries.js';

/** Counts since the worker started (see `WorkerStats`). */
export type RedisWorkerStats = WorkerStats;

/** A model worker: pulls batches from a Redis queue and answers them. See `createRedisWorker`. */
export type RedisWorker = TransportWorker<RedisWorkerStats>;

const READ_BLOCK_MS = 500;
const ANSWER_AND_ACK_SHA = scriptSha(ANSWER_AND_ACK);
const SWEEP_SHA = scriptSha(SWEEP);
/** How long the heartbeat keys of a queue whose every worker stopped stay in Redis. */
const KEYS_TTL_MS = 600_000;
/** Entries one sweep looks at: a full 1,024-entry queue is looked through in four heartbeats. */
const SWEEP_COUNT = 256;

/**
 * Starts a model worker on a Redis queue. Whenever one of its `concurrency` slots is free it pulls what is waiting
 * (up to `maxBatchSize` entries, from every web replica) through the queue's consumer group, skips entries whose
 * deadline passed, runs the named handler (entries of different handlers or batch keys go in separate calls),
 * sends each answer to its replica's reply stream, and acknowledges and deletes each entry once answered. It
 * heartbeats, keeps the entries it holds from being taken over, and takes over entries of workers that stopped (after
 * `claimIdleMs`); an entry that was delivered `maxDeliveries` times is answered with an error. While Redis is gone it
 * pulls nothing and its running batches finish (an item whose write failed sends nothing more and is not
 * acknowledged); it reconnects, and recreates the consumer group, when Redis returns.
 *
 * @example
 * ```ts
 * const pool = createWorkerPool({ runner: { task: 'text-generation', model: 'models/tinystories-656k' } });
 * const worker = createRedisWorker({
 *   url: 'redis://127.0.0.1:6379', queue: 'tinystories-656k', maxBatchSize: 16, concurrency: pool.size,
 *   handlers: { generate: pool.handler }, streamingHandlers: { stream: pool.streamingHandler },
 * });
 * ```
 */
export function createRedisWorker<I = unknown, O = unknown, C = unknown>(
  options: RedisWorkerOptions<I, O, C>,
): RedisWorker {
  return new RedisBrokerWorker(resolveWorkerOptions(options)).facade();
}

/** A worker on Redis: pulls through the queue's consumer group, answers into each replica's reply stream. */
class RedisBrokerWorker extends BrokerWorker<ResolvedWorkerOptions> {
  readonly ready: Promise<void>;
  protected readonly brokerName = 'Redis';
  readonly #keys: QueueKeys;
  readonly #reader: Connection;
  readonly #commands: Connection;
  /** Entries this worker holds (running or about to): kept fresh so nobody takes them over. */
  readonly #held = new Set<string>();
  #reclaimed: RequestEntry[] = [];
  #claimCursor = '0-0';
  #sweepCursor = '-';
  #readerUp = false;
  #commandsUp = false;

  constructor(settings: ResolvedWorkerOptions) {
    super(settings);
    this.#keys = queueKeys(settings.prefix, settings.queue);
    const { url, commandTimeoutMs } = settings;
    this.#reader = openConnection(url, `microbatch:worker:${this.workerId}:pull`, commandTimeoutMs + READ_BLOCK_MS, {
      onReady: () => this.#onConnection('reader', true),
      onDown: (error) => this.#onConnection('reader', false, error),
    });
    this.#commands = openConnection(url, `microbatch:worker:${this.workerId}`, commandTimeoutMs, {
      onReady: () => {
        this.#onConnection('commands', true);
        void this.#heartbeat();
      },
      onDown: (error) => this.#onConnection('commands', false, error),
    });
    this.ready = this.#start();
    this.ready.catch(() => undefined);
  }

  async #start(): Promise<void> {
    while (!this.#commands.isReady || !this.#reader.isReady) {
      if (this.stopping) return;
      await sleep(50);
    }
    // Redis may go again before the group exists: try until it is there (or the worker is closed).
    while (
      !(await this.#ensureGroup().then(
        () => true,
        (error: unknown) => {
          if (!isConnectionError(error)) throw error;
          return false;
        },
      ))
    ) {
      if (this.stopping) return;
      await sleep(100);
    }
    await this.#heartbeat();
    const { heartbeatMs, claimIdleMs } = this.settings;
    this.timers.push(
      setInterval(() => {
        void this.#heartbeat();
        void this.#sweep();
      }, heartbeatMs),
    );
    this.timers.push(setInterval(() => void this.#claim(), Math.min(heartbeatMs, claimIdleMs)));
    this.timers.push(setInterval(() => void this.#keepHeld(), Math.max(1, claimIdleMs / 3)));
    this.startPulling();
  }

  protected async stopPulling(): Promise<void> {
    await this.ready.catch(() => undefined);
  }

  protected async disconnect(): Promise<void> {
    await Promise.all([
      this.#commands.sendCommand(['ZREM', this.#keys.workers, this.workerId]),
      this.#commands.sendCommand(['HDEL', this.#keys.workerSettings, this.workerId]),
    ]).catch(() => undefined);
    await Promise.all([closeConnection(this.#reader), closeConnection(this.#commands)]);
  }

  /** Reports Redis lost or back once per change: the worker is up while both its connections are. */
  #onConnection(which: 'reader' | 'commands', up: boolean, error?: unknown): void {
    if (which === 'reader') this.#readerUp = up;
    else this.#commandsUp = up;
    const connected = this.#readerUp && this.#commandsUp;
    // Down as soon as either is; up once both are (a worker still connecting is not "down").
    if (!connected && this.brokerState === undefined) return;
    this.brokerChanged(connected, connected ? undefined : describeError(error, 'unknown failure'));
  }

  protected canPull(): boolean {
    return this.#readerUp && this.#commandsUp;
  }

  async #heartbeat(): Promise<void> {
    try {
      const before = Date.now();
      const { heartbeatMs } = this.settings;
      const serverNow = Number(
        await this.#commands.sendCommand([
          'EVAL',
          HEARTBEAT,
          '2',
          this.#keys.workers,
          this.#keys.workerSettings,
          this.workerId,
          // The keys outlive a worker's absence (PROBE forgets silent workers): a replica with a long
          // `heartbeatTtlMs` still sees the last heartbeat of a worker being replaced.
          String(Math.max(heartbeatMs * 10, KEYS_TTL_MS)),
          this.#state(),
        ]),
      );
      this.clockOffsetMs = serverNow - (before + Date.now()) / 2;
    } catch {
      // Redis is down: the replicas see no heartbeat and report not ready, which is true.
    }
  }

  /** Its settings, latency fit and running batches, with Redis's time (see `WorkerSettings`). */
  #state(): string {
    return JSON.stringify({ ...this.workerState(), at: Math.round(this.now()) });
  }

  protected publishState(): void {
    if (!this.#commandsUp) return;
    this.#commands
      .sendCommand(['HSET', this.#keys.workerSettings, this.workerId, this.#state()])
      .catch(() => undefined);
  }

  /**
   * Drops entries nobody waits for any more, wherever they are in the stream: past their deadline, or queued by a
   * web replica whose heartbeat expired (killed). They would otherwise hold the global bound until pulled.
   */
  async #sweep(): Promise<void> {
    if (this.stopping) return;
    let reply: unknown;
    try {
      reply = await runScript(
        (command) => this.#commands.sendCommand(command),
        SWEEP,
        SWEEP_SHA,
        [this.#keys.requests, this.#keys.replicas],
        [this.#keys.group, this.#sweepCursor, String(SWEEP_COUNT)],
      );
    } catch {
      return; // Redis down: the next heartbeat tries again.
    }
    const [cursor, expired, orphaned] = reply as [string, number, number];
    this.#sweepCursor = String(cursor);
    this.counts.expired += Number(expired);
    this.counts.orphaned += Number(orphaned);
    if (Number(expired) + Number(orphaned) === 0) return;
    this.log(
      'info',
      `[worker ${this.workerId}] dropped ${plural(Number(expired))} past their deadline and ` +
        `${plural(Number(orphaned))} of web replicas that are gone`,
      { expired: Number(expired), orphaned: Number(orphaned) },
      'dropped entries',
    );
  }

  async #ensureGroup(): Promise<void> {
    try {
      // From the start of the stream: entries added before the group existed (a restarted Redis) are served too.
      await this.#commands.sendCommand(['XGROUP', 'CREATE', this.#keys.requests, this.#keys.group, '0', 'MKSTREAM']);
    } catch (error) {
      if (!String((error as Error)?.message).startsWith('BUSYGROUP')) throw error;
    }
  }

  /** Entries taken over come first; then the stream's new entries (waiting up to `blockMs` for the first). */
  protected async pull(count: number, blockMs: number | undefined): Promise<RequestEntry[]> {
    if (blockMs !== undefined && this.#reclaimed.length > 0) return this.#reclaimed.splice(0, count);
    return this.#read(count, blockMs);
  }

  async #read(count: number, blockMs: number | undefined): Promise<RequestEntry[]> {
    const block = blockMs === undefined ? [] : ['BLOCK', String(blockMs)];
    let reply: unknown;
    try {
      reply = await this.#reader.sendCommand([
        'XREADGROUP',
        'GROUP',
        this.#keys.group,
        this.workerId,
        'COUNT',
        String(count),
        ...block,
        'STREAMS',
        this.#keys.requests,
        '>',
      ]);
    } catch (error) {
      if (this.stopping) return [];
      if (String((error as Error)?.message).startsWith('NOGROUP')) {
        // Redis restarted without its data: the group is gone with the stream.
        await this.#ensureGroup().catch(() => undefined);
      } else if (isConnectionError(error)) {
        await sleep(100);
      } else {
        this.log(
          'warn',
          `[worker ${this.workerId}] pull failed: ${(error as Error)?.message}`,
          { error: (error as Error)?.message },
          'pull failed',
        );
        await sleep(100);
      }
      return [];
    }
    const entries: RequestEntry[] = [];
    const invalid: string[] = [];
    for (const [id, fields] of streamEntries(reply)) {
      const entry = toRequestEntry(id, entryTimeMs(id), fields);
      if (entry === undefined) invalid.push(id);
      else entries.push(entry);
    }
    // Held from the moment they are delivered, not only once they run: a pull that waits `batchWaitTimeoutMs` for
    // company keeps them fresh too, so no worker (this one included) takes them over meanwhile.
    for (const entry of entries) this.#held.add(entry.entryId);
    if (invalid.length > 0) void this.#finish(invalid);
    return entries;
  }

  protected hold(entries: readonly RequestEntry[], holding: boolean): void {
    for (const entry of entries) {
      if (holding) this.#held.add(entry.entryId);
      else this.#held.delete(entry.entryId);
    }
  }

  protected drop(entryIds: readonly string[]): void {
    for (const entryId of entryIds) this.#held.delete(entryId);
    void this.#finish(entryIds);
  }

  /** Unanswered entries stay pending and come back. */
  protected async refuse(refusals: readonly Refusal[]): Promise<void> {
    for (const { entry } of refusals) this.#held.delete(entry.entryId);
    await this.#answerAndAck(
      refusals.map(({ entry, fields }) => ({ reply: entry.reply, fields })),
      refusals.map(({ entry }) => entry.entryId),
    ).catch(() => undefined);
  }

  /** Unreadable progress reads as none: the stream starts over, and its replica drops what it already sent. */
  protected async readProgress(entries: readonly RequestEntry[]): Promise<StreamProgress[]> {
    const keys = entries.map((entry) => this.#keys.progress(entry.entryId));
    const values = ((await this.#commands.sendCommand(['MGET', ...keys]).catch(() => [])) as unknown[]) ?? [];
    return entries.map((_, at) => {
      const text = values[at];
      return { tokens: typeof text === 'string' ? text.split(',').filter(Boolean).map(Number) : [] };
    });
  }

  /**
   * Chunks go as they come (a resumable one with its progress, in one script); each item's final answer goes with its
   * acknowledgement, in one script, as soon as the item is done (a stream's `[DONE]` does not wait for the rest of the
   * batch).
   */
  protected openBatch({ entries, resumable }: OpenedBatch): BatchWriter {
    const items = entries.map((): ItemWrites => ({ writes: [], lost: false }));
    const answered: Array<Promise<void>> = [];
    let finals: Array<{ readonly index: number; readonly answer: Answer }> = [];
    // The finals of one burst (a request batch's results, the streams that ended at one step) share a script.
    const flushFinals = (): void => {
      if (finals.length === 0) return;
      answered.push(this.#answerItems(finals, entries, items, resumable));
      finals = [];
    };
    // After a write that failed (Redis lost), the item's later chunks are not sent: one that reached a Redis back
    // with its data would leave a gap in the stream and in its progress record.
    const writable = (index: number): ItemWrites | undefined => {
      const item = items[index] as ItemWrites;
      return item.lost ? undefined : item;
    };
    return {
      start: (notices) =>
        this.#answerAndAck(
          notices.map((fields, index) => ({ reply: (entries[index] as RequestEntry).reply, fields })),
          [],
        ).catch(() => undefined),
      send: (index, fields) => {
        const item = writable(index);
        const entry = entries[index] as RequestEntry;
        if (item !== undefined) write(item, this.#commands.sendCommand(['XADD', entry.reply, '*', ...fields]));
      },
      progress: (index, fields, { tokens }) => {
        const item = writable(index);
        const entry = entries[index] as RequestEntry;
        if (item === undefined) return;
        // `EVAL`, never `EVALSHA` with a retry: a chunk whose `EVALSHA` found no script (a fresh or restarted Redis)
        // would be sent again after the next chunk had found it, and reach the stream after it: a gap the replica
        // fails the stream for (seen on every worker's first stream).
        write(
          item,
          this.#commands.sendCommand([
            'EVAL',
            CHUNK,
            '2',
            entry.reply,
            this.#keys.progress(entry.entryId),
            String(Math.ceil(this.settings.replyTtlMs)),
            tokens.map((id) => `${id},`).join(''),
            ...fields,
          ]),
        );
      },
      final: (index, fields) => {
        if (finals.length === 0) queueMicrotask(flushFinals);
        finals.push({ index, answer: { reply: (entries[index] as RequestEntry).reply, fields } });
      },
      commit: async () => {
        flushFinals();
        await Promise.all(answered);
        return true;
      },
    };
  }

  /**
   * Sends the final answers of items once each item's chunks reached Redis, and acknowledges those items in the
   * same script. An item with a chunk that did not reach Redis (lost) is neither answered nor acknowledged: it stays
   * pending and is run again (resumed from its progress) by whichever worker takes it over.
   */
  async #answerItems(
    finals: ReadonlyArray<{ readonly index: number; readonly answer: Answer }>,
    entries: readonly RequestEntry[],
    items: readonly ItemWrites[],
    resumable: boolean,
  ): Promise<void> {
    const complete = await Promise.all(
      finals.map(async ({ index }) => (await Promise.all((items[index] as ItemWrites).writes)).every(Boolean)),
    );
    const ready = finals.filter((_, at) => complete[at]);
    if (ready.length === 0) return;
    const ids = ready.map(({ index }) => (entries[index] as RequestEntry).entryId);
    try {
      await this.#answerAndAck(
        ready.map(({ answer }) => answer),
        ids,
      );
    } catch {
      return; // Not acknowledged: the entries stay pending and are run again.
    }
    for (const entryId of ids) this.#held.delete(entryId);
    if (resumable) {
      this.#commands.sendCommand(['DEL', ...ids.map((entryId) => this.#keys.progress(entryId))]).catch(() => undefined);
    }
  }

  /** Acknowledges and deletes answered (or skipped) entries. */
  async #finish(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await Promise.all([
      this.#commands.sendCommand(['XACK', this.#keys.requests, this.#keys.group, ...ids]),
      this.#commands.sendCommand(['XDEL', this.#keys.requests, ...ids]),
    ]).catch(() => undefined);
  }

  /** Adds the answers to their reply streams, then acknowledges and deletes the entries: one atomic script. */
  async #answerAndAck(answers: readonly Answer[], ids: readonly string[]): Promise<void> {
    const { keys, args } = answerAndAckArgs(
      this.#keys.requests,
      this.#keys.group,
      this.settings.replyTtlMs,
      answers,
      ids,
    );
    await runScript((command) => this.#commands.sendCommand(command), ANSWER_AND_ACK, ANSWER_AND_ACK_SHA, keys, args);
  }

  /** Resets the idle time of held entries without counting a delivery, so live work is never taken over. */
  async #keepHeld(): Promise<void> {
    if (this.#held.size === 0) return;
    await refreshHeld(this.#commands, this.#keys, this.workerId, [...this.#held]).catch(() => undefined);
  }

  /** Takes over entries that another worker received but has not answered for `claimIdleMs` (it died). */
  async #claim(): Promise<void> {
    if (this.stopping || this.running >= this.settings.concurrency || this.#reclaimed.length > 0) return;
    const { maxBatchSize, claimIdleMs, maxDeliveries } = this.settings;
    let claim: Claim;
    try {
      claim = await claimIdle(this.#commands, this.#keys, this.workerId, {
        claimIdleMs,
        cursor: this.#claimCursor,
        count: maxBatchSize,
        maxDeliveries,
      });
    } catch {
      return; // Redis down, or the group is gone (the pull loop recreates it).
    }
    this.#claimCursor = claim.cursor;
    if (claim.invalid.length > 0) void this.#finish(claim.invalid);
    // `XAUTOCLAIM` takes idle entries whoever holds them, this worker included: one of its own whose refresh came
    // late (a stalled event loop) would otherwise run a second time beside the first, and a stream would get a
    // second producer. Claiming it refreshed it; it keeps running where it is.
    const own = (entry: RequestEntry): boolean => this.#held.has(entry.entryId);
    claim = {
      ...claim,
      entries: claim.entries.filter((entry) => !own(entry)),
      poisoned: claim.poisoned.filter((entry) => !own(entry)),
    };
    if (claim.poisoned.length > 0) await this.giveUp(claim.poisoned);
    if (claim.entries.length === 0) return;
    this.log(
      'warn',
      `[worker ${this.workerId}] took over ${plural(claim.entries.length)} of a worker that stopped answering`,
      { entries: claim.entries.length },
      'took over entries',
    );
    for (const entry of claim.entries) {
      this.#held.add(entry.entryId);
      this.takeOver(entry.entryId);
    }
    this.#reclaimed.push(...claim.entries);
  }
}

/** The chunk writes of one item of a running batch: each resolves to whether it reached Redis. */
interface ItemWrites {
  readonly writes: Array<Promise<boolean>>;
  /** A write failed: the item sends nothing more and is not acknowledged. */
  lost: boolean;
}

/**
 * Records a write, handled where it is made: a failure (Redis lost mid-batch) marks the item lost instead of being an
 * unhandled rejection that would end the worker's process.
 */
function write(item: ItemWrites, sent: Promise<unknown>): void {
  item.writes.push(
    sent.then(
      () => true,
      () => {
        item.lost = true;
        return false;
      },
    ),
  );
}
