import { randomBytes } from 'node:crypto';
import { BatchError, ErrorCode } from '@microbatch/core';
import type { BatchContext } from '@microbatch/core';
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
import {
  type NamedHandler,
  type RequestEntry,
  ReplyKind,
  StateReporter,
  type WireBatch,
  describeError,
  emitStatus,
  executeBatch,
  logBatch,
  planBatches,
  plural,
  replyFields,
  WorkerFit,
  wireBatchOf,
  sleep,
  toRequestEntry,
  toWireError,
  traceWorkerBatch,
  writeLog,
} from '@microbatch/transport';
import { type Claim, claimIdle, refreshHeld } from './reclaim.js';
import { entryTimeMs, streamEntries } from './stream-entries.js';

/**
 * Counts since the worker started.
 *
 * @example
 * ```ts
 * const { batches, meanBatchSize } = worker.stats();
 * ```
 */
export interface RedisWorkerStats {
  readonly batches: number;
  readonly items: number;
  readonly meanBatchSize: number;
  /** Batches running now. */
  readonly running: number;
  /** Entries dropped because their deadline had passed while queued (skipped at a pull, or swept). */
  readonly expired: number;
  /** Entries dropped because the web replica that queued them is gone (its heartbeat expired). */
  readonly orphaned: number;
  /** Entries taken over from a worker that stopped answering. */
  readonly reclaimed: number;
  /** Entries answered with an error after `maxDeliveries` deliveries. */
  readonly gaveUp: number;
}

/**
 * A model worker: pulls batches from a Redis queue and answers them. See `createRedisWorker`.
 *
 * @example
 * ```ts
 * const worker = createRedisWorker({ url, queue: 'tinystories-656k', handlers: { generate: pool.handler } });
 * process.once('SIGTERM', () => void worker.close());
 * ```
 */
export interface RedisWorker {
  /** The first half of this worker's batch ids (`<workerId>-<sequence>`). */
  readonly workerId: string;
  /** Resolves once the worker is connected and its consumer group exists. */
  readonly ready: Promise<void>;
  stats(): RedisWorkerStats;
  /** Stops pulling, finishes (and answers) the batches it runs, then disconnects; idempotent. */
  close(): Promise<void>;
}

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
  const worker = new Worker(resolveWorkerOptions(options));
  return {
    workerId: worker.workerId,
    ready: worker.ready,
    stats: () => worker.stats(),
    close: () => worker.close(),
  };
}

type Settings = ResolvedWorkerOptions;

class Worker {
  readonly workerId: string;
  readonly ready: Promise<void>;
  readonly #settings: Settings;
  readonly #keys: QueueKeys;
  readonly #reader: Connection;
  readonly #commands: Connection;
  readonly #timers: NodeJS.Timeout[] = [];
  /** Entries this worker holds (running or about to): kept fresh so nobody takes them over. */
  readonly #held = new Set<string>();
  #reclaimed: RequestEntry[] = [];
  /** Entries taken over from a worker that stopped: a resumable stream of theirs continues from its progress. */
  readonly #takenOver = new Set<string>();
  #claimCursor = '0-0';
  #sweepCursor = '-';
  readonly #broker = new StateReporter();
  #readerUp = false;
  #commandsUp = false;
  #clockOffsetMs = 0;
  #running = 0;
  #slotFreed: (() => void) | undefined;
  #batchSequence = 0;
  #stopping = false;
  #closing: Promise<void> | undefined;
  #loop: Promise<void> | undefined;
  readonly #batches = new Set<Promise<void>>();
  /** Its latency fit and running batches, published for admission. */
  readonly #fit = new WorkerFit();
  #stats = { batches: 0, items: 0, expired: 0, orphaned: 0, reclaimed: 0, gaveUp: 0 };

  constructor(settings: Settings) {
    this.#settings = settings;
    this.workerId = settings.workerId ?? randomBytes(4).toString('hex');
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
      if (this.#stopping) return;
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
      if (this.#stopping) return;
      await sleep(100);
    }
    await this.#heartbeat();
    const { heartbeatMs, claimIdleMs } = this.#settings;
    this.#timers.push(
      setInterval(() => {
        void this.#heartbeat();
        void this.#sweep();
      }, heartbeatMs),
    );
    this.#timers.push(setInterval(() => void this.#claim(), Math.min(heartbeatMs, claimIdleMs)));
    this.#timers.push(setInterval(() => void this.#keepHeld(), Math.max(1, claimIdleMs / 3)));
    this.#loop = this.#pull();
  }

  stats(): RedisWorkerStats {
    const { batches, items } = this.#stats;
    return { ...this.#stats, running: this.#running, meanBatchSize: batches === 0 ? 0 : items / batches };
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#stopping = true;
      this.#slotFreed?.();
      for (const timer of this.#timers) clearInterval(timer);
      await this.ready.catch(() => undefined);
      await this.#loop;
      await Promise.allSettled(this.#batches);
      await Promise.all([
        this.#commands.sendCommand(['ZREM', this.#keys.workers, this.workerId]),
        this.#commands.sendCommand(['HDEL', this.#keys.workerSettings, this.workerId]),
      ]).catch(() => undefined);
      await Promise.all([closeConnection(this.#reader), closeConnection(this.#commands)]);
    })();
    return this.#closing;
  }

  /** Redis's clock, which entry ids and deadlines use. */
  #now(): number {
    return Date.now() + this.#clockOffsetMs;
  }

  /** Reports Redis lost or back once per change: the worker is up while both its connections are. */
  #onConnection(which: 'reader' | 'commands', up: boolean, error?: unknown): void {
    if (which === 'reader') this.#readerUp = up;
    else this.#commandsUp = up;
    const connected = this.#readerUp && this.#commandsUp;
    // Down as soon as either is; up once both are (a worker still connecting is not "down").
    if (!connected && this.#broker.state === undefined) return;
    if (!this.#broker.set(connected)) return;
    const queue = this.#settings.queue;
    if (connected) {
      this.#log('info', `[worker ${this.workerId}] connected to the queue (Redis)`, { queue }, 'broker up');
      emitStatus(this.#settings.onStatus, { event: 'broker-up', queue });
    } else {
      const message = describe(error);
      this.#log(
        'warn',
        `[worker ${this.workerId}] lost the queue (Redis): ${message}; reconnecting`,
        { queue, error: message },
        'broker down',
      );
      emitStatus(this.#settings.onStatus, { event: 'broker-down', queue, error: message });
    }
  }

  async #heartbeat(): Promise<void> {
    try {
      const before = Date.now();
      const { heartbeatMs } = this.#settings;
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
      this.#clockOffsetMs = serverNow - (before + Date.now()) / 2;
    } catch {
      // Redis is down: the replicas see no heartbeat and report not ready, which is true.
    }
  }

  /**
   * What replicas read of this worker (see `WorkerSettings`): its settings, its latency fit, its running batches.
   */
  #state(): string {
    return JSON.stringify({ ...this.#fit.settings(this.#settings), at: Math.round(this.#now()) });
  }

  /** Publishes {@link #state} between heartbeats: when a batch starts or ends, replicas' admission sees it. */
  #publish(): void {
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
    if (this.#stopping) return;
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
    this.#stats.expired += Number(expired);
    this.#stats.orphaned += Number(orphaned);
    if (Number(expired) + Number(orphaned) === 0) return;
    this.#log(
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

  async #pull(): Promise<void> {
    const { maxBatchSize, batchWaitTimeoutMs } = this.#settings;
    while (!this.#stopping) {
      // Work-conserving: pull only when a slot is free, then take whatever is waiting; while every slot is busy,
      // entries wait in Redis where any free worker can take them.
      if (this.#running >= this.#settings.concurrency) {
        await new Promise<void>((resolve) => (this.#slotFreed = resolve));
        continue;
      }
      // Redis lost: nothing to pull until it is back (the connections reconnect on their own; reported once).
      if (!this.#readerUp || !this.#commandsUp) {
        await sleep(50);
        continue;
      }
      let entries = this.#reclaimed.splice(0, maxBatchSize);
      if (entries.length === 0) entries = await this.#read(maxBatchSize, READ_BLOCK_MS);
      if (entries.length === 0) continue;
      if (batchWaitTimeoutMs > 0 && entries.length < maxBatchSize && !this.#stopping) {
        await sleep(batchWaitTimeoutMs);
        entries.push(...(await this.#read(maxBatchSize - entries.length, undefined)));
      }
      this.#dispatch(entries);
    }
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
      if (this.#stopping) return [];
      if (String((error as Error)?.message).startsWith('NOGROUP')) {
        // Redis restarted without its data: the group is gone with the stream.
        await this.#ensureGroup().catch(() => undefined);
      } else if (isConnectionError(error)) {
        await sleep(100);
      } else {
        this.#log(
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

  /** Splits a pull by handler and batch key, drops what expired, and runs each part as one handler call. */
  #dispatch(entries: readonly RequestEntry[]): void {
    const now = this.#now();
    const { expired, refusals, batches } = planBatches(entries, now, this.#settings);
    this.#stats.expired += expired.length;
    for (const entryId of [...expired, ...refusals.map(([entry]) => entry.entryId)]) {
      this.#held.delete(entryId);
      this.#takenOver.delete(entryId);
    }
    if (expired.length > 0) void this.#finish(expired);
    if (refusals.length > 0) void this.#answerErrors(refusals);
    for (const batch of batches) {
      const run = this.#runBatch(batch.target, batch.entries, batch.inputs, now).catch((error: unknown) => {
        // Its entries stay pending and are run again; the worker carries on.
        const message = describe(error);
        this.#log('error', `[worker ${this.workerId}] batch failed: ${message}`, { error: message }, 'batch failed');
      });
      this.#batches.add(run);
      void run.finally(() => this.#batches.delete(run));
    }
  }

  async #runBatch(
    target: NamedHandler,
    entries: readonly RequestEntry[],
    inputs: unknown[],
    now: number,
  ): Promise<void> {
    const handlerName = target.name;
    const sequence = ++this.#batchSequence;
    const id = `${this.workerId}-${sequence}`;
    const ids = entries.map((entry) => entry.entryId);
    for (const entryId of ids) this.#held.add(entryId);
    this.#running += 1;
    this.#stats.batches += 1;
    this.#stats.items += entries.length;
    let started = performance.now();
    // The fit is of the time a batch holds its slot (start notice, handler, answers): what the items behind it wait.
    const slotStarted = started;
    this.#fit.start(sequence, entries.length, slotStarted);
    this.#publish();
    const waits = entries.map((entry) => Math.max(0, now - entry.queuedAtMs));
    const batchOf = wireBatchOf(id, entries.length, this.#settings.maxBatchSize, waits);
    const controller = new AbortController();
    const context: BatchContext = { signal: controller.signal, batchId: sequence, key: undefined };
    let failed = 0;
    let failure: unknown;
    const trace = traceWorkerBatch(this.#settings.tracer, {
      handler: handlerName,
      sequence,
      maxBatchSize: this.#settings.maxBatchSize,
      carriers: entries.map((entry) => entry.trace),
      queueTimesMs: waits,
    });
    try {
      // Each replica learns at once that its items run, in which batch (its in-flight figures and `onDispatch`).
      await this.#answerAndAck(
        entries.map((entry, index) => ({
          reply: entry.reply,
          fields: replyFields(entry.itemId, ReplyKind.START, 'null', batchOf(index)),
        })),
        [],
      ).catch(() => undefined);
      // Chunks go as they come; each item's final answer goes with its acknowledgement, in one script, as soon as
      // the item is done (a stream's `[DONE]` does not wait for the rest of the batch).
      const items = entries.map((): ItemWrites => ({ writes: [], lost: false }));
      const answered: Array<Promise<void>> = [];
      let finals: Array<{ readonly index: number; readonly answer: Answer }> = [];
      // The finals of one burst (a request batch's results, the streams that ended at one step) share a script.
      const flushFinals = (): void => {
        if (finals.length === 0) return;
        answered.push(this.#answerItems(finals, entries, items, offsets !== undefined));
        finals = [];
      };
      const resumable = target.streaming ? this.#settings.resumable : undefined;
      // A resumable stream's tokens sent so far (by this worker, or one that stopped): each chunk says where it starts.
      const offsets = resumable === undefined ? undefined : await this.#resume(resumable, entries, inputs);
      const send = (index: number, kind: ReplyKind, data: string): void => {
        const entry = entries[index] as RequestEntry;
        const item = items[index] as ItemWrites;
        const batch = batchOf(index, performance.now() - started);
        if (kind === ReplyKind.ERROR) failed += 1;
        if (kind !== ReplyKind.CHUNK) {
          if (finals.length === 0) queueMicrotask(flushFinals);
          finals.push({ index, answer: { reply: entry.reply, fields: replyFields(entry.itemId, kind, data, batch) } });
          return;
        }
        // After a write that failed (Redis lost), the item's later chunks are not sent: one that reached a Redis
        // back with its data would leave a gap in the stream and in its progress record.
        if (item.lost) return;
        const tokens = offsets === undefined ? undefined : resumable?.tokensOf(JSON.parse(data));
        if (offsets === undefined || tokens === undefined) {
          write(
            item,
            this.#commands.sendCommand(['XADD', entry.reply, '*', ...replyFields(entry.itemId, kind, data, batch)]),
          );
          return;
        }
        const offset = offsets[index] as number;
        offsets[index] = offset + tokens.length;
        const fields = replyFields(entry.itemId, kind, data, batch, { offset, count: tokens.length });
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
            String(Math.ceil(this.#settings.replyTtlMs)),
            tokens.map((id) => `${id},`).join(''),
            ...fields,
          ]),
        );
      };
      started = performance.now();
      failure = await trace.run(() => executeBatch(target, inputs, context, send));
      flushFinals();
      if (failure !== undefined) {
        controller.abort(failure);
        const message = describe(failure);
        this.#log(
          'error',
          `[worker ${this.workerId}] batch ${id} failed: ${message}`,
          { batchId: id, error: message },
          'batch failed',
        );
      }
      await Promise.all(answered);
      // A batch that failed as a whole says nothing of how long batches take (core's predictor skips them too).
      if (failure === undefined) this.#fit.add(entries.length, performance.now() - slotStarted);
    } finally {
      for (const entryId of ids) {
        this.#held.delete(entryId);
        this.#takenOver.delete(entryId);
      }
      this.#running -= 1;
      if (this.#fit.end(sequence)) this.#publish();
      const executionMs = performance.now() - started;
      trace.end({ outcome: failure !== undefined ? 'error' : failed > 0 ? 'partial' : 'ok', failed, executionMs });
      logBatch(this.#settings.log, this.workerId, {
        id,
        handler: handlerName,
        size: entries.length,
        replicas: new Set(entries.map((entry) => entry.reply)).size,
        waits,
        executionMs,
        failed,
      });
      const wake = this.#slotFreed;
      this.#slotFreed = undefined;
      wake?.();
    }
  }

  /**
   * Gives each input of a resumable stream the tokens already sent (`withTokens`; `[]` for a fresh one, read from
   * Redis for one taken over) and returns how many each has.
   */
  async #resume(
    resumable: NonNullable<Settings['resumable']>,
    entries: readonly RequestEntry[],
    inputs: unknown[],
  ): Promise<number[]> {
    const sent: number[][] = entries.map(() => []);
    const takenOver = entries.flatMap((entry, index) => (this.#takenOver.delete(entry.entryId) ? [index] : []));
    if (takenOver.length > 0) {
      const keys = takenOver.map((index) => this.#keys.progress((entries[index] as RequestEntry).entryId));
      // Unreadable progress reads as none: the stream starts over, and its replica drops what it already sent.
      const values = ((await this.#commands.sendCommand(['MGET', ...keys]).catch(() => [])) as unknown[]) ?? [];
      takenOver.forEach((index, at) => {
        const text = values[at];
        if (typeof text === 'string') sent[index] = text.split(',').filter(Boolean).map(Number);
      });
      this.#log(
        'warn',
        `[worker ${this.workerId}] resuming ${takenOver.length} stream(s) after ` +
          `${takenOver.map((index) => (sent[index] as number[]).length).join(', ')} token(s) sent`,
        { streams: takenOver.length },
        'resuming streams',
      );
    }
    entries.forEach((_, index) => {
      inputs[index] = resumable.withTokens(inputs[index], sent[index] as number[]);
    });
    return sent.map((tokens) => tokens.length);
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
    for (const entryId of ids) {
      this.#held.delete(entryId);
      this.#takenOver.delete(entryId);
    }
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

  async #answerErrors(refusals: ReadonlyArray<readonly [RequestEntry, BatchError]>): Promise<void> {
    const batch: WireBatch = { id: `${this.workerId}-0`, size: 0, max: this.#settings.maxBatchSize, queueMs: 0 };
    const answers = refusals.map(([entry, error]) => ({
      reply: entry.reply,
      fields: replyFields(entry.itemId, ReplyKind.ERROR, JSON.stringify(toWireError(error)), batch),
    }));
    // Unanswered entries stay pending and come back.
    await this.#answerAndAck(
      answers,
      refusals.map(([entry]) => entry.entryId),
    ).catch(() => undefined);
  }

  /** Adds the answers to their reply streams, then acknowledges and deletes the entries: one atomic script. */
  async #answerAndAck(answers: readonly Answer[], ids: readonly string[]): Promise<void> {
    const { keys, args } = answerAndAckArgs(
      this.#keys.requests,
      this.#keys.group,
      this.#settings.replyTtlMs,
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
    if (this.#stopping || this.#running >= this.#settings.concurrency || this.#reclaimed.length > 0) return;
    const { maxBatchSize, claimIdleMs, maxDeliveries } = this.#settings;
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
    if (claim.poisoned.length > 0) {
      this.#stats.gaveUp += claim.poisoned.length;
      this.#log(
        'warn',
        `[worker ${this.workerId}] giving up on ${plural(claim.poisoned.length)} delivered more than ${maxDeliveries} times`,
        { entries: claim.poisoned.length, maxDeliveries },
        'gave up on entries',
      );
      const error = new BatchError(
        ErrorCode.HANDLER_ERROR,
        `The item was delivered ${maxDeliveries} times without an answer (it may crash workers)`,
        {
          expose: false,
        },
      );
      await this.#answerErrors(claim.poisoned.map((entry) => [entry, error] as const));
    }
    if (claim.entries.length === 0) return;
    this.#stats.reclaimed += claim.entries.length;
    this.#log(
      'warn',
      `[worker ${this.workerId}] took over ${plural(claim.entries.length)} of a worker that stopped answering`,
      { entries: claim.entries.length },
      'took over entries',
    );
    for (const entry of claim.entries) {
      this.#held.add(entry.entryId);
      this.#takenOver.add(entry.entryId);
    }
    this.#reclaimed.push(...claim.entries);
  }

  #log(level: 'info' | 'warn' | 'error', line: string, fields: Record<string, unknown>, message: string): void {
    writeLog(this.#settings.log, this.workerId, level, line, fields, message);
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

function describe(error: unknown): string {
  return describeError(error, 'unknown failure');
}
