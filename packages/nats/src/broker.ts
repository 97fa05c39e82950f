// The NATS connection and the JetStream objects a queue needs: its work-queue stream and its workers' consumer.
import { AckPolicy, DiscardPolicy, RetentionPolicy, StorageType, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { describeError } from '@microbatch/transport';
import type { QueueNames } from './names.js';

/** What a connection reports: up (first connect and every reconnect) and down (lost, or not reached at start). */
export interface ConnectionEvents {
  onUp(connection: NatsConnection): void | Promise<void>;
  /** Lost; or, before the first connection, a try that failed (once per outage: the next is only after an up). */
  onDown(error: string): void;
}

/** A connection that connects in the background and reconnects forever until `close()`. */
export interface BrokerConnection {
  /** The connection once made (it stays the same object across reconnects). */
  readonly current: NatsConnection | undefined;
  /** Stops connecting, drains what is buffered (at most `DRAIN_MS`: NATS may be gone) and closes; never hangs. */
  close(): Promise<void>;
}

/** How long `close()` lets buffered messages drain before it closes anyway. */
const DRAIN_MS = 2_000;
/** Between two tries to reach a server that is not up yet. */
const RETRY_MS = 250;

/**
 * Connects to `url` in the background, trying again every 250 ms while no server answers (the first failure goes
 * to `onDown`, so a process started before NATS says why it is not ready), and reconnects forever once connected:
 * NATS keeps the connection object (and its subscriptions) across reconnects. An `onUp` that throws is reported as
 * `onDown`, never an unhandled rejection.
 *
 * @example
 * ```ts
 * const broker = openBroker('nats://127.0.0.1:4222', 'microbatch:replica:a1', { onUp, onDown });
 * ```
 */
export function openBroker(url: string, name: string, events: ConnectionEvents): BrokerConnection {
  let current: NatsConnection | undefined;
  let closed = false;
  let wake: (() => void) | undefined;
  const { hostname, port, username, password, protocol } = new URL(url);
  const options = {
    servers: `${hostname}:${port === '' ? 4222 : port}`,
    name,
    ...(username === '' ? {} : { user: decodeURIComponent(username), pass: decodeURIComponent(password) }),
    ...(protocol === 'tls:' ? { tls: {} } : {}),
    maxReconnectAttempts: -1,
    reconnectTimeWait: RETRY_MS,
    reconnectJitter: 50,
  };
  const up = (connection: NatsConnection): void => {
    Promise.resolve()
      .then(() => events.onUp(connection))
      .catch((error: unknown) => events.onDown(describeError(error)));
  };
  // Not `waitOnFirstConnect`: it retries silently, and its promise never settles while no server answers.
  void (async () => {
    let failed = false;
    while (!closed) {
      try {
        const connection = await connect(options);
        if (closed) {
          // Closed while this try was under way: `close()` did not wait for it.
          await connection.close().catch(() => undefined);
          return;
        }
        current = connection;
        void watch(connection);
        up(connection);
        return;
      } catch (error) {
        if (!failed) events.onDown(describeError(error));
        failed = true;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, RETRY_MS);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
    }
  })();
  async function watch(connection: NatsConnection): Promise<void> {
    try {
      for await (const status of connection.status()) {
        if (status.type === 'disconnect') events.onDown('connection lost');
        else if (status.type === 'reconnect') up(connection);
      }
    } catch {
      // The status iterator ends with the connection.
    }
  }
  return {
    get current() {
      return current;
    },
    close: async () => {
      closed = true;
      wake?.();
      // A try under way is not waited for (it may take its whole connect timeout against a host that drops packets).
      const connection = current;
      if (connection === undefined || connection.isClosed()) return;
      // Drains what is buffered, unless NATS is gone: then it stops waiting for it.
      let timer: NodeJS.Timeout | undefined;
      const gaveUp = new Promise<void>((resolve) => (timer = setTimeout(resolve, DRAIN_MS)));
      await Promise.race([connection.drain().catch(() => undefined), gaveUp]);
      clearTimeout(timer);
      await connection.close().catch(() => undefined);
    },
  };
}

/**
 * Creates the queue's work-queue stream if missing (file storage: entries outlive a NATS restart), and sets its
 * bound when `maxMessages` is given (a web replica's `maxQueueSize`; workers leave it as it is).
 */
export async function ensureStream(
  manager: JetStreamManager,
  names: QueueNames,
  maxMessages: number | undefined,
): Promise<void> {
  const config = {
    name: names.stream,
    subjects: [names.requests],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    discard: DiscardPolicy.New,
    max_msgs: maxMessages ?? -1,
  };
  try {
    const info = await manager.streams.info(names.stream);
    if (maxMessages !== undefined && info.config.max_msgs !== maxMessages)
      await manager.streams.update(names.stream, { ...info.config, max_msgs: maxMessages });
  } catch (error) {
    if (!isNotFound(error)) throw error;
    await manager.streams.add(config).catch(async (raced: unknown) => {
      // Another process created it meanwhile: set the bound on it.
      if (maxMessages === undefined) return;
      if (!String(describeError(raced)).includes('already')) throw raced;
      const info = await manager.streams.info(names.stream);
      await manager.streams.update(names.stream, { ...info.config, max_msgs: maxMessages });
    });
  }
}

/**
 * Creates the progress stream of resumable streams if missing: one subject per entry keeping only its last message
 * (the token ids sent so far), file-stored like the entries; what a finished entry's worker did not purge (it died)
 * ages out after `maxAgeMs`.
 */
export async function ensureProgressStream(
  manager: JetStreamManager,
  names: QueueNames,
  maxAgeMs: number,
): Promise<void> {
  try {
    await manager.streams.info(names.progressStream);
  } catch (error) {
    if (!isNotFound(error)) throw error;
    await manager.streams
      .add({
        name: names.progressStream,
        subjects: [names.progress('*')],
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        discard: DiscardPolicy.Old,
        max_msgs_per_subject: 1,
        max_age: Math.round(maxAgeMs * 1e6),
      })
      .catch((raced: unknown) => {
        if (!String(describeError(raced)).includes('already')) throw raced;
      });
  }
}

/**
 * Removes entries the workers' consumer has acknowledged but the stream still holds, and returns how many. A
 * work-queue stream deletes an entry when it is acknowledged, but nats-server (2.9 here) can keep some: after a crash
 * the consumer's acknowledgement floor comes back ahead of deletions that were not yet on disk, and under chaos
 * testing acknowledged entries above the floor stayed too. Such entries are delivered to nobody again but hold the
 * queue's `max_msgs` bound for good. Everything up to the floor was acknowledged, and so was everything delivered
 * when no delivery awaits an acknowledgement or a redelivery (one consumer delivers in stream order): purging up to
 * there loses nothing.
 */
export async function dropAcknowledged(manager: JetStreamManager, names: QueueNames): Promise<number> {
  const consumer = await manager.consumers.info(names.stream, names.consumer);
  const settled =
    consumer.num_ack_pending === 0 && consumer.num_redelivered === 0
      ? Math.max(consumer.delivered.stream_seq, consumer.ack_floor.stream_seq)
      : consumer.ack_floor.stream_seq;
  const stream = await manager.streams.info(names.stream);
  if (stream.state.messages === 0 || stream.state.first_seq > settled) return 0;
  const { purged } = await manager.streams.purge(names.stream, { seq: settled + 1 });
  return purged;
}

/** Creates (or updates) the durable pull consumer every worker shares: explicit acks, `ack_wait`. */
export async function ensureConsumer(
  manager: JetStreamManager,
  names: QueueNames,
  settings: { readonly claimIdleMs: number },
): Promise<void> {
  const config = {
    durable_name: names.consumer,
    ack_policy: AckPolicy.Explicit,
    ack_wait: Math.round(settings.claimIdleMs * 1e6),
    // Unlimited: the worker answers 500 (and acknowledges) any delivery past `maxDeliveries`. A JetStream
    // `max_deliver` would leave an entry whose acknowledgement was lost in the stream for good, holding the bound.
    max_deliver: -1,
    max_ack_pending: -1,
    max_waiting: 4_096,
  };
  try {
    await manager.consumers.add(names.stream, config);
  } catch (error) {
    if (!describeError(error).includes('exist')) throw error;
    await manager.consumers.update(names.stream, names.consumer, {
      ack_wait: config.ack_wait,
      max_deliver: config.max_deliver,
    });
  }
}

export function manager(connection: NatsConnection, timeout: number): Promise<JetStreamManager> {
  return jetstreamManager(connection, { timeout });
}

export function isNotFound(error: unknown): boolean {
  return /not found/i.test(describeError(error));
}
