export {
  batcherForRoute,
  serveBatched,
  toInputError,
  watchDisconnect,
  writeHttpError,
  writeSse,
} from './adapter-kit.js';
export type { BatchedExchange, DisconnectWatch, RequestCallOptions, RouteBatcherOptions, RouteHooks } from './adapter-kit.js';
export { createBatcher, createStreamingBatcher } from './batcher.js';
export { BatchError, ErrorCode, exposeError, isBatchError } from './errors.js';
export type { BatchErrorOptions } from './errors.js';
export {
  SSE_DONE,
  SSE_HEADERS,
  batchHeaders,
  httpStatusFor,
  sseError,
  sseEvent,
  toBatchError,
  toHttpError,
} from './http.js';
export type { HttpErrorBody, HttpErrorResponse } from './http.js';
export { describe as describeValue, validateBatcherOptions } from './options.js';
export { END, SKIP } from './types.js';
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
