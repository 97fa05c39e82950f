export { createRedisQueue } from './redis-queue.js';
export type { RedisBatcher, RedisQueue, RedisStreamingBatcher } from './redis-queue.js';
export type {
  QueueBatcherStats,
  QueueSnapshot,
  QueueStatus,
  StatusListener,
  WorkerSettings,
} from '@microbatch/transport';
export type { RedisQueueOptions, RedisQueueTarget, RedisWorkerOptions, StreamResume, WorkerLogger } from './options.js';
export { createRedisWorker } from './redis-worker.js';
export type { RedisWorker, RedisWorkerStats } from './redis-worker.js';
export { REDIS_BATCH_STORAGE_DEFAULTS, openRedisBatchStorage } from './batch-storage.js';
export type { RedisBatchStorageOptions } from './batch-storage.js';
