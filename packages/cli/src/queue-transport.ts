// `--queue <url>`: the URL's scheme picks the transport (redis:// or rediss:// → @microbatch/redis, nats:// →
// @microbatch/nats); both take the same options and give the same replica and worker. @microbatch/nats is an optional
// peer, loaded only for a nats:// queue: @nats-io 3.4 pulls @nats-io/nuid@3, which declares Node >= 22, so the CLI
// itself installs engine-strict on Node 20.
import { checkDeadlineFits } from '@microbatch/core/http';
import { otelTracer } from '@microbatch/core/otel';
import type * as Nats from '@microbatch/nats';
import type { NatsQueueOptions, NatsWorkerOptions } from '@microbatch/nats';
import { createRedisQueue, createRedisWorker, openRedisBatchStorage } from '@microbatch/redis';
import type { QueueStatus, RedisQueueOptions, RedisWorkerOptions } from '@microbatch/redis';
import { exitOnSignals } from './lifecycle.js';
import type { createLogger } from './logger.js';

/** The broker a `--queue` URL names, as logs say it. */
export function brokerOf(url: string): 'Redis' | 'NATS' {
  return url.startsWith('nats://') ? 'NATS' : 'Redis';
}

type QueueOptions = Omit<RedisQueueOptions & NatsQueueOptions, 'url' | 'queue' | 'prefix' | 'replicaId'>;
type WorkerOptions<I, O, C> = Omit<
  RedisWorkerOptions<I, O, C> & NatsWorkerOptions<I, O, C>,
  'url' | 'queue' | 'prefix' | 'workerId'
>;

/** `@microbatch/nats`, or a failure naming what to install. */
async function loadNats(fail: (message: string) => never): Promise<typeof Nats> {
  try {
    return await import('@microbatch/nats');
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') throw error;
    return fail(
      `--queue nats://… needs @microbatch/nats installed beside @microbatch/cli ` +
        `(${error instanceof Error ? error.message.split('\n')[0] : String(error)})`,
    );
  }
}

/**
 * Loads the transport `url` names now and checks the queue's name on it, so a missing transport or a name it cannot
 * take (NATS: streams past JetStream's 255 characters) fails before a model is loaded.
 */
export async function loadTransport(url: string, queue: string, fail: (message: string) => never): Promise<void> {
  if (brokerOf(url) !== 'NATS') return;
  const nats = await loadNats(fail);
  try {
    nats.checkQueueName(queue);
  } catch (error) {
    fail(`--model ${JSON.stringify(queue)} cannot name a NATS queue: ${(error as Error).message}`);
  }
}

/** A web replica's queue on the broker `url` names. */
export async function openQueue(url: string, queue: string, options: QueueOptions, fail: (message: string) => never) {
  const target = { url, queue, ...options };
  return brokerOf(url) === 'NATS' ? (await loadNats(fail)).createNatsQueue(target) : createRedisQueue(target);
}

/**
 * A web replica's queue as `serve --queue` opens it: bounded by `--max-queue-size`, `--worker-grace-ms`'s grace,
 * the broker's and the workers' comings and goings logged, request traces carried on; and checked to answer a
 * waiting client before the server could close its connection.
 *
 * @example
 * ```ts
 * const queue = await openReplicaQueue(url, 'tinystories-656k', flags, logger, fail);
 * ```
 */
export async function openReplicaQueue(
  url: string,
  queue: string,
  flags: { readonly maxQueueSize?: number | undefined; readonly workerGraceMs?: number | undefined },
  logger: ReturnType<typeof createLogger>,
  fail: (message: string) => never,
) {
  const opened = await openQueue(
    url,
    queue,
    {
      maxQueueSize: flags.maxQueueSize,
      workerGraceMs: flags.workerGraceMs,
      onStatus: (status) => logQueueStatus(logger, status, brokerOf(url)),
      // With an SDK registered (`node --import`), each request's trace goes on into the worker's batch.
      tracer: otelTracer(),
    },
    fail,
  );
  // A waiting client must get its 504 before the server could close its connection.
  checkDeadlineFits(opened.timeoutMs);
  return opened;
}

/** What a worker command runs its queue worker over: a model pool, or an encoder's. */
export interface WorkerEngine {
  readonly ready: Promise<unknown>;
  close(): Promise<void>;
}

/**
 * The rest of a worker command once its engine is started: waits for it to load (a failure closes it and fails the
 * command), starts the queue worker on the broker `url` names, closes both on SIGTERM / SIGINT (the worker first:
 * it finishes and answers the batches running), and logs `worker ready` with `ready`'s fields.
 *
 * @example
 * ```ts
 * await runQueueWorker(url, queue, pool, { handlers, log: logger }, { model: queue }, fail);
 * ```
 */
export async function runQueueWorker<I, O, C>(
  url: string,
  queue: string,
  engine: WorkerEngine,
  options: WorkerOptions<I, O, C> & { readonly log: ReturnType<typeof createLogger> },
  ready: Record<string, unknown>,
  fail: (message: string) => never,
): Promise<void> {
  try {
    await engine.ready;
  } catch (error) {
    await engine.close();
    fail(error instanceof Error ? error.message : String(error));
  }
  const worker = await startQueueWorker(url, queue, options, fail);
  exitOnSignals(
    async () => {
      await worker.close();
      await engine.close();
    },
    { log: options.log },
  );
  await worker.ready;
  options.log.info({ worker: worker.workerId, ...ready }, 'worker ready');
}

/** A model worker on the broker `url` names. */
export async function startQueueWorker<I, O, C>(
  url: string,
  queue: string,
  options: WorkerOptions<I, O, C>,
  fail: (message: string) => never,
) {
  const target = { url, queue, ...options };
  return brokerOf(url) === 'NATS' ? (await loadNats(fail)).createNatsWorker(target) : createRedisWorker(target);
}

/** The broker lost or back, workers gone or back: logged once per change. */
export function logQueueStatus(logger: ReturnType<typeof createLogger>, status: QueueStatus, broker: string): void {
  const up = status.event === 'broker-up' || status.event === 'workers-up';
  const messages = {
    'broker-up': `connected to the queue (${broker})`,
    'broker-down': `lost the queue (${broker}); refusing requests with 503 until it is back`,
    'workers-up': 'a worker is serving the queue',
    'workers-down': 'no worker is serving the queue; refusing requests with 503 until one is',
    'workers-gone': 'no worker came back within the grace; answered the requests waiting with 503',
  } as const;
  if (up) logger.info(status, messages[status.event]);
  else logger.warn(status, messages[status.event]);
}

/** A queue URL as it may be logged: without its password. */
export function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'redis://(unparsable)';
  }
}

/**
 * The Batch API's storage in the broker `url` names (`serve --queue … --batch-api`): Redis keys and streams, or NATS
 * JetStream KV and Object Store. The caller closes it once the server has stopped.
 */
export async function openBatchStorage(url: string, fail: (message: string) => never) {
  return brokerOf(url) === 'NATS'
    ? (await loadNats(fail)).openNatsBatchStorage({ url })
    : openRedisBatchStorage({ url });
}
