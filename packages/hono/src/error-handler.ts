import type { Context, ErrorHandler, NotFoundHandler } from 'hono';
import { routeNotFound } from '@microbatch/core/web';
import type { ServerErrorListener } from '@microbatch/core/web';
import { errorReporter, errorResponse } from './error-response.js';

/**
 * Options of {@link batchErrorHandler}.
 *
 * @example
 * ```ts
 * app.onError(batchErrorHandler({ onError: (error) => logger.error(error) } satisfies BatchErrorHandlerOptions));
 * ```
 */
export interface BatchErrorHandlerOptions {
  /**
   * Told once about each error answered with 500; never about 4xx, 503 or 504 answers.
   * @default (error) => console.error(error), as Hono's own error handler logs
   */
  readonly onError?: ServerErrorListener;
}

const HANDLER_NAME = 'batchErrorHandler';

/**
 * Creates a Hono error handler (for `app.onError`) that answers any error as `{"error":{"code","message"}}` with
 * the status from `toHttpError`: an `HTTPException` or any error with a 4xx `status` keeps its status family and
 * message, anything else is a generic 500, reported to `onError`. Stack traces and unexposed messages never reach
 * the client.
 *
 * @example
 * ```ts
 * app.post('/generate', jsonBody(), batchRoute({ handler }));
 * app.onError(batchErrorHandler());
 * app.notFound(batchNotFound());
 * ```
 */
export function batchErrorHandler(options: BatchErrorHandlerOptions = {}): ErrorHandler {
  const report = errorReporter(HANDLER_NAME, options);
  return (error: unknown, c: Context): Response => {
    report(error);
    return errorResponse(c, error);
  };
}

/**
 * Creates a Hono not-found handler (for `app.notFound`) that answers 404
 * `{"error":{"code":"NOT_FOUND","message":"No route for GET /x"}}`.
 *
 * @example
 * ```ts
 * app.notFound(batchNotFound());
 * ```
 */
export function batchNotFound(): NotFoundHandler {
  return (c: Context): Response => errorResponse(c, routeNotFound(c.req.method, c.req.path));
}
