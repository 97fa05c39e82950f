// `--queue <url>`: the URL's scheme picks the transport (redis:// or rediss:// → @microbatch/redis, nats:// →
// @microbatch/nats); both take the same options and give the same replica and worker.
import { createNatsQueue, createNatsWorker } from '@microbatch/nats';
import type { NatsQueueOptions, NatsWorkerOptions } from '@microbatch/nats';
import { createRedisQueue, createRedisWorker } from '@microbatch/redis';
import type { RedisQueueOptions, RedisWorkerOptions } from '@microbatch/redis';

/** The broker a `--queue` URL names, as logs say it. */
export function brokerOf(url: string): 'Redis' | 'NATS' {
  return url.startsWith('nats://') ? 'NATS' : 'Redis';
}

/** A NATS queue's name is a stream's and a subject token's: other characters of a model's name become `_`. */
function queueFor(url: string, queue: string): string {
  return brokerOf(url) === 'NATS' ? queue.replace(/[^A-Za-z0-9_-]/g, '_') : queue;
}

type QueueOptions = Omit<RedisQueueOptions & NatsQueueOptions, 'url' | 'queue' | 'prefix' | 'replicaId'>;
type WorkerOptions<I, O, C> = Omit<
  RedisWorkerOptions<I, O, C> & NatsWorkerOptions<I, O, C>,
  'url' | 'queue' | 'prefix' | 'workerId'
>;

/** A web replica's queue on the broker `url` names. */
export function openQueue(url: string, queue: string, options: QueueOptions) {
  const target = { url, queue: queueFor(url, queue), ...options };
  return brokerOf(url) === 'NATS' ? createNatsQueue(target) : createRedisQueue(target);
}

/** A model worker on the broker `url` names. */
export function startQueueWorker<I, O, C>(url: string, queue: string, options: WorkerOptions<I, O, C>) {
  const target = { url, queue: queueFor(url, queue), ...options };
  return brokerOf(url) === 'NATS' ? createNatsWorker(target) : createRedisWorker(target);
}
