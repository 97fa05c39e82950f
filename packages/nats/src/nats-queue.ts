import { randomBytes } from 'node:crypto';
import { BatchError, ErrorCode } from '@microbatch/core';
import type { Batcher, CallOptions, CloseOptions, FleetLoad, StreamingBatcher } from '@microbatch/core';
import { jetstream } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  EMPTY_SNAPSHOT,
  WaiterRegistry,
  FleetView,
  type QueueBackend,
  type QueueBatcher,
  type QueueBatcherStats,
  type QueueSnapshot,
  StateReporter,
  WorkerGrace,
  type Submission,
  type RegisteredWaiter,
  emitStatus,
  fieldMap,
  fleetKey,
  mergeLoads,
  namedBatcher,
  requestFields,
  routeReply,
  toReplyEntry,
  traceItem,
  unavailable,
} from '@microbatch/transport';
import { type BrokerConnection, ensureStream, isNotFound, manager, openBroker } from './broker.js';
import { type QueueNames, queueNames } from './names.js';
import { type NatsQueueOptions, type ResolvedQueueOptions, resolveQueueOptions } from './options.js';
import { type ReplicaAnnouncement, ReplicaLoads, WorkerRoster } from './worker-roster.js';

/**
 * A web replica's side of a NATS JetStream queue: batchers whose items are messages of the queue's work-queue
 * stream, answered by whichever worker pulls them, on this replica's own reply subject.
 *
 * @example
 * ```ts
 * const queue = createNatsQueue({ url: 'nats://127.0.0.1:4222', queue: 'tinystories-656k' });
 * const generate = queue.batcher<TextGenerationInput, TextGenerationOutput>('generate');
 * app.get('/', batchRoute({ batcher: generate, input: (req) => parse(req.query) }));
 * ```
 */
export interface NatsQueue {
  /** This replica's id (its reply subject's last token). */
  readonly replicaId: string;
  /** Resolves once connected, with the stream in place and the live workers heard from. */
  readonly ready: Promise<void>;
  /** A batcher whose items run on the workers' `handlers[name]`. */
  batcher<I, O>(name: string): NatsBatcher<I, O>;
  /** A streaming batcher whose items run on the workers' `streamingHandlers[name]`; values arrive as produced. */
  streamingBatcher<I, O>(name: string): NatsStreamingBatcher<I, O>;
  /** Whether the connection to NATS is up now. */
  isConnected(): boolean;
  /** How many workers were heard from within `heartbeatTtlMs` (asking them at once when none was). */
  workersAlive(): Promise<number>;
  /** The whole queue as last sampled (every 50 ms at most): waiting, running, live workers. */
  snapshot(): QueueSnapshot;
  /**
   * The fleet's load now, for latency-aware and fair admission across replicas (serving's `ReplicaAdmission`):
   * the stream's waiting entries, each live worker's latency fit and running batches (from its announcements), and
   * the items in flight of each fairness key across every replica (from theirs), plus what this replica did since.
   */
  load(): FleetLoad;
  /** The longest deadline an item can have here (`timeoutMs`): an HTTP server's timeouts must be longer. */
  readonly timeoutMs: number;
  /** Connected and at least one worker alive: for readiness probes. */
  isReady(): Promise<boolean>;
  /** Closes every batcher (new calls `CLOSED`), waits for the items in flight, then closes the connection. */
  close(options?: CloseOptions): Promise<void>;
}

/** A core `Batcher` whose `stats()` also samples the shared queue (see {@link QueueBatcherStats}). */
export interface NatsBatcher<I, O> extends Batcher<I, O> {
  stats(): QueueBatcherStats;
}
/** A core `StreamingBatcher` whose `stats()` also samples the shared queue (see {@link QueueBatcherStats}). */
export interface NatsStreamingBatcher<I, O> extends StreamingBatcher<I, O> {
  stats(): QueueBatcherStats;
}

/**
 * Connects a web replica to a NATS JetStream queue: see {@link NatsQueue}. Returns at once; while NATS is
 * unreachable, or no worker is alive, calls are refused with 503 `UNAVAILABLE` at once and items waiting for
 * answers fail the same way; the connection comes back on its own.
 *
 * @example
 * ```ts
 * const queue = createNatsQueue({ url: process.env.NATS_URL, queue: 'tinystories-656k', maxQueueSize: 512 });
 * await queue.ready;
 * ```
 */
export function createNatsQueue(options: NatsQueueOptions): NatsQueue {
  const settings = resolveQueueOptions(options);
  const replicaId = settings.replicaId ?? randomBytes(6).toString('hex');
  const core = new ReplicaCore(settings, queueNames(settings.prefix, settings.queue), replicaId);
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

/** How often at most a replica samples the queue and announces its load (ms). */
const SAMPLE_MS = 50;

class ReplicaCore implements QueueBackend {
  readonly brokerName = 'NATS';
  readonly workerFactory = 'createNatsWorker';
  readonly ready: Promise<void>;
  readonly #settings: ResolvedQueueOptions;
  readonly #names: QueueNames;
  readonly #replySubject: string;
  readonly #broker: BrokerConnection;
  readonly #batchers = new Map<string, QueueBatcher>();
  readonly #roster: WorkerRoster;
  /** What this replica knows of the fleet's load: the last sample, corrected by its own items since. */
  readonly #fleet = new FleetView();
  readonly #waiters = new WaiterRegistry(this.#fleet, (entryId) => this.#delete(entryId));
  readonly #otherReplicas: ReplicaLoads;
  #connection: NatsConnection | undefined;
  #client: JetStreamClient | undefined;
  #manager: JetStreamManager | undefined;
  #up = false;
  #sampling = false;
  #stopped = false;
  #snapshot: QueueSnapshot = EMPTY_SNAPSHOT;
  readonly #probeTimer: NodeJS.Timeout;
  readonly #brokerState = new StateReporter();
  readonly #workers: WorkerGrace;

  constructor(settings: ResolvedQueueOptions, names: QueueNames, replicaId: string) {
    this.#settings = settings;
    this.#names = names;
    this.#replySubject = names.reply(replicaId);
    this.#otherReplicas = new ReplicaLoads(this.#replySubject);
    this.#workers = new WorkerGrace({
      graceMs: settings.workerGraceMs,
      queue: settings.queue,
      onStatus: settings.onStatus,
      waiters: this.#waiters,
      noWorker: () => this.#noWorker(),
    });
    // A worker arriving or leaving is reported (and, the last one gone, the waiting items answered) at once.
    this.#roster = new WorkerRoster(settings.heartbeatTtlMs, () => this.#probe());
    let becameReady!: () => void;
    this.ready = new Promise<void>((resolve) => (becameReady = resolve));
    this.#broker = openBroker(settings.url, `microbatch:replica:${replicaId}`, {
      onUp: async (connection) => {
        if (this.#connection === undefined) this.#subscribe(connection);
        if (await this.#setUp(connection)) becameReady();
      },
      onDown: (error) => {
        this.#up = false;
        this.#onConnection(false, error);
        // Answers are published on core NATS: what a worker sends now is lost. Fail the items waiting at once.
        this.#waiters.failAll(
          unavailable('Lost the connection to the queue (NATS); retry', settings.retryAfterSeconds),
        );
      },
    });
    // Announces this replica (its liveness and its fairness keys' load) and samples the queue, as often as Redis's
    // replicas do: admission reads the sample, and other replicas' arrivals since it are not seen.
    this.#probeTimer = setInterval(
      () => {
        this.#announce(false);
        this.#probe();
      },
      Math.max(1, Math.min(SAMPLE_MS, settings.heartbeatTtlMs / 3)),
    );
    this.#probeTimer.unref();
  }

  /**
   * Makes sure the stream exists with this replica's bound (after a NATS restart without its store it is gone), then
   * asks the workers to announce themselves. Retries while JetStream is not ready yet (a server still starting).
   */
  async #setUp(connection: NatsConnection): Promise<boolean> {
    const { commandTimeoutMs, maxQueueSize } = this.#settings;
    while (!this.#stopped && !connection.isClosed()) {
      try {
        const jsm = await manager(connection, commandTimeoutMs);
        await ensureStream(jsm, this.#names, maxQueueSize);
        this.#manager = jsm;
        this.#client = jetstream(connection, { timeout: commandTimeoutMs });
        await this.#roster.ping(connection, this.#names.ping);
        this.#up = true;
        this.#onConnection(true);
        this.#probe();
        return true;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
    return false;
  }

  /** The reply subject and the workers' announcements; NATS keeps both subscriptions across reconnects. */
  #subscribe(connection: NatsConnection): void {
    this.#connection = connection;
    connection.subscribe(this.#replySubject, {
      callback: (error, msg) => {
        if (error !== null) return;
        let fields: unknown;
        try {
          fields = JSON.parse(msg.string());
        } catch {
          return;
        }
        const entry = toReplyEntry('', fieldMap(fields));
        const waiter = entry === undefined ? undefined : this.#waiters.get(entry.itemId);
        // Answered already (first answer wins), cancelled, or expired: ignored.
        if (entry !== undefined && waiter !== undefined) routeReply(waiter, entry, this.#settings.retryAfterSeconds);
      },
    });
    this.#roster.listen(connection, this.#names.workers);
    connection.subscribe(this.#names.replicas, {
      callback: (error, msg) => {
        if (error === null) this.#otherReplicas.record(msg.string());
      },
    });
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

  /**
   * Tells the workers this replica is alive (every third of `heartbeatTtlMs`), or gone: a worker drops the entries of
   * a replica silent for longer than its `heartbeatTtlMs` (killed) instead of running them for nobody.
   */
  #announce(gone: boolean): void {
    if (!this.#up) return;
    const announcement: ReplicaAnnouncement = {
      reply: this.#replySubject,
      ttlMs: this.#settings.heartbeatTtlMs,
      ...(gone ? { gone } : { load: this.#fleet.published() }),
    };
    try {
      this.#connection?.publish(this.#names.replicas, JSON.stringify(announcement));
    } catch {
      // Closed: its silence says the same.
    }
  }

  get snapshot(): QueueSnapshot {
    return this.#snapshot;
  }

  get connected(): boolean {
    return this.#up;
  }

  #onConnection(connected: boolean, error?: unknown): void {
    if (!this.#brokerState.set(connected)) return;
    const queue = this.#settings.queue;
    emitStatus(
      this.#settings.onStatus,
      connected
        ? { event: 'broker-up', queue }
        : { event: 'broker-down', queue, error: error instanceof Error ? error.message : String(error) },
    );
  }

  /**
   * Forgets workers not heard from within `heartbeatTtlMs`, samples the queue (the consumer's pending and
   * unacknowledged counts); when no worker has been alive for `workerGraceMs`, answers the items waiting 503 (a
   * replacement within the grace serves them).
   */
  #probe(): void {
    if (this.#stopped || !this.#up) return;
    const alive = this.#roster.alive();
    const ownWaiting = this.#ownWaiting();
    const sampled = (waiting: number, running: number): void => {
      const workerSettings = this.#roster.settings();
      this.#snapshot = { waiting, running, workersAlive: this.#roster.alive(), workerSettings, sampledAt: Date.now() };
      this.#fleet.sampled({
        waiting,
        ownWaiting,
        workers: workerSettings,
        others: mergeLoads(this.#otherReplicas.loads()),
        clockOffsetMs: 0,
      });
    };
    // One sample in flight at most: a slow server gets no pile of requests.
    if (this.#manager !== undefined && !this.#sampling) {
      this.#sampling = true;
      void this.#manager.consumers
        .info(this.#names.stream, this.#names.consumer)
        .then((info) => sampled(info.num_pending, info.num_ack_pending))
        // No worker ever created the consumer yet: nothing waits or runs. Any other failure keeps the last sample.
        .catch((error: unknown) => {
          if (isNotFound(error)) sampled(0, 0);
        })
        .finally(() => (this.#sampling = false));
    }
    // Reports workers gone or back; once none has been alive for `workerGraceMs`, answers the items waiting 503.
    this.#workers.observe(alive);
  }

  async workersAlive(): Promise<number> {
    if (!this.#up || this.#connection === undefined) return 0;
    if (this.#roster.alive() > 0) return this.#roster.alive();
    await this.#roster.ping(this.#connection, this.#names.ping);
    return this.#roster.alive();
  }

  batcher(name: string, streaming: boolean): QueueBatcher {
    return namedBatcher(this.#batchers, name, streaming, this);
  }

  /**
   * Sends a group of items (one for a single call): checked here, then published; the stream's bound refuses what
   * does not fit. A group is admitted together or refused together: if one of its messages is refused, the others
   * are deleted again.
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
    const client = this.#client;
    if (!this.#up || client === undefined)
      return refuse(unavailable('The queue (NATS) is unreachable; retry', retryAfterSeconds));
    if (this.#roster.alive() === 0) return refuse(this.#noWorker());
    if (this.#waiters.size + items.length > maxQueueSize) return refuse(this.#queueFull(false, items.length));
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
      this.#waiters.register(owner, item, call, timeoutMs, fairnessKey, traceItem(this.#settings.tracer, owner.name)),
    );
    const published = waiters.map((waiter, index) =>
      client.publish(
        this.#names.requests,
        JSON.stringify(
          requestFields(
            waiter.itemId,
            owner.name,
            this.#replySubject,
            Number.isFinite(timeoutMs) ? timeoutMs : undefined,
            owner.streaming,
            payloads[index] as string,
            waiter.trace.field,
          ),
        ),
      ),
    );
    void Promise.allSettled(published).then((outcomes) => {
      const refused = outcomes.find((outcome) => outcome.status === 'rejected');
      outcomes.forEach((outcome, index) => {
        const waiter = waiters[index] as RegisteredWaiter;
        if (outcome.status === 'fulfilled') {
          waiter.entryId = String(outcome.value.seq);
          // Refused with its group, cancelled or expired while it was being added: take it back out.
          if (refused !== undefined || !this.#waiters.has(waiter.itemId)) this.#delete(waiter.entryId);
        }
      });
      if (refused === undefined) return;
      const reason: unknown = refused.reason;
      const error = isStreamFull(reason)
        ? this.#queueFull(true, waiters.length)
        : unavailable('The queue (NATS) did not take the item; retry', retryAfterSeconds, reason);
      for (const waiter of waiters) waiter.settle(error);
    });
  }

  #noWorker(): BatchError {
    return unavailable(
      `No worker is serving the queue \`${this.#settings.queue}\` (none heard from within ${this.#settings.heartbeatTtlMs} ms); retry`,
      this.#settings.retryAfterSeconds,
    );
  }

  #delete(entryId: string): void {
    this.#manager?.streams.deleteMessage(this.#names.stream, Number(entryId), false).catch(() => undefined);
  }

  #queueFull(shared: boolean, adding = 1): BatchError {
    const size = shared ? 'the stream is at its bound' : `${this.#waiters.size} items of this replica`;
    const what = adding === 1 ? '' : `: no room for ${adding} items together`;
    return new BatchError(
      ErrorCode.QUEUE_FULL,
      `The queue is full (${size}, limit ${this.#settings.maxQueueSize})${what}`,
      { retryAfterSeconds: this.#settings.retryAfterSeconds },
    );
  }

  async closeBatcher(batcher: QueueBatcher, options: CloseOptions = {}): Promise<void> {
    await this.#waiters.closeBatcher(batcher, options);
  }

  async close(options: CloseOptions = {}): Promise<void> {
    await Promise.all([...this.#batchers.values()].map((batcher) => batcher.close(options)));
    this.#stopped = true;
    clearInterval(this.#probeTimer);
    this.#announce(true);
    await this.#broker.close();
  }
}

/** The stream refused the message: at its `max_msgs` bound (`discard: new`). */
function isStreamFull(error: unknown): boolean {
  return /maximum messages/i.test(error instanceof Error ? error.message : String(error));
}
