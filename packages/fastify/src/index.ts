export { batchRoute, sendError } from './batch-route.js';
export type { BatchRouteHandler, BatchRouteHooks, BatchRouteOptions } from './batch-route.js';
export { microbatch } from './plugin.js';
export type { MicrobatchPluginOptions } from './plugin.js';
export type { RequestCallOptions, RouteBatcherOptions, ServerErrorListener } from '@microbatch/core/http';
export { JSON_BODY_LIMIT } from '@microbatch/core/http';
