import { randomBytes } from 'node:crypto';
import { BatchError, ErrorCode } from '@microbatch/core';
import type { BatchContext } from '@microbatch/core';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  type NamedHandler,
  type RequestEntry,
  ReplyKind,
  StateReporter,
  type WireBatch,
  describeError,
  emitStatus,
  executeBatch,
  fieldMap,
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
import {
  type BrokerConnection,
  dropAcknowledged,
  ensureConsumer,
  ensureProgressStream,
  ensureStream,
  manager,
  openBroker,
} from './broker.js';
import { type QueueNames, queueNames } from './names.js';
import { type NatsWorkerOptions, type ResolvedWorkerOptions, resolveWorkerOptions } from './options.js';
import { type Delivery, Puller } from './pull.js';
import { NO_PROGRESS, type ProgressRecord, progressRecord, readProgress } from './stream-progress.js';
import { type Announcement, ReplicaRoster } from './worker-roster.js';

/** How often a worker purges entries NATS kept after their acknowledgement (two JetStream API calls). */
const DROP_ACKNOWLEDGED_MS = 10_000;

/**
 * Counts since the worker started.
 *
 * @example
 * ```ts
 * const { batches, meanBatchSize } = worker.stats();
 * ```
 */
export interface NatsWorkerStats {
  readonly batches: number;
  readonly items: number;
  readonly meanBatchSize: number;
  /** Batches running now. */
  readonly running: number;
  /** Entries dropped because their deadline had passed while queued. */
  readonly expired: number;
  /** Entries dropped because the web replica that queued them is gone (silent past its heartbeat TTL). */
  readonly orphaned: number;
  /** Entries delivered again after their first worker stopped answering (JetStream's redelivery). */
  readonly reclaimed: number;
  /** Entries answered with an error after `maxDeliveries` deliveries. */
  readonly gaveUp: number;
  /** Entries given back (`nak`) to be delivered again, because their answers could not be sent. */
  readonly retried: number;
}

/**
 * A model worker: pulls batches from a NATS JetStream queue and answers them. See `createNatsWorker`.
 *
 * @example
 * ```ts
 * const worker = createNatsWorker({ url, queue: 'tinystories-656k', handlers: { generate: pool.handler } });
 * process.once('SIGTERM', () => void worker.close());
 * ```
 */
export interface NatsWorker {
  /** The first half of this worker's batch ids (`<workerId>-<sequence>`). */
  readonly workerId: string;
  /** Resolves once the worker is connected and its stream and consumer exist. */
  readonly ready: Promise<void>;
  stats(): NatsWorkerStats;
  /** Stops pulling, finishes (and answers) the batches it runs, then disconnects; idempotent. */
  close(): Promise<void>;
}

const READ_BLOCK_MS = 500;

/**
 * Starts a model worker on a NATS JetStream queue. Whenever one of its `concurrency` slots is free it pulls what is
 * waiting (up to `maxBatchSize` entries, from every web replica) from the queue's durable pull consumer, skips
 * entries whose deadline passed, runs the named handler (entries of different handlers or batch keys go in separate
 * calls), publishes each answer on its replica's reply subject, then acknowledges the entries. While a batch runs it
 * reports progress (`working()`), so only a dead worker's entries are delivered again (after `claimIdleMs`); an entry
 * delivered more than `maxDeliveries` times is answered 500 and acknowledged. Answers that cannot be sent are given
 * back with a delay (`nak`). NATS unreachable at start or lost later is logged once; while it is down the worker
 * pulls nothing and keeps the batches it runs (their answers wait in the reconnect buffer and are acknowledged once
 * NATS has them; after `close()` began it waits for NATS at most `commandTimeoutMs`, and JetStream delivers again
 * what was not acknowledged). It reconnects on its own when NATS returns.
 *
 * @example
 * ```ts
 * const pool = createWorkerPool({ runner: { task: 'text-generation', model: 'models/tinystories-656k' } });
 * const worker = createNatsWorker({
 *   url: 'nats://127.0.0.1:4222', queue: 'tinystories-656k', maxBatchSize: 16, concurrency: pool.size,
 *   handlers: { generate: pool.handler }, streamingHandlers: { stream: pool.streamingHandler },
 * });
 * ```
 */
export function createNatsWorker<I = unknown, O = unknown, C = unknown>(
  options: NatsWorkerOptions<I, O, C>,
): NatsWorker {
  const worker = new Worker(resolveWorkerOptions(options));
  return {
    workerId: worker.workerId,
    ready: worker.ready,
    stats: () => worker.stats(),
    close: () => worker.close(),
  };
}

class Worker {
  readonly workerId: string;
  readonly ready: Promise<void>;
  readonly #settings: ResolvedWorkerOptions;
  readonly #names: QueueNames;
  readonly #broker: BrokerConnection;
  readonly #timers: NodeJS.Timeout[] = [];
  /** Deliveries this worker runs: their progress is reported so nobody else gets them. */
  readonly #held = new Set<Delivery>();
  readonly #state = new StateReporter();
  #connection: NatsConnection | undefined;
  #manager: JetStreamManager | undefined;
  /** Entries delivered again (their first worker died): a resumable stream of theirs continues from its progress. */
  readonly #takenOver = new Set<string>();
  #puller: Puller | undefined;
  #clockOffsetMs = 0;
  #running = 0;
  #slotFreed: (() => void) | undefined;
  #batchSequence = 0;
  #stopping = false;
  #closing: Promise<void> | undefined;
  #loop: Promise<void> | undefined;
  readonly #batches = new Set<Promise<void>>();
  #stats = { batches: 0, items: 0, expired: 0, orphaned: 0, reclaimed: 0, gaveUp: 0, retried: 0 };
  readonly #replicas = new ReplicaRoster();
  /** Its latency fit and running batches, announced for admission. */
  readonly #fit = new WorkerFit();
  #becameReady!: () => void;
  /** Settles when `close()` begins: what waits for NATS stops waiting soon after. */
  readonly #stopped: Promise<void>;
  #stop!: () => void;

  constructor(settings: ResolvedWorkerOptions) {
    this.#settings = settings;
    this.workerId = settings.workerId ?? randomBytes(4).toString('hex');
    this.#names = queueNames(settings.prefix, settings.queue);
    this.ready = new Promise<void>((resolve) => (this.#becameReady = resolve));
    this.#stopped = new Promise<void>((resolve) => (this.#stop = resolve));
    this.#broker = openBroker(settings.url, `microbatch:worker:${this.workerId}`, {
      onUp: (connection) => this.#onUp(connection),
      onDown: (error) => this.#report(false, error),
    });
  }

  async #onUp(connection: NatsConnection): Promise<void> {
    if (this.#connection === undefined) {
      this.#connection = connection;
      this.#puller = new Puller(connection, this.#names.stream, this.#names.consumer);
      // A replica asking who is alive gets an answer at once.
      this.#replicas.listen(connection, this.#names.replicas);
      connection.subscribe(this.#names.ping, {
        callback: (error, msg) => {
          if (error !== null || this.#stopping) return;
          try {
            msg.respond(this.#announcement(false));
          } catch {
            // Closed meanwhile: the replica's next ping or this worker's heartbeat says.
          }
        },
      });
    }
    if (!(await this.#setUp(connection))) return;
    this.#report(true);
    this.#announce();
    if (this.#loop !== undefined) return;
    const { heartbeatMs, claimIdleMs } = this.#settings;
    this.#timers.push(setInterval(() => this.#announce(), heartbeatMs));
    this.#timers.push(setInterval(() => void this.#dropAcknowledged(this.#manager), DROP_ACKNOWLEDGED_MS));
    this.#timers.push(setInterval(() => this.#keepHeld(), Math.max(1, claimIdleMs / 3)));
    this.#loop = this.#pullUntilClosed();
    this.#becameReady();
  }

  /** The stream (after a NATS restart without its store it is gone) and the consumer; retried until JetStream is up. */
  async #setUp(connection: NatsConnection): Promise<boolean> {
    while (!this.#stopping && !connection.isClosed()) {
      try {
        const jsm = await manager(connection, this.#settings.commandTimeoutMs);
        await ensureStream(jsm, this.#names, undefined);
        await ensureConsumer(jsm, this.#names, this.#settings);
        await this.#dropAcknowledged(jsm);
        if (this.#settings.resumable !== undefined)
          await ensureProgressStream(jsm, this.#names, this.#settings.progressTtlMs);
        this.#manager = jsm;
        return true;
      } catch {
        await sleep(250);
      }
    }
    return false;
  }

  /** Purges entries NATS kept after their acknowledgement (see `dropAcknowledged`); a failure waits for the next turn. */
  async #dropAcknowledged(jsm: JetStreamManager | undefined): Promise<void> {
    if (jsm === undefined || this.#stopping) return;
    const dropped = await dropAcknowledged(jsm, this.#names).catch(() => 0);
    if (dropped === 0) return;
    this.#log(
      'info',
      `[worker ${this.workerId}] dropped ${plural(dropped)} NATS kept after their acknowledgement`,
      { dropped },
      'dropped acknowledged entries',
    );
  }

  stats(): NatsWorkerStats {
    const { batches, items } = this.#stats;
    return { ...this.#stats, running: this.#running, meanBatchSize: batches === 0 ? 0 : items / batches };
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#stopping = true;
      this.#stop();
      this.#slotFreed?.();
      for (const timer of this.#timers) clearInterval(timer);
      this.#puller?.close();
      await this.#loop;
      await Promise.allSettled(this.#batches);
      this.#publish(this.#names.workers, this.#announcement(true));
      await this.#broker.close();
    })();
    return this.#closing;
  }

  /**
   * What replicas hear of this worker (see `WorkerSettings`): its settings, its latency fit, its running batches.
   * No `at`: a replica times a running batch from when it heard the announcement, on its own clock.
   */
  #announcement(gone: boolean): string {
    const announcement: Announcement = {
      id: this.workerId,
      settings: this.#fit.settings(this.#settings),
      ...(gone ? { gone } : {}),
    };
    return JSON.stringify(announcement);
  }

  #announce(): void {
    if (!this.#stopping) this.#publish(this.#names.workers, this.#announcement(false));
  }

  /** Core NATS publish; while disconnected it is buffered or dropped, never thrown. */
  #publish(subject: string, data: string): boolean {
    try {
      this.#connection?.publish(subject, data);
      return this.#connection !== undefined;
    } catch {
      return false;
    }
  }

  /** The server's clock, which entry times and deadlines use. */
  #now(): number {
    return Date.now() + this.#clockOffsetMs;
  }

  #report(up: boolean, error?: string): void {
    // Down before the first connection too: a worker started while NATS is unreachable says so (once), and retries.
    const starting = this.#state.state === undefined;
    if (!this.#state.set(up)) return;
    const queue = this.#settings.queue;
    if (up) {
      this.#log('info', `[worker ${this.workerId}] connected to the queue (NATS)`, { queue }, 'broker up');
      emitStatus(this.#settings.onStatus, { event: 'broker-up', queue });
    } else {
      const message = error ?? 'connection lost';
      this.#log(
        'warn',
        `[worker ${this.workerId}] ${starting ? 'cannot reach' : 'lost'} the queue (NATS): ${message}; reconnecting`,
        { queue, error: message },
        starting ? 'broker unreachable' : 'broker down',
      );
      emitStatus(this.#settings.onStatus, { event: 'broker-down', queue, error: message });
    }
  }

  /** The pull loop, kept alive: a failure of one turn is logged, and pulling goes on after a pause. */
  async #pullUntilClosed(): Promise<void> {
    while (!this.#stopping) {
      try {
        await this.#pull();
      } catch (error) {
        const message = describeError(error, 'unknown failure');
        this.#log('error', `[worker ${this.workerId}] pulling failed: ${message}`, { error: message }, 'pull failed');
        await sleep(250);
      }
    }
  }

  async #pull(): Promise<void> {
    const { maxBatchSize, batchWaitTimeoutMs, concurrency } = this.#settings;
    const puller = this.#puller as Puller;
    while (!this.#stopping) {
      // Work-conserving: pull only when a slot is free, then take whatever is waiting; while every slot is busy,
      // entries wait in the stream where any free worker can take them.
      if (this.#running >= concurrency) {
        await new Promise<void>((resolve) => (this.#slotFreed = resolve));
        continue;
      }
      if (this.#state.state === false) {
        // NATS is down: pull requests would only pile up in the reconnect buffer.
        await sleep(100);
        continue;
      }
      const { deliveries, status } = await puller.pull(maxBatchSize, READ_BLOCK_MS);
      if (this.#stopping) {
        for (const delivery of deliveries) delivery.nak(0);
        break;
      }
      if (deliveries.length === 0) {
        // 409 and the like (consumer deleted, NATS restarted without its store): set up again.
        if (status >= 409 && this.#connection !== undefined) await this.#setUp(this.#connection);
        continue;
      }
      if (batchWaitTimeoutMs > 0 && deliveries.length < maxBatchSize) {
        await sleep(batchWaitTimeoutMs);
        deliveries.push(...(await puller.pull(maxBatchSize - deliveries.length, undefined)).deliveries);
      }
      this.#dispatch(deliveries);
    }
  }

  /** Sorts a pull: poison and unreadable entries are answered, the rest split into handler calls and run. */
  #dispatch(deliveries: readonly Delivery[]): void {
    const received = Date.now();
    const entries: RequestEntry[] = [];
    const byEntry = new Map<RequestEntry, Delivery>();
    const poisoned: Array<readonly [RequestEntry, Delivery]> = [];
    for (const delivery of deliveries) {
      // The server's clock runs ahead of ours if an entry seems stored in our future.
      this.#clockOffsetMs = Math.max(this.#clockOffsetMs, delivery.storedAtMs - received);
      let fields: unknown;
      try {
        fields = JSON.parse(delivery.data);
      } catch {
        fields = undefined;
      }
      const entry = toRequestEntry(String(delivery.sequence), delivery.storedAtMs, fieldMap(fields));
      if (entry === undefined) {
        delivery.ack(); // not a request entry: nobody waits for it; out of the work queue
        continue;
      }
      if (this.#replicas.isGone(entry.reply)) {
        // Nobody waits for it: never run, out of the queue (it would hold the bound).
        this.#stats.orphaned += 1;
        delivery.ack();
        continue;
      }
      if (delivery.deliveryCount > this.#settings.maxDeliveries) {
        poisoned.push([entry, delivery]);
        continue;
      }
      if (delivery.deliveryCount > 1) {
        this.#stats.reclaimed += 1;
        this.#takenOver.add(entry.entryId);
      }
      entries.push(entry);
      byEntry.set(entry, delivery);
    }
    if (poisoned.length > 0) this.#giveUp(poisoned);
    const now = this.#now();
    const { expired, refusals, batches } = planBatches(entries, now, this.#settings);
    this.#stats.expired += expired.length;
    const bySequence = new Map([...byEntry].map(([entry, delivery]) => [entry.entryId, delivery]));
    for (const id of expired) {
      bySequence.get(id)?.ack();
      this.#takenOver.delete(id);
    }
    for (const [entry] of refusals) this.#takenOver.delete(entry.entryId);
    if (refusals.length > 0)
      void this.#answerErrors(
        refusals.map(([entry, error]) => [entry, byEntry.get(entry) as Delivery, error] as const),
      );
    for (const batch of batches) {
      const run = this.#runBatch(
        batch.target,
        batch.entries,
        batch.entries.map((entry) => byEntry.get(entry) as Delivery),
        batch.inputs,
        now,
      );
      this.#batches.add(run);
      // `#runBatch` handles its own failures (answers, nak); a throw past them is logged, never an unhandled rejection.
      void run
        .catch((error: unknown) => {
          const message = describeError(error, 'unknown failure');
          this.#log('error', `[worker ${this.workerId}] a batch broke: ${message}`, { error: message }, 'batch broke');
        })
        .finally(() => this.#batches.delete(run));
    }
  }

  #giveUp(poisoned: ReadonlyArray<readonly [RequestEntry, Delivery]>): void {
    const { maxDeliveries } = this.#settings;
    this.#stats.gaveUp += poisoned.length;
    this.#log(
      'warn',
      `[worker ${this.workerId}] giving up on ${plural(poisoned.length)} delivered more than ${maxDeliveries} times`,
      { entries: poisoned.length, maxDeliveries },
      'gave up on entries',
    );
    const error = new BatchError(
      ErrorCode.HANDLER_ERROR,
      `The item was delivered ${maxDeliveries} times without an answer (it may crash workers)`,
      { expose: false },
    );
    void this.#answerErrors(poisoned.map(([entry, delivery]) => [entry, delivery, error] as const));
  }

  async #runBatch(
    target: NamedHandler,
    entries: readonly RequestEntry[],
    deliveries: readonly Delivery[],
    inputs: unknown[],
    now: number,
  ): Promise<void> {
    const sequence = ++this.#batchSequence;
    const id = `${this.workerId}-${sequence}`;
    for (const delivery of deliveries) this.#held.add(delivery);
    this.#running += 1;
    this.#stats.batches += 1;
    this.#stats.items += entries.length;
    let started = performance.now();
    // The fit is of the time a batch holds its slot (start notices, handler, answers): what the items behind it wait.
    const slotStarted = started;
    this.#fit.start(sequence, entries.length, slotStarted);
    // Announced when a batch starts and ends, not only on the heartbeat: the replicas' admission sees it at once.
    this.#announce();
    const waits = entries.map((entry) => Math.max(0, now - entry.queuedAtMs));
    const batchOf = wireBatchOf(id, entries.length, this.#settings.maxBatchSize, waits);
    const controller = new AbortController();
    const context: BatchContext = { signal: controller.signal, batchId: sequence, key: undefined };
    let failed = 0;
    let failure: unknown;
    const trace = traceWorkerBatch(this.#settings.tracer, {
      handler: target.name,
      sequence,
      maxBatchSize: this.#settings.maxBatchSize,
      carriers: entries.map((entry) => entry.trace),
      queueTimesMs: waits,
    });
    try {
      // Each replica learns at once that its items run, in which batch (its in-flight figures and `onDispatch`).
      entries.forEach((entry, index) =>
        this.#publish(entry.reply, JSON.stringify(replyFields(entry.itemId, ReplyKind.START, 'null', batchOf(index)))),
      );
      let sent = true;
      const resumable = target.streaming ? this.#settings.resumable : undefined;
      // A resumable stream's token ids sent so far (by this worker, or one that died): each chunk says where it starts.
      const resumed = resumable === undefined ? undefined : await this.#resume(resumable, entries, inputs);
      const progress = resumed?.map((record) => [...record.tokens]);
      // The chunk a dead worker's last record preceded, which the caller may not have: sent (again) first.
      resumed?.forEach(({ chunk }, index) => {
        if (chunk === undefined || chunk.count === 0) return;
        const { data, offset, count } = chunk;
        const entry = entries[index] as RequestEntry;
        const fields = replyFields(entry.itemId, ReplyKind.CHUNK, data, batchOf(index), { offset, count });
        sent = this.#publish(entry.reply, JSON.stringify(fields)) && sent;
      });
      const send = (index: number, kind: ReplyKind, data: string): void => {
        const entry = entries[index] as RequestEntry;
        if (kind === ReplyKind.ERROR) failed += 1;
        const batch = batchOf(index, performance.now() - started);
        const tokens =
          progress === undefined || kind !== ReplyKind.CHUNK ? undefined : resumable?.tokensOf(JSON.parse(data));
        if (progress === undefined || tokens === undefined) {
          sent = this.#publish(entry.reply, JSON.stringify(replyFields(entry.itemId, kind, data, batch))) && sent;
          return;
        }
        const sentBefore = progress[index] as number[];
        progress[index] = [...sentBefore, ...tokens];
        const chunk = { data, offset: sentBefore.length, count: tokens.length };
        // The record first, on the same connection (NATS handles one connection's messages in order): what is
        // stored is never behind what the caller has, and names this chunk, which a worker taking over after a death
        // between the two sends (again): no token is sent twice, none skipped (`stream-progress.ts`).
        sent = this.#publish(this.#names.progress(entry.entryId), progressRecord(progress[index], chunk)) && sent;
        const fields = replyFields(entry.itemId, kind, data, batch, { offset: chunk.offset, count: chunk.count });
        sent = this.#publish(entry.reply, JSON.stringify(fields)) && sent;
      };
      started = performance.now();
      failure = await trace.run(() => executeBatch(target, inputs, context, send));
      if (failure !== undefined) {
        controller.abort(failure);
        const message = describeError(failure, 'unknown failure');
        this.#log(
          'error',
          `[worker ${this.workerId}] batch ${id} failed: ${message}`,
          { batchId: id, error: message },
          'batch failed',
        );
      }
      // Acknowledged only once the server has the answers: otherwise they are delivered again, later.
      const flushed = sent && (await this.#flush());
      for (const delivery of deliveries) {
        if (flushed) delivery.ack();
        else delivery.nak(this.#settings.retryDelayMs);
      }
      if (!flushed) this.#stats.retried += deliveries.length;
      if (flushed && progress !== undefined) this.#forget(entries);
      // A batch that failed as a whole says nothing of how long batches take (core's predictor skips them too).
      if (failure === undefined && flushed) this.#fit.add(entries.length, performance.now() - slotStarted);
      // Sends the acknowledgements now rather than with the next write (not awaited: the slot is free already).
      void this.#flush();
    } finally {
      for (const delivery of deliveries) this.#held.delete(delivery);
      for (const entry of entries) this.#takenOver.delete(entry.entryId);
      this.#running -= 1;
      if (this.#fit.end(sequence)) this.#announce();
      const executionMs = performance.now() - started;
      trace.end({ outcome: failure !== undefined ? 'error' : failed > 0 ? 'partial' : 'ok', failed, executionMs });
      logBatch(this.#settings.log, this.workerId, {
        id,
        handler: target.name,
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
   * Gives each input of a resumable stream the tokens already sent (`withTokens`; none for a fresh one, the stored
   * record's for one taken over) and returns the records.
   */
  async #resume(
    resumable: NonNullable<ResolvedWorkerOptions['resumable']>,
    entries: readonly RequestEntry[],
    inputs: unknown[],
  ): Promise<ProgressRecord[]> {
    const takenOver = entries.map((entry) => this.#takenOver.delete(entry.entryId));
    const records = await Promise.all(
      entries.map((entry, index) =>
        takenOver[index] === true
          ? readProgress(this.#manager, this.#names, entry.entryId)
          : Promise.resolve(NO_PROGRESS),
      ),
    );
    const resumed = records.filter((_, index) => takenOver[index]);
    if (resumed.length > 0)
      this.#log(
        'warn',
        `[worker ${this.workerId}] resuming ${resumed.length} stream(s) after ` +
          `${resumed.map((record) => record.tokens.length).join(', ')} token(s) sent`,
        { streams: resumed.length },
        'resuming streams',
      );
    entries.forEach((_, index) => {
      inputs[index] = resumable.withTokens(inputs[index], (records[index] as ProgressRecord).tokens);
    });
    return records;
  }

  /** Deletes the progress of answered streams (a dead worker's ages out with the stream's `max_age`). */
  #forget(entries: readonly RequestEntry[]): void {
    for (const entry of entries)
      this.#manager?.streams
        .purge(this.#names.progressStream, { filter: this.#names.progress(entry.entryId) })
        .catch(() => undefined);
  }

  /**
   * Whether the server has everything sent so far. While NATS is down this waits for it to return (the batch keeps
   * its entries: its answers wait in the client's reconnect buffer, then are acknowledged); once `close()` began, at
   * most `commandTimeoutMs`, so a worker told to stop while NATS is gone stops (its entries are delivered again).
   */
  async #flush(): Promise<boolean> {
    const connection = this.#connection;
    if (connection === undefined) return false;
    const flushed = connection.flush().then(
      () => true,
      () => false,
    );
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = this.#stopped.then(
      () =>
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), this.#settings.commandTimeoutMs))),
    );
    try {
      return await Promise.race([flushed, gaveUp]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Answers entries that cannot run (or were given up on) with an error; acknowledged once sent, which takes them
   * out of the work queue (a terminated message would stay in the stream, holding the bound).
   */
  async #answerErrors(refusals: ReadonlyArray<readonly [RequestEntry, Delivery, BatchError]>): Promise<void> {
    const batch: WireBatch = { id: `${this.workerId}-0`, size: 0, max: this.#settings.maxBatchSize, queueMs: 0 };
    for (const [entry, , error] of refusals)
      this.#publish(
        entry.reply,
        JSON.stringify(replyFields(entry.itemId, ReplyKind.ERROR, JSON.stringify(toWireError(error)), batch)),
      );
    const flushed = await this.#flush();
    for (const [, delivery] of refusals) {
      if (flushed) delivery.ack();
      else delivery.nak(this.#settings.retryDelayMs);
    }
    void this.#flush();
  }

  /** In-progress reports for running entries: their `ack_wait` restarts, so live work is never delivered again. */
  #keepHeld(): void {
    for (const delivery of this.#held) delivery.working();
  }

  #log(level: 'info' | 'warn' | 'error', line: string, fields: Record<string, unknown>, message: string): void {
    writeLog(this.#settings.log, this.workerId, level, line, fields, message);
  }
}
