import { randomBytes } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  type Enqueued,
  ReplicaQueue,
  type TransportBatcher,
  type TransportQueue,
  type TransportStreamingBatcher,
  fieldMap,
  toReplyEntry,
} from '@microbatch/transport';
import { type BrokerConnection, ensureStream, isNotFound, manager, openBroker } from './broker.js';
import { type QueueNames, queueNames } from './names.js';
import { type NatsQueueOptions, type ResolvedQueueOptions, resolveQueueOptions } from './options.js';
import { type ReplicaAnnouncement, ReplicaLoads, WorkerRoster } from './worker-roster.js';

/**
 * A web replica's side of a NATS JetStream queue: batchers whose items are messages of the queue's work-queue
 * stream, answered by whichever worker pulls them, on this replica's own reply subject. `ready` resolves once
 * connected, with the stream in place and the live workers heard from; `load()` reads the workers' and the other
 * replicas' announcements.
 *
 * @example
 * ```ts
 * const queue = createNatsQueue({ url: 'nats://127.0.0.1:4222', queue: 'tinystories-656k' });
 * const generate = queue.batcher<TextGenerationInput, TextGenerationOutput>('generate');
 * app.get('/', batchRoute({ batcher: generate, input: (req) => parse(req.query) }));
 * ```
 */
export interface NatsQueue extends TransportQueue {
  batcher<I, O>(name: string): NatsBatcher<I, O>;
  streamingBatcher<I, O>(name: string): NatsStreamingBatcher<I, O>;
}

/** A core `Batcher` whose `stats()` also samples the shared queue (see `QueueBatcherStats`). */
export type NatsBatcher<I, O> = TransportBatcher<I, O>;
/** A core `StreamingBatcher` whose `stats()` also samples the shared queue (see `QueueBatcherStats`). */
export type NatsStreamingBatcher<I, O> = TransportStreamingBatcher<I, O>;

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
  return new NatsReplica(settings, queueNames(settings.prefix, settings.queue), replicaId).facade(replicaId);
}

/** A replica on NATS: items are messages of the work-queue stream, answers arrive on this replica's reply subject. */
class NatsReplica extends ReplicaQueue {
  readonly brokerName = 'NATS';
  readonly workerFactory = 'createNatsWorker';
  protected readonly workerSign = 'heard from';
  readonly ready: Promise<void>;
  readonly #settings: ResolvedQueueOptions;
  readonly #names: QueueNames;
  readonly #broker: BrokerConnection;
  readonly #roster: WorkerRoster;
  readonly #otherReplicas: ReplicaLoads;
  #connection: NatsConnection | undefined;
  #client: JetStreamClient | undefined;
  #manager: JetStreamManager | undefined;
  #up = false;
  #sampling = false;

  constructor(settings: ResolvedQueueOptions, names: QueueNames, replicaId: string) {
    super(settings, names.reply(replicaId));
    this.#settings = settings;
    this.#names = names;
    this.#otherReplicas = new ReplicaLoads(this.replyAddress);
    // A worker arriving or leaving is reported (and, the last one gone, the waiting items answered) at once.
    this.#roster = new WorkerRoster(settings.heartbeatTtlMs, () => this.#sample());
    let becameReady!: () => void;
    this.ready = new Promise<void>((resolve) => (becameReady = resolve));
    this.#broker = openBroker(settings.url, `microbatch:replica:${replicaId}`, {
      onUp: async (connection) => {
        if (this.#connection === undefined) this.#subscribe(connection);
        if (await this.#setUp(connection)) becameReady();
      },
      onDown: (error) => {
        this.#up = false;
        this.brokerChanged(false, error);
        // Answers are published on core NATS: what a worker sends now is lost. Fail the items waiting at once.
        this.connectionLost();
      },
    });
  }

  /**
   * Makes sure the stream exists with this replica's bound (after a NATS restart without its store it is gone), then
   * asks the workers to announce themselves. Retries while JetStream is not ready yet (a server still starting).
   */
  async #setUp(connection: NatsConnection): Promise<boolean> {
    const { commandTimeoutMs, maxQueueSize } = this.#settings;
    while (!this.stopped && !connection.isClosed()) {
      try {
        const jsm = await manager(connection, commandTimeoutMs);
        await ensureStream(jsm, this.#names, maxQueueSize);
        this.#manager = jsm;
        this.#client = jetstream(connection, { timeout: commandTimeoutMs });
        await this.#roster.ping(connection, this.#names.ping);
        this.#up = true;
        this.brokerChanged(true);
        this.#sample();
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
    connection.subscribe(this.replyAddress, {
      callback: (error, msg) => {
        if (error !== null) return;
        let fields: unknown;
        try {
          fields = JSON.parse(msg.string());
        } catch {
          return;
        }
        const entry = toReplyEntry('', fieldMap(fields));
        if (entry !== undefined) this.onReply(entry);
      },
    });
    this.#roster.listen(connection, this.#names.workers);
    connection.subscribe(this.#names.replicas, {
      callback: (error, msg) => {
        if (error === null) this.#otherReplicas.record(msg.string());
      },
    });
  }

  /**
   * Tells the workers this replica is alive (every third of `heartbeatTtlMs`), or gone: a worker drops the entries of
   * a replica silent for longer than its `heartbeatTtlMs` (killed) instead of running them for nobody.
   */
  #announce(gone: boolean): void {
    if (!this.#up) return;
    const announcement: ReplicaAnnouncement = {
      reply: this.replyAddress,
      ttlMs: this.#settings.heartbeatTtlMs,
      ...(gone ? { gone } : { load: this.fleet.published() }),
    };
    try {
      this.#connection?.publish(this.#names.replicas, JSON.stringify(announcement));
    } catch {
      // Closed: its silence says the same.
    }
  }

  get connected(): boolean {
    return this.#up;
  }

  protected knownWorkers(): number {
    return this.#roster.alive();
  }

  /** Announces this replica (its liveness and its fairness keys' load), then samples the queue. */
  protected probe(): void {
    this.#announce(false);
    this.#sample();
  }

  /**
   * Forgets workers not heard from within `heartbeatTtlMs` and samples the queue (the consumer's pending and
   * unacknowledged counts).
   */
  #sample(): void {
    if (this.stopped || !this.#up) return;
    const alive = this.#roster.alive();
    const ownWaiting = this.ownWaiting();
    const sampled = (waiting: number, running: number): void =>
      this.sampled({
        waiting,
        running,
        workersAlive: this.#roster.alive(),
        workerSettings: this.#roster.settings(),
        loads: this.#otherReplicas.loads(),
        ownWaiting,
        clockOffsetMs: 0,
      });
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
    this.observeWorkers(alive);
  }

  async workersAlive(): Promise<number> {
    if (!this.#up || this.#connection === undefined) return 0;
    if (this.#roster.alive() > 0) return this.#roster.alive();
    await this.#roster.ping(this.#connection, this.#names.ping);
    return this.#roster.alive();
  }

  /** Publishes each entry; the stream's bound refuses what does not fit, and a group refused in part is taken out. */
  protected async enqueue(requests: ReadonlyArray<readonly string[]>): Promise<Enqueued> {
    const client = this.#client as JetStreamClient;
    const outcomes = await Promise.allSettled(
      requests.map((fields) => client.publish(this.#names.requests, JSON.stringify(fields))),
    );
    const entryIds = outcomes.map((outcome) =>
      outcome.status === 'fulfilled' ? String(outcome.value.seq) : undefined,
    );
    const refused = outcomes.find((outcome) => outcome.status === 'rejected');
    if (refused === undefined) return { entryIds };
    const reason: unknown = refused.reason;
    return { entryIds, refused: isStreamFull(reason) ? { full: 'the stream is at its bound' } : { error: reason } };
  }

  protected remove(entryId: string): void {
    this.#manager?.streams.deleteMessage(this.#names.stream, Number(entryId), false).catch(() => undefined);
  }

  protected async disconnect(): Promise<void> {
    this.#announce(true);
    await this.#broker.close();
  }
}

/** The stream refused the message: at its `max_msgs` bound (`discard: new`). */
function isStreamFull(error: unknown): boolean {
  return /maximum messages/i.test(error instanceof Error ? error.message : String(error));
}
