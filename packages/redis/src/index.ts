export { createRedisQueue } from './redis-queue.js';
export type { RedisQueue } from './redis-queue.js';
export type { RedisQueueOptions, RedisQueueTarget, RedisWorkerOptions, WorkerLogger } from './options.js';
export { createRedisWorker } from './redis-worker.js';
export type { RedisWorker, RedisWorkerStats } from './redis-worker.js';
