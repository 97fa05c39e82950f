// `@microbatch/core`: the batching engine alone. HTTP lives in `@microbatch/core/http`, shared helpers in
// `@microbatch/core/util`.
export { createBatcher, createStreamingBatcher } from './batcher.js';
export { isBatcher } from './batcher-brand.js';
export { BatchError, ErrorCode, exposeError, isBatchError } from './errors.js';
export type { BatchErrorOptions } from './errors.js';
export { DEFAULTS, validateBatcherOptions } from './options.js';
export type { BatcherDefaults } from './options.js';
export { LatencyModel, isFitReady, predictBatchMs } from './latency-model.js';
export type { LatencyFit } from './latency-model.js';
export { completionMs } from './predictor.js';
export type { Capacity } from './predictor.js';
export type { FleetLoad, FleetWorker } from './fleet-types.js';
export { combineTracers } from './tracing.js';
export type { BatchOutcome, BatchSpan, BatchTracer, RemoteBatch, SentItem, TracedBatch } from './tracing.js';
export { BATCHER_BRAND, END, SKIP } from './types.js';
export type {
  BatchContext,
  BatchHandler,
  Batcher,
  BatcherBase,
  BatcherEvents,
  BatcherOptions,
  BatcherStats,
  CallOptions,
  Clock,
  CloseOptions,
  DispatchInfo,
  OnBatchError,
  RejectReason,
  StreamEnd,
  StreamSkip,
  StreamSlot,
  StreamingBatchHandler,
  StreamingBatcher,
  Summary,
} from './types.js';
export { describeValue } from './util/describe-value.js';
