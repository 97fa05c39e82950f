import type { ErrorRequestHandler, NextFunction, Request, Response } from 'express';
import { writeHttpError } from '@microbatch/core';

/**
 * Creates Express error middleware that answers any error as `{"error":{"code","message"}}` with the status from
 * `toHttpError`: body-parser failures (malformed JSON 400, too large 413, bad charset 415) get their 4xx, anything
 * else a generic 500. Stack traces and unexposed messages never reach the client. Add it after your routes, or
 * right after `batchRoute` to cover only that route.
 *
 * @example
 * ```ts
 * app.post('/generate', express.json({ limit: '16kb' }), batchRoute({ handler }));
 * app.use(batchErrorHandler());
 * ```
 */
export function batchErrorHandler(): ErrorRequestHandler {
  return function batchErrorMiddleware(error: unknown, _req: Request, res: Response, next: NextFunction): void {
    // Express's own handler knows how to abort a response whose headers are already out.
    if (res.headersSent) {
      next(error);
      return;
    }
    sendError(res, error);
  };
}

/** Answers `error` as the JSON error shape, or cuts the response short if part of it was already sent. */
export function sendError(res: Response, error: unknown): void {
  writeHttpError(res, error);
}
