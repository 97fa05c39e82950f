import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  BrokerWorker,
  type BatchWriter,
  type OpenedBatch,
  type Refusal,
  type RequestEntry,
  type StreamProgress,
  type TransportWorker,
  type WorkerStats,
  fieldMap,
  plural,
  sleep,
  toRequestEntry,
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
import { progressRecord, readProgress } from './stream-progress.js';
import { type Announcement, ReplicaRoster } from './worker-roster.js';

/** How often a worker purges entries NATS kept after their acknowledgement (two JetStream API calls). */
const DROP_ACKNOWLEDGED_MS = 10_000;

/** Counts since the worker started (see `WorkerStats`; `reclaimed`: delivered again by JetStream). */
export interface NatsWorkerStats extends WorkerStats {
  /** Entries given back (`nak`) to be delivered again, because their answers could not be sent. */
  readonly retried: number;
}

/** A model worker: pulls batches from a NATS JetStream queue and answers them. See `createNatsWorker`. */
export type NatsWorker = TransportWorker<NatsWorkerStats>;

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
  const worker = new NatsBrokerWorker(resolveWorkerOptions(options));
  return { ...worker.facade(), stats: () => worker.stats() };
}

/** A worker on NATS: pulls from the stream's durable consumer, answers on each replica's reply subject. */
class NatsBrokerWorker extends BrokerWorker<ResolvedWorkerOptions> {
  readonly ready: Promise<void>;
  protected readonly brokerName = 'NATS';
  readonly #names: QueueNames;
  readonly #broker: BrokerConnection;
  /** The delivery of each entry pulled and not yet answered or dropped, by entry id. */
  readonly #deliveries = new Map<string, Delivery>();
  /** Deliveries this worker runs: their progress is reported so nobody else gets them. */
  readonly #held = new Set<Delivery>();
  readonly #replicas = new ReplicaRoster();
  #connection: NatsConnection | undefined;
  #manager: JetStreamManager | undefined;
  #puller: Puller | undefined;
  #retried = 0;
  #becameReady!: () => void;
  /** Settles when `close()` begins: what waits for NATS stops waiting soon after. */
  readonly #stopped: Promise<void>;
  #stop!: () => void;

  constructor(settings: ResolvedWorkerOptions) {
    super(settings);
    this.#names = queueNames(settings.prefix, settings.queue);
    this.ready = new Promise<void>((resolve) => (this.#becameReady = resolve));
    this.#stopped = new Promise<void>((resolve) => (this.#stop = resolve));
    this.#broker = openBroker(settings.url, `microbatch:worker:${this.workerId}`, {
      onUp: (connection) => this.#onUp(connection),
      onDown: (error) => this.brokerChanged(false, error),
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
          if (error !== null || this.stopping) return;
          try {
            msg.respond(this.#announcement(false));
          } catch {
            // Closed meanwhile: the replica's next ping or this worker's heartbeat says.
          }
        },
      });
    }
    if (!(await this.#setUp(connection))) return;
    this.brokerChanged(true);
    this.publishState();
    if (!this.startPulling()) return;
    const { heartbeatMs, claimIdleMs } = this.settings;
    this.timers.push(setInterval(() => this.publishState(), heartbeatMs));
    this.timers.push(setInterval(() => void this.#dropAcknowledged(this.#manager), DROP_ACKNOWLEDGED_MS));
    // In-progress reports for running entries: their `ack_wait` restarts, so live work is never delivered again.
    this.timers.push(
      setInterval(
        () => {
          for (const delivery of this.#held) delivery.working();
        },
        Math.max(1, claimIdleMs / 3),
      ),
    );
    this.#becameReady();
  }

  /** The stream (after a NATS restart without its store it is gone) and the consumer; retried until JetStream is up. */
  async #setUp(connection: NatsConnection): Promise<boolean> {
    while (!this.stopping && !connection.isClosed()) {
      try {
        const jsm = await manager(connection, this.settings.commandTimeoutMs);
        await ensureStream(jsm, this.#names, undefined);
        await ensureConsumer(jsm, this.#names, this.settings);
        await this.#dropAcknowledged(jsm);
        if (this.settings.resumable !== undefined)
          await ensureProgressStream(jsm, this.#names, this.settings.progressTtlMs);
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
    if (jsm === undefined || this.stopping) return;
    const dropped = await dropAcknowledged(jsm, this.#names).catch(() => 0);
    if (dropped === 0) return;
    this.log(
      'info',
      `[worker ${this.workerId}] dropped ${plural(dropped)} NATS kept after their acknowledgement`,
      { dropped },
      'dropped acknowledged entries',
    );
  }

  override stats(): NatsWorkerStats {
    return { ...super.stats(), retried: this.#retried };
  }

  protected async stopPulling(): Promise<void> {
    this.#stop();
    this.#puller?.close();
  }

  protected async disconnect(): Promise<void> {
    this.#publish(this.#names.workers, this.#announcement(true));
    await this.#broker.close();
  }

  /**
   * What replicas hear of this worker (see `WorkerSettings`): its settings, its latency fit, its running batches.
   * No `at`: a replica times a running batch from when it heard the announcement, on its own clock.
   */
  #announcement(gone: boolean): string {
    const announcement: Announcement = {
      id: this.workerId,
      settings: this.workerState(),
      ...(gone ? { gone } : {}),
    };
    return JSON.stringify(announcement);
  }

  protected publishState(): void {
    if (!this.stopping) this.#publish(this.#names.workers, this.#announcement(false));
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

  /** NATS is down: pull requests would only pile up in the reconnect buffer. */
  protected canPull(): boolean {
    return this.brokerState !== false;
  }

  /**
   * Pulls from the durable consumer; sorts out what cannot run (unreadable, of a replica gone, poison) and counts
   * redeliveries as taken over. A pull that finds the consumer gone (NATS restarted without its store) sets up again.
   */
  protected async pull(count: number, blockMs: number | undefined): Promise<RequestEntry[]> {
    const { deliveries, status } = await (this.#puller as Puller).pull(count, blockMs);
    if (this.stopping) {
      for (const delivery of deliveries) delivery.nak(0);
      return [];
    }
    if (deliveries.length === 0 && status >= 409 && this.#connection !== undefined) await this.#setUp(this.#connection);
    const received = Date.now();
    const entries: RequestEntry[] = [];
    const poisoned: RequestEntry[] = [];
    for (const delivery of deliveries) {
      // The server's clock runs ahead of ours if an entry seems stored in our future.
      this.clockOffsetMs = Math.max(this.clockOffsetMs, delivery.storedAtMs - received);
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
        this.counts.orphaned += 1;
        delivery.ack();
        continue;
      }
      this.#deliveries.set(entry.entryId, delivery);
      if (delivery.deliveryCount > this.settings.maxDeliveries) {
        poisoned.push(entry);
        continue;
      }
      if (delivery.deliveryCount > 1) this.takeOver(entry.entryId);
      entries.push(entry);
    }
    if (poisoned.length > 0) void this.giveUp(poisoned);
    return entries;
  }

  /** The deliveries of `entries` (leaving this worker's keeping when `release`). */
  #deliveriesOf(entries: readonly RequestEntry[], release: boolean): Delivery[] {
    return entries.flatMap((entry) => {
      const delivery = this.#deliveries.get(entry.entryId);
      if (release) this.#deliveries.delete(entry.entryId);
      return delivery === undefined ? [] : [delivery];
    });
  }

  protected hold(entries: readonly RequestEntry[], holding: boolean): void {
    for (const delivery of this.#deliveriesOf(entries, !holding)) {
      if (holding) this.#held.add(delivery);
      else this.#held.delete(delivery);
    }
  }

  protected drop(entryIds: readonly string[]): void {
    for (const entryId of entryIds) {
      this.#deliveries.get(entryId)?.ack();
      this.#deliveries.delete(entryId);
    }
  }

  /**
   * Answers entries that cannot run (or were given up on) with an error; acknowledged once sent, which takes them
   * out of the work queue (a terminated message would stay in the stream, holding the bound).
   */
  protected async refuse(refusals: readonly Refusal[]): Promise<void> {
    const deliveries = this.#deliveriesOf(
      refusals.map(({ entry }) => entry),
      true,
    );
    for (const { entry, fields } of refusals) this.#publish(entry.reply, JSON.stringify(fields));
    const flushed = await this.#flush();
    for (const delivery of deliveries) {
      if (flushed) delivery.ack();
      else delivery.nak(this.settings.retryDelayMs);
    }
    void this.#flush();
  }

  protected async readProgress(entries: readonly RequestEntry[]): Promise<StreamProgress[]> {
    return Promise.all(entries.map((entry) => readProgress(this.#manager, this.#names, entry.entryId)));
  }

  /**
   * Answers and chunks are published as they come; a resumable chunk's progress record first, on the same
   * connection (NATS handles one connection's messages in order): what is stored is never behind what the caller
   * has, and names this chunk, which a worker taking over after a death between the two sends (again): no token is
   * sent twice, none skipped (`stream-progress.ts`). The entries are acknowledged only once the server has the
   * answers: otherwise they are delivered again, later.
   */
  protected openBatch({ entries, resumable }: OpenedBatch): BatchWriter {
    const deliveries = this.#deliveriesOf(entries, false);
    let sent = true;
    const publish = (index: number, fields: readonly string[]): void => {
      sent = this.#publish((entries[index] as RequestEntry).reply, JSON.stringify(fields)) && sent;
    };
    return {
      start: async (notices) => {
        notices.forEach((fields, index) =>
          this.#publish((entries[index] as RequestEntry).reply, JSON.stringify(fields)),
        );
      },
      send: publish,
      final: publish,
      progress: (index, fields, { data, offset, count }, tokens) => {
        const entry = entries[index] as RequestEntry;
        sent =
          this.#publish(this.#names.progress(entry.entryId), progressRecord(tokens, { data, offset, count })) && sent;
        publish(index, fields);
      },
      commit: async () => {
        const flushed = sent && (await this.#flush());
        for (const delivery of deliveries) {
          if (flushed) delivery.ack();
          else delivery.nak(this.settings.retryDelayMs);
        }
        if (!flushed) this.#retried += deliveries.length;
        if (flushed && resumable) this.#forget(entries);
        // Sends the acknowledgements now rather than with the next write (not awaited: the slot is free already).
        void this.#flush();
        return flushed;
      },
    };
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
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), this.settings.commandTimeoutMs))),
    );
    try {
      return await Promise.race([flushed, gaveUp]);
    } finally {
      clearTimeout(timer);
    }
  }
}
