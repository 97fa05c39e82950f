export { createRedisQueue } from './redis-queue.js';
export type { RedisBatcher, RedisQueue, RedisStreamingBatcher } from './redis-queue.js';
export type { QueueBatcherStats } from './queue-batcher.js';
export type { QueueSnapshot, WorkerSettings } from './batch-tally.js';
export type { QueueStatus, StatusListener } from './status.js';
export type { RedisQueueOptions, RedisQueueTarget, RedisWorkerOptions, StreamResume, WorkerLogger } from './options.js';
export { createRedisWorker } from './redis-worker.js';
export type { RedisWorker, RedisWorkerStats } from './redis-worker.js';
