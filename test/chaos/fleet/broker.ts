// The chaos run's broker: a redis-server or nats-server -js of its own (test-kit), killed and restarted on the same
// port, and asked after the run what request entries it still holds.
import { execFile } from 'node:child_process';
import { type JetStreamManager, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { type TestNats, type TestRedis, startNatsServer, startRedisServer } from '@microbatch/test-kit';

export type BrokerKind = 'redis' | 'nats';

/** Request entries a broker still holds for the queue. */
export interface Leftovers {
  /** Entries in the requests stream (Redis `XLEN`; NATS: the work-queue stream's messages). */
  readonly entries: number;
  /** Entries delivered and not acknowledged (Redis `XPENDING`; NATS: the consumer's ack-pending count). */
  readonly pending: number;
  readonly detail: string;
}

/** A broker the run started. */
export interface ChaosBroker {
  readonly kind: BrokerKind;
  readonly url: string;
  /** How a restart finds its data, for the report. */
  readonly persistence: string;
  kill(): Promise<void>;
  restart(): Promise<void>;
  leftovers(): Promise<Leftovers>;
  stop(): Promise<void>;
}

/** Options of {@link startBroker}. */
export interface BrokerOptions {
  /** The queue's name (its last part), as the CLI's `--model` names it on a replica. */
  readonly queue: string;
  /**
   * Redis only: keep an AOF (`appendfsync always`), so a restarted Redis comes back with its streams; without it a
   * restart is empty (the queue, its consumer group and every entry lost).
   * @default true
   */
  readonly redisAppendOnly?: boolean;
}

/**
 * Starts the broker of a chaos run on a free port of 127.0.0.1.
 *
 * @example
 * ```ts
 * const broker = await startBroker('nats', { queue: 'tinystories-656k' });
 * await broker.kill();
 * await broker.restart(); // same port, same store: the streams survive
 * ```
 */
export async function startBroker(kind: BrokerKind, options: BrokerOptions): Promise<ChaosBroker> {
  if (kind === 'redis')
    return redisBroker(await startRedisServer({ appendOnly: options.redisAppendOnly ?? true }), options.queue);
  if (kind === 'nats') return natsBroker(await startNatsServer(), options.queue);
  throw new TypeError(`Expected the broker to be 'redis' or 'nats', got ${JSON.stringify(kind)}`);
}

function redisBroker(redis: TestRedis, queue: string): ChaosBroker {
  const requests = `microbatch:${queue}:requests`;
  return {
    kind: 'redis',
    url: redis.url,
    persistence: redis.appendOnly
      ? 'AOF (appendfsync always) in its own folder: a restart keeps the streams'
      : 'none: a restart is empty',
    kill: () => redis.kill(),
    restart: () => redis.restart(),
    stop: () => redis.stop(),
    leftovers: async () => {
      const entries = Number(await redisCli(redis.port, ['XLEN', requests]));
      // XPENDING's summary starts with the count; a stream or group that is gone holds nothing.
      const summary = await redisCli(redis.port, ['XPENDING', requests, 'workers']).catch(() => '0');
      const pending = Number(summary.split('\n')[0]);
      return { entries, pending, detail: `XLEN ${requests} = ${entries}, XPENDING ${requests} workers = ${pending}` };
    },
  };
}

function natsBroker(nats: TestNats, queue: string): ChaosBroker {
  const stream = `microbatch_${queue}`;
  return {
    kind: 'nats',
    url: nats.url,
    persistence: '-js with its own store folder (-sd): a restart keeps the file-stored streams',
    kill: () => nats.kill(),
    restart: () => nats.restart(),
    stop: () => nats.stop(),
    leftovers: async () => {
      const connection = await connect({ servers: nats.url, reconnect: false });
      try {
        const manager = await jetstreamManager(connection);
        const info = await manager.streams.info(stream);
        const consumers = await manager.consumers.list(stream).next();
        const pending = consumers.reduce((sum, consumer) => sum + consumer.num_ack_pending, 0);
        // Where each consumer stands, so an entry left behind can be told apart: never delivered, or given up on.
        const where = consumers.map(
          (consumer) =>
            `${consumer.name}: ${consumer.num_pending} undelivered, ${consumer.num_ack_pending} ack pending, ` +
            `${consumer.num_redelivered} redelivered, delivered up to seq ${consumer.delivered.stream_seq}, ` +
            `ack floor seq ${consumer.ack_floor.stream_seq}`,
        );
        const { messages, first_seq: first, last_seq: last } = info.state;
        const left =
          messages === 0 ? '' : `; left: ${(await storedTimes(manager, stream, first, last, messages)).join(', ')}`;
        return {
          entries: messages,
          pending,
          detail: `stream ${stream}: ${messages} messages (seq ${first}..${last}); consumers: ${where.join('; ') || 'none'}${left}`,
        };
      } finally {
        await connection.close();
      }
    },
  };
}

/** At most this many entries left behind are listed, each with its sequence and when the stream stored it. */
const LISTED_LEFTOVERS = 20;

/**
 * `seq@time` of the messages a stream still holds (the first {@link LISTED_LEFTOVERS}), so they can be matched with
 * the fault log's times: left by a broker restart, a worker's kill, or a replica's.
 */
async function storedTimes(
  manager: JetStreamManager,
  stream: string,
  first: number,
  last: number,
  messages: number,
): Promise<string[]> {
  const found: string[] = [];
  for (let seq = first; seq <= last && found.length < Math.min(messages, LISTED_LEFTOVERS); seq += 1) {
    const message = await manager.streams.getMessage(stream, { seq }).catch(() => null);
    if (message !== null) found.push(`${seq}@${message.time.toISOString()}`);
  }
  return found;
}

/** One reply from Redis, through the `redis-cli` that comes with `redis-server`. */
function redisCli(port: number, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', ['-p', String(port), ...args], (error, stdout) => {
      const reply = stdout.trim();
      // redis-cli prints an error reply (NOGROUP) on stdout and exits 0: a reply that is not a number is an error.
      if (error !== null) reject(error);
      else if (reply.startsWith('(error)') || reply.startsWith('ERR') || reply.startsWith('NOGROUP')) {
        reject(new Error(reply));
      } else resolve(reply);
    });
  });
}
