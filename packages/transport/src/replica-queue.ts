// A web replica's side of a shared queue, broker-neutral: `submit`'s checks, the batchers, the waiters, the fleet's
// load and the broker's state. A transport (Redis, NATS) extends it with what is its own (replica-port.ts): enqueue,
// remove, sample.
import { BatchError, ErrorCode } from '@microbatch/core';
import type { CallOptions, CloseOptions } from '@microbatch/core';
import { EMPTY_SNAPSHOT, type QueueSnapshot } from './batch-tally.js';
import { FleetView, fleetKey, mergeLoads } from './fleet-load.js';
import { traceItem } from './entry-trace.js';
import { type QueueBackend, type QueueBatcher, type Submission, namedBatcher } from './queue-batcher.js';
import { describeError, routeReply, unavailable } from './replica-replies.js';
import { StateReporter, emitStatus } from './status.js';
import { WaiterRegistry, type RegisteredWaiter } from './waiter-registry.js';
import { type ReplyEntry, requestFields } from './wire.js';
import { WorkerGrace } from './worker-grace.js';
import type { Enqueued, ReplicaSample, ReplicaSettings, TransportQueue } from './replica-port.js';

/** The most ms between two samples of the queue: a replica sees the others' arrivals this late at most. */
const SAMPLE_MS = 50;

/**
 * A web replica's side of a shared queue. A broker's replica (`RedisReplica`, `NatsReplica`) implements the port:
 * `enqueue` (admit a group or refuse it), `remove` (take an entry back out), `probe` (heartbeat and sample, then
 * {@link sampled} and {@link observeWorkers}), `workersAlive`, `disconnect`; and reports its connection with
 * {@link brokerChanged} and its answers with {@link onReply}.
 *
 * @example
 * ```ts
 * class RedisReplica extends ReplicaQueue { … }
 * const replica = new RedisReplica(settings, keys, replicaId);
 * return replica.facade(replicaId);
 * ```
 */
export abstract class ReplicaQueue implements QueueBackend {
  abstract readonly brokerName: string;
  abstract readonly workerFactory: string;
  abstract readonly ready: Promise<void>;
  /** Where workers send this replica's answers. */
  readonly replyAddress: string;
  /** What this replica knows of the fleet's load: the last sample, corrected by its own items since. */
  protected readonly fleet = new FleetView();
  protected readonly waiters = new WaiterRegistry(this.fleet, (entryId) => this.remove(entryId));
  protected stopped = false;
  readonly #settings: ReplicaSettings;
  readonly #batchers = new Map<string, QueueBatcher>();
  readonly #brokerState = new StateReporter();
  readonly #workers: WorkerGrace;
  readonly #probeTimer: NodeJS.Timeout;
  #snapshot: QueueSnapshot = EMPTY_SNAPSHOT;

  constructor(settings: ReplicaSettings, replyAddress: string) {
    this.#settings = settings;
    this.replyAddress = replyAddress;
    this.#workers = new WorkerGrace({
      graceMs: settings.workerGraceMs,
      queue: settings.queue,
      onStatus: settings.onStatus,
      waiters: this.waiters,
      noWorker: () =>
        unavailable(
          `No worker has served the queue \`${settings.queue}\` for ${settings.heartbeatTtlMs} ms` +
            (settings.workerGraceMs > 0 ? ` and none came back within ${settings.workerGraceMs} ms; retry` : '; retry'),
          settings.retryAfterSeconds,
        ),
    });
    // Heartbeats (or announces) this replica and samples the queue: admission reads the sample.
    this.#probeTimer = setInterval(() => this.#probe(), Math.max(1, Math.min(SAMPLE_MS, settings.heartbeatTtlMs / 3)));
    this.#probeTimer.unref();
  }

  /** Whether the broker is reachable now. */
  abstract get connected(): boolean;
  /** Live workers as far as this replica knows without asking; `undefined` where `enqueue` checks for one. */
  protected abstract knownWorkers(): number | undefined;
  /** Adds a group's request entries (each `requestFields`), all or none. */
  protected abstract enqueue(requests: ReadonlyArray<readonly string[]>): Promise<Enqueued>;
  /** Takes an entry back out of the queue (cancelled, expired, refused with its group); failures are ignored. */
  protected abstract remove(entryId: string): void;
  /**
   * Heartbeats this replica and samples the queue, reporting with {@link sampled} and {@link observeWorkers}; called
   * every 50 ms at most until closed, whether connected or not (a broker knows which of its connections it needs).
   */
  protected abstract probe(ownWaiting: number): void | Promise<void>;
  /** Closes the broker's connections once every batcher is closed. */
  protected abstract disconnect(): Promise<void>;
  abstract workersAlive(): Promise<number>;

  /** The public handle (see {@link TransportQueue}). */
  facade(replicaId: string): TransportQueue {
    return {
      replicaId,
      ready: this.ready,
      batcher: (name) => this.batcher(name, false).facade as never,
      streamingBatcher: (name) => this.batcher(name, true).facade as never,
      isConnected: () => this.connected,
      workersAlive: () => this.workersAlive(),
      snapshot: () => this.#snapshot,
      load: () => this.fleet.load(this.ownWaiting()),
      timeoutMs: this.#settings.timeoutMs,
      isReady: async () => this.connected && (await this.workersAlive()) > 0,
      close: (closeOptions) => this.close(closeOptions),
    };
  }

  get snapshot(): QueueSnapshot {
    return this.#snapshot;
  }

  batcher(name: string, streaming: boolean): QueueBatcher {
    return namedBatcher(this.#batchers, name, streaming, this);
  }

  /** This replica's items not yet started by a worker. */
  protected ownWaiting(): number {
    let waiting = 0;
    for (const batcher of this.#batchers.values()) waiting += batcher.tally.waiting;
    return waiting;
  }

  #probe(): void {
    if (this.stopped) return;
    void this.probe(this.ownWaiting());
  }

  /** Records a sample of the queue: the snapshot, and the fleet's load admission reads. */
  protected sampled(sample: ReplicaSample): void {
    const { waiting, running, workersAlive, workerSettings } = sample;
    this.#snapshot = { waiting, running, workersAlive, workerSettings, sampledAt: Date.now() };
    this.fleet.sampled({
      waiting,
      ownWaiting: sample.ownWaiting,
      workers: workerSettings,
      others: mergeLoads(sample.loads),
      clockOffsetMs: sample.clockOffsetMs,
    });
  }

  /** Reports workers gone or back; once none has been alive for `workerGraceMs`, answers the items waiting 503. */
  protected observeWorkers(alive: number): void {
    this.#workers.observe(alive);
  }

  /** The broker's state: reported once per change; lost, the items waiting fail (`lost`: why, when they do). */
  protected brokerChanged(connected: boolean, error?: unknown): void {
    if (!this.#brokerState.set(connected)) return;
    const queue = this.#settings.queue;
    emitStatus(
      this.#settings.onStatus,
      connected ? { event: 'broker-up', queue } : { event: 'broker-down', queue, error: describeError(error) },
    );
    if (connected) this.#probe();
  }

  /** Whether the broker's state was ever reported (a replica still connecting is not "down"). */
  protected get brokerKnown(): boolean {
    return this.#brokerState.state !== undefined;
  }

  /** Their answers can no longer arrive: fails every item waiting with a 503. */
  protected connectionLost(): void {
    this.waiters.failAll(
      unavailable(`Lost the connection to the queue (${this.brokerName}); retry`, this.#settings.retryAfterSeconds),
    );
  }

  /** An answer arrived: to its waiter, unless answered already (first answer wins), cancelled, or expired. */
  protected onReply(entry: ReplyEntry): void {
    const waiter = this.waiters.get(entry.itemId);
    if (waiter !== undefined) routeReply(waiter, entry, this.#settings.retryAfterSeconds);
  }

  /**
   * Sends a group of items (one for a single call): checked here, then enqueued by the broker, admitted together or
   * refused together; each settles with its answer.
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
    if (!this.connected)
      return refuse(unavailable(`The queue (${this.brokerName}) is unreachable; retry`, retryAfterSeconds));
    if (this.knownWorkers() === 0) return refuse(this.#noWorker());
    if (this.waiters.size + items.length > maxQueueSize) return refuse(this.#queueFull(undefined, items.length));
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
            {
              cause: error,
            },
          ),
        );
      }
    }
    const timeoutMs = Math.min(this.#settings.timeoutMs, call.timeoutMs ?? Number.POSITIVE_INFINITY);
    const waiters = items.map((item) =>
      this.waiters.register(owner, item, call, timeoutMs, fairnessKey, traceItem(this.#settings.tracer, owner.name)),
    );
    const requests = waiters.map((waiter, index) =>
      requestFields(
        waiter.itemId,
        owner.name,
        this.replyAddress,
        Number.isFinite(timeoutMs) ? timeoutMs : undefined,
        owner.streaming,
        payloads[index] as string,
        waiter.trace.field,
      ),
    );
    void this.enqueue(requests)
      .catch((error: unknown): Enqueued => ({ entryIds: [], refused: { error } }))
      .then(({ entryIds, refused }) => this.#enqueued(waiters, entryIds, refused));
  }

  #enqueued(
    waiters: readonly RegisteredWaiter[],
    entryIds: ReadonlyArray<string | undefined>,
    refused: Enqueued['refused'],
  ): void {
    waiters.forEach((waiter, index) => {
      const entryId = entryIds[index];
      if (entryId === undefined) return;
      waiter.entryId = entryId;
      // Refused with its group, cancelled or expired while it was being added: take it back out.
      if (refused !== undefined || !this.waiters.has(waiter.itemId)) this.remove(entryId);
    });
    if (refused === undefined) return;
    const error =
      'noWorker' in refused
        ? this.#noWorker()
        : 'full' in refused
          ? this.#queueFull(refused.full, waiters.length)
          : unavailable(
              `The queue (${this.brokerName}) did not take the item; retry`,
              this.#settings.retryAfterSeconds,
              refused.error,
            );
    for (const waiter of waiters) waiter.settle(error);
  }

  /** How a broker says which workers it counts: `heartbeated` (Redis), `heard from` (NATS). */
  protected abstract readonly workerSign: string;

  #noWorker(): BatchError {
    const { queue, heartbeatTtlMs, retryAfterSeconds } = this.#settings;
    return unavailable(
      `No worker is serving the queue \`${queue}\` (none ${this.workerSign} within ${heartbeatTtlMs} ms); retry`,
      retryAfterSeconds,
    );
  }

  /** `full`: what the broker found full; `undefined`: this replica's own bound. */
  #queueFull(full: string | undefined, adding = 1): BatchError {
    const size = full ?? `${this.waiters.size} items of this replica`;
    const what = adding === 1 ? '' : `: no room for ${adding} items together`;
    return new BatchError(
      ErrorCode.QUEUE_FULL,
      `The queue is full (${size}, limit ${this.#settings.maxQueueSize})${what}`,
      { retryAfterSeconds: this.#settings.retryAfterSeconds },
    );
  }

  async closeBatcher(batcher: QueueBatcher, options: CloseOptions = {}): Promise<void> {
    await this.waiters.closeBatcher(batcher, options);
  }

  async close(options: CloseOptions = {}): Promise<void> {
    await Promise.all([...this.#batchers.values()].map((batcher) => batcher.close(options)));
    this.stopped = true;
    clearInterval(this.#probeTimer);
    await this.disconnect();
  }
}
