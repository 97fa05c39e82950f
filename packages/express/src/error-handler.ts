import type { ErrorRequestHandler, NextFunction, Request, Response } from 'express';
import { fromBodyParserError, reporterFromOptions, writeHttpError } from '@microbatch/core/http';
import type { ServerErrorListener } from '@microbatch/core/http';

/**
 * Options of {@link batchErrorHandler}.
 *
 * @example
 * ```ts
 * app.use(batchErrorHandler({ onError: (error) => logger.error(error) } satisfies BatchErrorHandlerOptions));
 * ```
 */
export interface BatchErrorHandlerOptions {
  /**
   * Told once about each error answered with 500; never about 4xx, 503 or 504 answers.
   * @default (error) => console.error(error), as Express's own final handler logs
   */
  readonly onError?: ServerErrorListener;
}

const HANDLER_NAME = 'batchErrorHandler';

/**
 * Creates Express error middleware that answers any error as `{"error":{"code","message"}}` with the status from
 * `toHttpError`: body-parser failures (malformed JSON 400, too large 413, bad charset 415) get their 4xx with a fixed
 * message that never quotes the body, anything else a generic 500, reported to `onError`. Stack traces and unexposed messages never reach the client. Add it
 * after your routes, or right after `batchRoute` to cover only that route.
 *
 * @example
 * ```ts
 * app.post('/generate', express.json({ limit: '16kb' }), batchRoute({ handler }));
 * app.use(batchErrorHandler({ onError: (error) => logger.error(error) }));
 * ```
 */
export function batchErrorHandler(options: BatchErrorHandlerOptions = {}): ErrorRequestHandler {
  const report = errorReporter(HANDLER_NAME, options);
  return function batchErrorMiddleware(error: unknown, _req: Request, res: Response, next: NextFunction): void {
    // Express's own handler knows how to abort a response whose headers are already out.
    if (res.headersSent) {
      next(error);
      return;
    }
    // A body parser's failure is a 4xx with a fixed message, not a fault to report.
    const mapped = fromBodyParserError(error);
    sendError(res, mapped);
    report(mapped);
  };
}

/**
 * Answers `error` as the JSON error shape, or cuts the response short if part of it was already sent. A body
 * parser's failure gets a fixed message (its own may quote the body).
 */
export function sendError(res: Response, error: unknown): void {
  writeHttpError(res, fromBodyParserError(error));
}

/** The `onError` of `caller`'s options, checked, as a reporter of server errors; `console.error` by default. */
export function errorReporter(
  caller: string,
  options: { readonly onError?: unknown } | undefined,
): (error: unknown) => void {
  return reporterFromOptions(caller, options, defaultOnError);
}

function defaultOnError(error: unknown): void {
  console.error(error);
}
