// A model worker's broker-neutral skeleton: the pull loop, the slots, a batch's run (start notices, resume, chunks
// with their progress, answers, commit), give-up, status, stats and close. A transport (Redis, NATS) extends it with
// its broker port (worker-port.ts): pull, the writes of a batch (send, progress, commit), drop, refuse, and its heartbeat.
import { randomBytes } from 'node:crypto';
import { BatchError, ErrorCode } from '@microbatch/core';
import type { BatchContext } from '@microbatch/core';
import type { WorkerSettings } from './batch-tally.js';
import { traceWorkerBatch } from './entry-trace.js';
import { describeError } from './replica-replies.js';
import { StateReporter, emitStatus } from './status.js';
import { type RequestEntry, ReplyKind, type WireBatch, replyFields, toWireError } from './wire.js';
import { type NamedHandler, executeBatch, planBatches } from './worker-batch.js';
import { WorkerFit, wireBatchOf } from './worker-fit.js';
import { type StreamResume, logBatch, plural, sleep, writeLog } from './worker-kit.js';
import type {
  BatchWriter,
  BrokerWorkerSettings,
  OpenedBatch,
  Refusal,
  StreamProgress,
  TransportWorker,
  WorkerStats,
} from './worker-port.js';

const READ_BLOCK_MS = 500;
const NOTHING_SENT: StreamProgress = { tokens: [] };

/**
 * A model worker, broker-neutral. Whenever one of its `concurrency` slots is free it pulls what is waiting (up to
 * `maxBatchSize` entries, from every web replica), drops entries whose deadline passed, runs the named handler
 * (entries of different handlers or batch keys go in separate calls), and has the broker send each answer and commit
 * the entry. A transport's worker (`RedisWorker`, `NatsWorker`) implements the port: `pull`, `openBatch` (a batch's
 * writes), `readProgress`, `drop`, `refuse`, `hold`, `publishState`, `stopPulling`, `disconnect`; and reports its
 * connection with {@link brokerChanged}, entries taken over with {@link takeOver}, poison with {@link giveUp}.
 *
 * @example
 * ```ts
 * class RedisWorker extends BrokerWorker<ResolvedWorkerOptions> { … }
 * return new RedisWorker(resolveWorkerOptions(options)).facade();
 * ```
 */
export abstract class BrokerWorker<S extends BrokerWorkerSettings = BrokerWorkerSettings> {
  readonly workerId: string;
  abstract readonly ready: Promise<void>;
  protected readonly settings: S;
  /** Set once `close()` began: nothing more is pulled. */
  protected stopping = false;
  /** The broker's clock minus ours: entry times and deadlines use the broker's. */
  protected clockOffsetMs = 0;
  protected readonly timers: NodeJS.Timeout[] = [];
  protected readonly counts = { batches: 0, items: 0, expired: 0, orphaned: 0, reclaimed: 0, gaveUp: 0 };
  readonly #brokerState = new StateReporter();
  /** Entries taken over from a worker that stopped: a resumable stream of theirs continues from its progress. */
  readonly #takenOver = new Set<string>();
  /** Its latency fit and running batches, published for admission. */
  readonly #fit = new WorkerFit();
  readonly #batches = new Set<Promise<void>>();
  #running = 0;
  #slotFreed: (() => void) | undefined;
  #batchSequence = 0;
  #closing: Promise<void> | undefined;
  #loop: Promise<void> | undefined;

  constructor(settings: S) {
    this.settings = settings;
    this.workerId = settings.workerId ?? randomBytes(4).toString('hex');
  }

  /** The broker's name as users know it (`Redis`, `NATS`), for log lines. */
  protected abstract readonly brokerName: string;
  /**
   * Up to `count` entries, waiting up to `blockMs` for the first (`undefined`: none waiting, no wait). Each is held
   * (see {@link hold}) from its delivery; what cannot run (unreadable, orphaned, poison) is handled here.
   */
  protected abstract pull(count: number, blockMs: number | undefined): Promise<RequestEntry[]>;
  /** Whether the broker is reachable for pulling now. */
  protected abstract canPull(): boolean;
  /** The writes of one batch. */
  protected abstract openBatch(batch: OpenedBatch): BatchWriter;
  /** The stored progress of resumable streams taken over, by entry. */
  protected abstract readProgress(entries: readonly RequestEntry[]): Promise<StreamProgress[]>;
  /** Commits entries that need no answer (their deadline passed): out of the queue. */
  protected abstract drop(entryIds: readonly string[]): void;
  /** Sends the error answers of entries that cannot run, then commits them (or gives them back unanswered). */
  protected abstract refuse(refusals: readonly Refusal[]): Promise<void>;
  /** Marks a batch's entries held (kept from being taken over) while it runs, or released. */
  protected abstract hold(entries: readonly RequestEntry[], holding: boolean): void;
  /** Publishes {@link workerState} between heartbeats: when a batch starts or ends, replicas' admission sees it. */
  protected abstract publishState(): void;
  /** What stops before `close()` waits for the pull loop: pending pulls end. */
  protected abstract stopPulling(): Promise<void>;
  /** Leaves the fleet and closes the broker's connections, once every batch has finished. */
  protected abstract disconnect(): Promise<void>;

  /** The public handle (see {@link TransportWorker}). */
  facade(): TransportWorker {
    return { workerId: this.workerId, ready: this.ready, stats: () => this.stats(), close: () => this.close() };
  }

  stats(): WorkerStats {
    const { batches, items } = this.counts;
    return { ...this.counts, running: this.#running, meanBatchSize: batches === 0 ? 0 : items / batches };
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.stopping = true;
      this.#slotFreed?.();
      for (const timer of this.timers) clearInterval(timer);
      await this.stopPulling();
      await this.#loop;
      await Promise.allSettled(this.#batches);
      await this.disconnect();
    })();
    return this.#closing;
  }

  /** Starts the pull loop once; returns whether it started now. */
  protected startPulling(): boolean {
    if (this.#loop !== undefined) return false;
    this.#loop = this.#pullUntilClosed();
    return true;
  }

  /** The broker's clock, which entry times and deadlines use. */
  protected now(): number {
    return Date.now() + this.clockOffsetMs;
  }

  /** Batches running now. */
  protected get running(): number {
    return this.#running;
  }

  /** What replicas read of this worker (see `WorkerSettings`): its settings, its latency fit, its running batches. */
  protected workerState(): WorkerSettings {
    return this.#fit.settings(this.settings);
  }

  /** The broker's state as last reported: `undefined` before the first report. */
  protected get brokerState(): boolean | undefined {
    return this.#brokerState.state;
  }

  /**
   * Reports the broker lost or back once per change; down before the first connection reads "cannot reach" (a
   * worker started while the broker is unreachable says so once, and retries).
   */
  protected brokerChanged(up: boolean, error?: string): void {
    const starting = this.#brokerState.state === undefined;
    if (!this.#brokerState.set(up)) return;
    const { queue, onStatus } = this.settings;
    const tag = `[worker ${this.workerId}]`;
    if (up) {
      this.log('info', `${tag} connected to the queue (${this.brokerName})`, { queue }, 'broker up');
      emitStatus(onStatus, { event: 'broker-up', queue });
      return;
    }
    const message = error ?? 'connection lost';
    this.log(
      'warn',
      `${tag} ${starting ? 'cannot reach' : 'lost'} the queue (${this.brokerName}): ${message}; reconnecting`,
      { queue, error: message },
      starting ? 'broker unreachable' : 'broker down',
    );
    emitStatus(onStatus, { event: 'broker-down', queue, error: message });
  }

  /** Records an entry taken over from a worker that stopped: a resumable stream of it resumes from its progress. */
  protected takeOver(entryId: string): void {
    this.counts.reclaimed += 1;
    this.#takenOver.add(entryId);
  }

  /** Answers entries delivered more than `maxDeliveries` times with an error: they may be what crashes workers. */
  protected async giveUp(entries: readonly RequestEntry[]): Promise<void> {
    const { maxDeliveries } = this.settings;
    this.counts.gaveUp += entries.length;
    this.log(
      'warn',
      `[worker ${this.workerId}] giving up on ${plural(entries.length)} delivered more than ${maxDeliveries} times`,
      { entries: entries.length, maxDeliveries },
      'gave up on entries',
    );
    const error = new BatchError(
      ErrorCode.HANDLER_ERROR,
      `The item was delivered ${maxDeliveries} times without an answer (it may crash workers)`,
      { expose: false },
    );
    await this.#answerErrors(entries.map((entry) => [entry, error] as const));
  }

  protected log(
    level: 'info' | 'warn' | 'error',
    line: string,
    fields: Record<string, unknown>,
    message: string,
  ): void {
    writeLog(this.settings.log, this.workerId, level, line, fields, message);
  }

  /** The pull loop, kept alive: a failure of one turn is logged, and pulling goes on after a pause. */
  async #pullUntilClosed(): Promise<void> {
    while (!this.stopping) {
      try {
        await this.#pull();
      } catch (error) {
        const message = describeError(error, 'unknown failure');
        this.log('error', `[worker ${this.workerId}] pulling failed: ${message}`, { error: message }, 'pull failed');
        await sleep(250);
      }
    }
  }

  async #pull(): Promise<void> {
    const { maxBatchSize, batchWaitTimeoutMs, concurrency } = this.settings;
    while (!this.stopping) {
      // Work-conserving: pull only when a slot is free, then take whatever is waiting; while every slot is busy,
      // entries wait in the broker where any free worker can take them.
      if (this.#running >= concurrency) {
        await new Promise<void>((resolve) => (this.#slotFreed = resolve));
        continue;
      }
      // The broker lost: nothing to pull until it is back (it reconnects on its own; reported once).
      if (!this.canPull()) {
        await sleep(50);
        continue;
      }
      const entries = await this.pull(maxBatchSize, READ_BLOCK_MS);
      if (entries.length === 0) continue;
      if (batchWaitTimeoutMs > 0 && entries.length < maxBatchSize && !this.stopping) {
        await sleep(batchWaitTimeoutMs);
        entries.push(...(await this.pull(maxBatchSize - entries.length, undefined)));
      }
      this.#dispatch(entries);
    }
  }

  /** Splits a pull by handler and batch key, drops what expired, and runs each part as one handler call. */
  #dispatch(entries: readonly RequestEntry[]): void {
    const now = this.now();
    const { expired, refusals, batches } = planBatches(entries, now, this.settings);
    this.counts.expired += expired.length;
    for (const entryId of [...expired, ...refusals.map(([entry]) => entry.entryId)]) this.#takenOver.delete(entryId);
    if (expired.length > 0) this.drop(expired);
    if (refusals.length > 0) void this.#answerErrors(refusals);
    for (const batch of batches) {
      const run = this.#runBatch(batch.target, batch.entries, batch.inputs, now).catch((error: unknown) => {
        // Its entries stay pending and are run again; the worker carries on.
        const message = describeError(error, 'unknown failure');
        this.log('error', `[worker ${this.workerId}] batch failed: ${message}`, { error: message }, 'batch failed');
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
    const { maxBatchSize, tracer } = this.settings;
    const sequence = ++this.#batchSequence;
    const id = `${this.workerId}-${sequence}`;
    this.hold(entries, true);
    this.#running += 1;
    this.counts.batches += 1;
    this.counts.items += entries.length;
    let started = performance.now();
    // The fit is of the time a batch holds its slot (start notices, handler, answers): what the items behind it wait.
    const slotStarted = started;
    this.#fit.start(sequence, entries.length, slotStarted);
    this.publishState();
    const waits = entries.map((entry) => Math.max(0, now - entry.queuedAtMs));
    const batchOf = wireBatchOf(id, entries.length, maxBatchSize, waits);
    const controller = new AbortController();
    const context: BatchContext = { signal: controller.signal, batchId: sequence, key: undefined };
    let failed = 0;
    let failure: unknown;
    const trace = traceWorkerBatch(tracer, {
      handler: target.name,
      sequence,
      maxBatchSize,
      carriers: entries.map((entry) => entry.trace),
      queueTimesMs: waits,
    });
    try {
      const resumable = target.streaming ? this.settings.resumable : undefined;
      const writer = this.openBatch({ id, entries, resumable: resumable !== undefined });
      // Each replica learns at once that its items run, in which batch (its in-flight figures and `onDispatch`).
      await writer.start(
        entries.map((entry, index) => replyFields(entry.itemId, ReplyKind.START, 'null', batchOf(index))),
      );
      // A resumable stream's token ids sent so far (by this worker, or one that stopped): each chunk says where it starts.
      const resumed = resumable === undefined ? undefined : await this.#resume(resumable, entries, inputs);
      const progress = resumed?.map((record) => [...record.tokens]);
      // The chunk a stopped worker's last record preceded, which the caller may not have: sent (again) first.
      resumed?.forEach(({ chunk }, index) => {
        if (chunk === undefined || chunk.count === 0) return;
        const { data, offset, count } = chunk;
        const entry = entries[index] as RequestEntry;
        writer.send(index, replyFields(entry.itemId, ReplyKind.CHUNK, data, batchOf(index), { offset, count }));
      });
      const send = (index: number, kind: ReplyKind, data: string): void => {
        const entry = entries[index] as RequestEntry;
        const batch = batchOf(index, performance.now() - started);
        if (kind === ReplyKind.ERROR) failed += 1;
        if (kind !== ReplyKind.CHUNK) return writer.final(index, replyFields(entry.itemId, kind, data, batch));
        const tokens = progress === undefined ? undefined : resumable?.tokensOf(JSON.parse(data));
        if (progress === undefined || tokens === undefined)
          return writer.send(index, replyFields(entry.itemId, kind, data, batch));
        const sent = progress[index] as number[];
        const chunk = { data, offset: sent.length, count: tokens.length, tokens };
        sent.push(...tokens);
        writer.progress(index, replyFields(entry.itemId, kind, data, batch, chunk), chunk, sent);
      };
      started = performance.now();
      failure = await trace.run(() => executeBatch(target, inputs, context, send));
      if (failure !== undefined) {
        controller.abort(failure);
        const message = describeError(failure, 'unknown failure');
        this.log(
          'error',
          `[worker ${this.workerId}] batch ${id} failed: ${message}`,
          { batchId: id, error: message },
          'batch failed',
        );
      }
      const committed = await writer.commit();
      // A batch that failed as a whole says nothing of how long batches take (core's predictor skips them too).
      if (failure === undefined && committed) this.#fit.add(entries.length, performance.now() - slotStarted);
    } finally {
      this.hold(entries, false);
      for (const entry of entries) this.#takenOver.delete(entry.entryId);
      this.#running -= 1;
      if (this.#fit.end(sequence)) this.publishState();
      const executionMs = performance.now() - started;
      trace.end({ outcome: failure !== undefined ? 'error' : failed > 0 ? 'partial' : 'ok', failed, executionMs });
      logBatch(this.settings.log, this.workerId, {
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
   * Gives each input of a resumable stream the tokens already sent (`withTokens`; `[]` for a fresh one, the stored
   * progress for one taken over) and returns the progress of each.
   */
  async #resume(
    resumable: StreamResume<unknown, unknown>,
    entries: readonly RequestEntry[],
    inputs: unknown[],
  ): Promise<StreamProgress[]> {
    const records = entries.map(() => NOTHING_SENT);
    const takenOver = entries.flatMap((entry, index) => (this.#takenOver.delete(entry.entryId) ? [index] : []));
    if (takenOver.length > 0) {
      const read = await this.readProgress(takenOver.map((index) => entries[index] as RequestEntry));
      takenOver.forEach((index, at) => (records[index] = read[at] ?? NOTHING_SENT));
      this.log(
        'warn',
        `[worker ${this.workerId}] resuming ${takenOver.length} stream(s) after ` +
          `${takenOver.map((index) => (records[index] as StreamProgress).tokens.length).join(', ')} token(s) sent`,
        { streams: takenOver.length },
        'resuming streams',
      );
    }
    entries.forEach((_, index) => {
      inputs[index] = resumable.withTokens(inputs[index], (records[index] as StreamProgress).tokens);
    });
    return records;
  }

  /** Answers entries that cannot run (or were given up on) with an error, by the broker's {@link refuse}. */
  #answerErrors(refusals: ReadonlyArray<readonly [RequestEntry, BatchError]>): Promise<void> {
    const batch: WireBatch = { id: `${this.workerId}-0`, size: 0, max: this.settings.maxBatchSize, queueMs: 0 };
    return this.refuse(
      refusals.map(([entry, error]) => ({
        entry,
        fields: replyFields(entry.itemId, ReplyKind.ERROR, JSON.stringify(toWireError(error)), batch),
      })),
    );
  }
}
