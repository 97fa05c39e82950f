export { batchRoute } from './batch-route.js';
export type { BatchRouteHandler, BatchRouteHooks, BatchRouteMiddleware, BatchRouteOptions } from './batch-route.js';
export { batchErrorHandler } from './error-handler.js';
export type { BatchErrorHandlerOptions } from './error-handler.js';
export type { RequestCallOptions, RouteBatcherOptions, ServerErrorListener } from '@microbatch/core/http';
export { JSON_BODY_LIMIT, jsonBody } from './json-body.js';
export type { JsonBodyOptions } from './json-body.js';
