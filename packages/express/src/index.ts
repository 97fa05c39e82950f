export { batchRoute } from './batch-route.js';
export type { BatchRouteHandler, BatchRouteOptions } from './batch-route.js';
export { batchErrorHandler } from './error-handler.js';
export type { RequestCallOptions, RouteBatcherOptions } from '@microbatch/core';
