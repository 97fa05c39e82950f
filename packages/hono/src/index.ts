export { batchRoute } from './batch-route.js';
export type { BatchRouteHandler, BatchRouteHooks, BatchRouteOptions } from './batch-route.js';
export { batchErrorHandler, batchNotFound } from './error-handler.js';
export type { BatchErrorHandlerOptions } from './error-handler.js';
export { errorResponse } from './error-response.js';
export { JSON_BODY_LIMIT, hasBody, jsonBody, readJsonBody } from './json-body.js';
export type { JsonBodyOptions } from './json-body.js';
export type { RequestCallOptions, RouteBatcherOptions, ServerErrorListener } from '@microbatch/core/web';
