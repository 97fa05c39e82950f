export { batchRoute } from './batch-route.js';
export type { BatchRouteMiddleware, BatchRouteOptions } from './batch-route.js';
export { batchErrorHandler } from './error-handler.js';
export type { RequestCallOptions, RouteBatcherOptions } from '@microbatch/core';
