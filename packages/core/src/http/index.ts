// `@microbatch/core/http`: the adapter-author kit and the HTTP mapping, apart from the engine so that the root
// entry pulls in no `node:http` types. Every function here accepts any object implementing `Batcher` or
// `StreamingBatcher` and branded with `BATCHER_BRAND`, not only engine instances.
export { HttpErrorCode, httpStatusFor, toBatchError, toHttpError } from './error-mapping.js';
export type { HttpErrorBody, HttpErrorOptions, HttpErrorResponse } from './error-mapping.js';
export { writeHttpError, writeJson, writeJsonText } from './json.js';
export { batcherForRoute, routeBatcher, toInputError } from './route.js';
export type { BatchRouteOptions, RequestCallOptions, RouteBatcherOptions, RouteHooks } from './route.js';
export { batchHeaders, serveBatched, watchDisconnect } from './serve-batched.js';
export type { BatchedExchange, DisconnectWatch } from './serve-batched.js';
export { SSE_DONE, SSE_HEADERS, sseError, sseEvent, writeSse } from './sse.js';
export { checkServerErrorListener, isServerError, reporterFromOptions, serverErrorReporter } from './server-errors.js';
export type { ServerErrorListener } from './server-errors.js';
export { toSseBody } from './sse-body.js';
export type { SseBodyHooks } from './sse-body.js';
export { JSON_BODY_LIMIT, hasBody, jsonBodyMiddleware, lingerAfterRefusal, readJsonBody } from './json-body.js';
export type { JsonBodyMiddleware, JsonBodyOptions } from './json-body.js';
export { applyServerLimits, checkDeadlineFits, serverOptions } from './server-limits.js';
export type { ServerLimits } from './server-limits.js';
export { fromBodyParserError } from './body-errors.js';
export { QUOTED_PATH_CHARS, methodNotAllowed, routeNotFound, unmatchedRoute } from './route-errors.js';
