// What the scale-out transports (`@microbatch/redis`, `@microbatch/nats`) share; not Redis- nor NATS-specific.
export { BatchTally, EMPTY_SNAPSHOT } from './batch-tally.js';
export type { QueueSnapshot, WorkerSettings } from './batch-tally.js';
export { QueueBatcher, namedBatcher } from './queue-batcher.js';
export type { QueueBackend, QueueBatcherStats, Submission } from './queue-batcher.js';
export { FleetView, fleetKey, mergeLoads } from './fleet-load.js';
export type { FleetSample } from './fleet-load.js';
export { ReplyChannel } from './reply-channel.js';
export { callerOf, remoteBatch, traceItem, traceWorkerBatch } from './entry-trace.js';
export type { ItemTrace, WorkerBatchTrace } from './entry-trace.js';
export { describeError, parseWorkerSettings, routeReply, started, unavailable } from './replica-replies.js';
export type { Waiter } from './replica-replies.js';
export { StateReporter, emitStatus } from './status.js';
export type { QueueStatus, StatusListener } from './status.js';
export {
  ReplyKind,
  fieldMap,
  fromWireError,
  parseBatch,
  replyFields,
  requestFields,
  toReplyEntry,
  toRequestEntry,
  toWireError,
} from './wire.js';
export type { ReplyEntry, RequestEntry, WireBatch, WireError } from './wire.js';
export { executeBatch, planBatches } from './worker-batch.js';
export type { HandlerSettings, NamedHandler, PlannedBatch, ReplySink } from './worker-batch.js';
export { checkResumable, checkWorkerHandlers, logBatch, plural, round1, sleep, writeLog } from './worker-kit.js';
export type { BatchReport, StreamResume, WorkerHandlerOptions, WorkerLog, WorkerLogger } from './worker-kit.js';
export { WaiterRegistry } from './waiter-registry.js';
export { WorkerGrace } from './worker-grace.js';
export type { WorkerGraceOptions } from './worker-grace.js';
export type { RegisteredWaiter } from './waiter-registry.js';
export { WorkerFit, wireBatchOf } from './worker-fit.js';
export type { AnnouncedSettings } from './worker-fit.js';
export { ReplicaQueue } from './replica-queue.js';
export type {
  Enqueued,
  ReplicaSample,
  ReplicaSettings,
  TransportBatcher,
  TransportQueue,
  TransportStreamingBatcher,
} from './replica-port.js';
export { BrokerWorker } from './broker-worker.js';
export type {
  BatchWriter,
  BrokerWorkerSettings,
  OpenedBatch,
  RecordedChunk,
  Refusal,
  StreamProgress,
  TransportWorker,
  WorkerStats,
} from './worker-port.js';
export { REPLICA_DEFAULTS, WORKER_RUN_DEFAULTS, checkReplicaOptions, checkWorkerRun } from './queue-options.js';
export type { ReplicaQueueOptions, WorkerRunOptions } from './queue-options.js';
export type {
  BatchStorage,
  BlobStorage,
  LeaseStorage,
  RecordStorage,
  ResultEntry,
  ResultLogStorage,
} from './batch-storage-port.js';
export {
  BlobIntake,
  BlobTooLarge,
  checkLease,
  checkResultEntry,
  checkStorageKey,
  putBlob,
  recordJson,
  withoutCredentials,
} from './batch-storage-kit.js';
