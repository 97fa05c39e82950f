// `@microbatch/core/web`: the part of the HTTP kit that runs on any Web-standard runtime (Node, Bun, Deno, edge
// workers). Nothing reachable from here imports a `node:` module at run time, so an adapter for a Web framework
// (Hono) can use it where `@microbatch/core/http`, which reads Node request streams, cannot be loaded.
export { HttpErrorCode, httpStatusFor, toBatchError, toHttpError } from '../http/error-mapping.js';
export type { HttpErrorBody, HttpErrorResponse } from '../http/error-mapping.js';
export { batcherForRoute, routeBatcher, toInputError } from '../http/route.js';
export type { BatchRouteOptions, RequestCallOptions, RouteBatcherOptions, RouteHooks } from '../http/route.js';
export { batchHeaders } from '../http/serve-batched.js';
export { SSE_DONE, SSE_HEADERS, sseError, sseEvent } from '../http/sse.js';
export {
  checkServerErrorListener,
  isServerError,
  reporterFromOptions,
  serverErrorReporter,
} from '../http/server-errors.js';
export type { ServerErrorListener } from '../http/server-errors.js';
export { QUOTED_PATH_CHARS, methodNotAllowed, routeNotFound, unmatchedRoute } from '../http/route-errors.js';
