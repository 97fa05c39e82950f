// One driver per transport: the shared fault suite (faults.test.ts) runs the same tests through each. A driver starts
// its own broker on a free port and makes replicas and workers with the options both transports share.
import { fileURLToPath } from 'node:url';
import type { BatchHandler, BatchTracer, Batcher, StreamingBatchHandler, StreamingBatcher } from '@microbatch/core';
import { createNatsQueue, createNatsWorker } from '@microbatch/nats';
import { createRedisQueue, createRedisWorker } from '@microbatch/redis';
import type { QueueBatcherStats, QueueSnapshot, StatusListener } from '@microbatch/transport';
import { type ChildHandle, pollUntil, startNatsServer, startProcess, startRedisServer } from '@microbatch/test-kit';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { createClient } from 'redis';

/** A broker this run started. */
export interface TestBroker {
  readonly url: string;
  /** SIGKILL: the broker crashes. */
  kill(): Promise<void>;
  /** Back on the same port (Redis empty; NATS with its file store). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** What both transports' replica options share. */
export interface ReplicaOptions {
  readonly tracer?: BatchTracer;
  readonly maxQueueSize?: number;
  readonly heartbeatTtlMs?: number;
  readonly workerGraceMs?: number;
  readonly timeoutMs?: number;
  readonly onStatus?: StatusListener;
}

/** What both transports' worker options share. */
export interface WorkerOptions<I, O, C> {
  readonly handlers?: Readonly<Record<string, BatchHandler<I, O>>>;
  readonly streamingHandlers?: Readonly<Record<string, StreamingBatchHandler<I, C>>>;
  readonly maxBatchSize?: number;
  readonly claimIdleMs?: number;
  readonly maxDeliveries?: number;
  readonly heartbeatMs?: number;
}

/** A replica as the suite uses it: both `createRedisQueue` and `createNatsQueue` return one. */
export interface TestQueue {
  readonly ready: Promise<void>;
  batcher<I, O>(name: string): Batcher<I, O> & { stats(): QueueBatcherStats };
  streamingBatcher<I, O>(name: string): StreamingBatcher<I, O> & { stats(): QueueBatcherStats };
  isReady(): Promise<boolean>;
  workersAlive(): Promise<number>;
  snapshot(): QueueSnapshot;
  close(options?: { force?: boolean }): Promise<void>;
}

export interface TestWorker {
  readonly workerId: string;
  readonly ready: Promise<void>;
  stats(): {
    batches: number;
    items: number;
    meanBatchSize: number;
    expired: number;
    reclaimed: number;
    gaveUp: number;
  };
  close(): Promise<void>;
}

export interface TransportDriver {
  readonly name: 'redis' | 'nats';
  startBroker(): Promise<TestBroker>;
  replica(url: string, queue: string, options?: ReplicaOptions): TestQueue;
  worker<I, O, C>(url: string, queue: string, options: WorkerOptions<I, O, C>): TestWorker;
  /** Entries in the broker's queue (waiting or running, not yet answered). */
  depth(url: string, queue: string): Promise<number>;
  /** The fields of each request entry in the broker's queue now (`requestFields`' flat list). */
  requestEntries(url: string, queue: string): Promise<string[][]>;
  /**
   * Makes replicas of `queues` see a live worker before any runs, so entries queue up and a worker started later
   * pulls them in one batch; returns what stops it.
   */
  pretendWorkerAlive(url: string, queues: readonly string[]): Promise<() => Promise<void>>;
  /** The environment of a worker process started on this transport (its `TRANSPORT` and URL variables). */
  processEnv(url: string): Record<string, string>;
  /** A URL of this transport where nothing listens. */
  readonly unreachableUrl: string;
  /** `createRedisQueue` / `createNatsQueue` with exactly these options. */
  createQueue(options: unknown): TestQueue & { readonly timeoutMs: number };
  /** `createRedisWorker` / `createNatsWorker` with exactly these options. */
  createWorker(options: unknown): TestWorker;
}

/** A plain connection to look at the queue's keys. */
function redisClient(url: string) {
  return createClient({ url, RESP: 2 });
}
type RedisClient = ReturnType<typeof redisClient>;

export const redisDriver: TransportDriver = {
  name: 'redis',
  startBroker: startRedisServer,
  replica: (url, queue, options = {}) => createRedisQueue({ url, queue, ...options }),
  worker: (url, queue, options) => createRedisWorker({ url, queue, log: false, heartbeatMs: 100, ...options }),
  depth: async (url, queue) => {
    const client = createClient({ url, RESP: 2 });
    client.on('error', () => undefined);
    await client.connect();
    try {
      return Number(await client.sendCommand(['XLEN', `microbatch:${queue}:requests`]));
    } finally {
      client.destroy();
    }
  },
  requestEntries: (url, queue) =>
    withRedis(url, async (client) => {
      const entries = await client.sendCommand<Array<[string, string[]]>>([
        'XRANGE',
        `microbatch:${queue}:requests`,
        '-',
        '+',
      ]);
      return entries.map(([, fields]) => fields);
    }),
  // Replicas admit entries only while a worker's heartbeat is alive: one that lasts ten minutes.
  pretendWorkerAlive: async (url, queues) => {
    await withRedis(url, async (client) => {
      const [seconds] = await client.sendCommand<[string]>(['TIME']);
      for (const queue of queues)
        await client.sendCommand(['ZADD', `microbatch:${queue}:workers`, String((Number(seconds) + 600) * 1000), 'x']);
    });
    return async () => undefined;
  },
  processEnv: (url) => ({ TRANSPORT: 'redis', REDIS_URL: url }),
  unreachableUrl: 'redis://127.0.0.1:1',
  createQueue: (options) => createRedisQueue(options as never),
  createWorker: (options) => createRedisWorker(options as never),
};

async function withRedis<T>(url: string, use: (client: RedisClient) => Promise<T>): Promise<T> {
  const client = redisClient(url);
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await use(client);
  } finally {
    client.destroy();
  }
}

export const natsDriver: TransportDriver = {
  name: 'nats',
  startBroker: startNatsServer,
  replica: (url, queue, options = {}) => createNatsQueue({ url, queue, ...options }),
  worker: (url, queue, options) => createNatsWorker({ url, queue, log: false, heartbeatMs: 100, ...options }),
  depth: async (url, queue) => {
    const connection = await connect({ servers: url.replace('nats://', '') });
    try {
      const manager = await jetstreamManager(connection);
      return (await manager.streams.info(`microbatch_${queue}`)).state.messages;
    } catch {
      return 0;
    } finally {
      await connection.close();
    }
  },
  requestEntries: async (url, queue) => {
    const connection = await connect({ servers: url.replace('nats://', '') });
    try {
      const manager = await jetstreamManager(connection);
      const stream = `microbatch_${queue}`;
      const { state } = await manager.streams.info(stream);
      const entries: string[][] = [];
      for (let seq = state.first_seq; state.messages > 0 && seq <= state.last_seq; seq += 1) {
        const message = await manager.streams.getMessage(stream, { seq }).catch(() => null);
        if (message !== null) entries.push(JSON.parse(message.string()) as string[]);
      }
      return entries;
    } finally {
      await connection.close();
    }
  },
  // Replicas admit entries only while they hear a worker: a stand-in announcing itself on the `workers` subject.
  pretendWorkerAlive: async (url, queues) => {
    const connection = await connect({ servers: url.replace('nats://', '') });
    const announce = () => {
      for (const queue of queues)
        connection.publish(
          `microbatch.${queue}.workers`,
          JSON.stringify({ id: 'stand-in', settings: { maxBatchSize: 8, batchWaitTimeoutMs: 0, concurrency: 1 } }),
        );
    };
    announce();
    const timer = setInterval(announce, 200);
    return async () => {
      clearInterval(timer);
      await connection.close();
    };
  },
  processEnv: (url) => ({ TRANSPORT: 'nats', NATS_URL: url }),
  unreachableUrl: 'nats://127.0.0.1:1',
  createQueue: (options) => createNatsQueue(options as never),
  createWorker: (options) => createNatsWorker(options as never),
};

export const drivers: readonly TransportDriver[] = [redisDriver, natsDriver];

/** Polls `check` until it holds; a hang guard for state in a broker, never a timing assertion. */
export async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const { ok } = await pollUntil(async () => await check(), Boolean, 60_000, 10);
  if (!ok) throw new Error(`Gave up waiting for ${what}`);
}

/** A worker in its own process (fixtures/child-worker.ts), which can be SIGKILLed. */
export interface ChildWorker {
  readonly process: ChildHandle;
  /** The inputs of its `index`-th batch, once it has started. */
  batch(index: number): Promise<string[]>;
}

export async function startChildWorker(
  driver: TransportDriver,
  url: string,
  env: Record<string, string>,
): Promise<ChildWorker> {
  const script = fileURLToPath(new URL('./fixtures/child-worker.ts', import.meta.url));
  // From the repository root, whose tsconfig.json maps `@microbatch/*` to the sources.
  const root = fileURLToPath(new URL('../../', import.meta.url));
  const child = startProcess({
    args: ['--import', 'tsx', script],
    cwd: root,
    env: { ...process.env, TRANSPORT: driver.name, URL: url, ...env },
  });
  await child.nextJson((line) => typeof (line as { ready?: unknown }).ready === 'string', 60_000);
  const batches = (): string[][] =>
    child
      .jsonLines()
      .flatMap((line) =>
        (line as { batch?: string[] }).batch === undefined ? [] : [(line as { batch: string[] }).batch],
      );
  return {
    process: child,
    batch: async (index) => {
      await until(
        `batch ${index} of the child worker`,
        () => batches().length > index || child.exitInfo() !== undefined,
      );
      const batch = batches()[index];
      if (batch === undefined) throw new Error(`The child worker exited before its batch ${index}:\n${child.output()}`);
      return batch;
    },
  };
}
