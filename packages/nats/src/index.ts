export { createNatsQueue } from './nats-queue.js';
export type { NatsBatcher, NatsQueue, NatsStreamingBatcher } from './nats-queue.js';
export type {
  QueueBatcherStats,
  QueueSnapshot,
  QueueStatus,
  StatusListener,
  WorkerSettings,
} from '@microbatch/transport';
export type { NatsQueueOptions, NatsQueueTarget, NatsWorkerOptions } from './options.js';
export { checkQueueName } from './options.js';
export { MAX_STREAM_NAME, encodeQueueName } from './names.js';
export type { WorkerLogger } from '@microbatch/transport';
export { createNatsWorker } from './nats-worker.js';
export type { NatsWorker, NatsWorkerStats } from './nats-worker.js';
export { NATS_BATCH_STORAGE_DEFAULTS, batchBuckets, openNatsBatchStorage } from './batch-storage.js';
export type { NatsBatchStorageOptions } from './batch-storage.js';
