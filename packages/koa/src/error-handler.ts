import type { Next, ParameterizedContext } from 'koa';
import { fromBodyParserError, reporterFromOptions, toHttpError } from '@microbatch/core/http';
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
   * @default (error, ctx) => ctx.app.emit('error', error, ctx), which Koa logs unless `app.silent`
   */
  readonly onError?: ServerErrorListener;
}

const HANDLER_NAME = 'batchErrorHandler';

/**
 * Creates Koa middleware that answers any error thrown downstream as `{"error":{"code","message"}}` with the
 * status from `toHttpError`: `@koa/bodyparser` failures (malformed JSON 400, too large 413, unsupported
 * Content-Encoding 415, bytes that do not match their encoding 400) get their 4xx with a fixed message that never
 * quotes the body, anything else a generic 500, reported to `onError` (by default emitted as
 * the app's `error` event for logging). Stack traces and unexposed messages never reach the client. Use it before
 * the body parser.
 *
 * @example
 * ```ts
 * app.use(batchErrorHandler());
 * app.use(bodyParser());
 * app.use(router.routes());
 * ```
 */
export function batchErrorHandler(
  options: BatchErrorHandlerOptions = {},
): (ctx: ParameterizedContext, next: Next) => Promise<void> {
  const report = errorReporter(HANDLER_NAME, options);
  return async function batchErrorMiddleware(ctx: ParameterizedContext, next: Next): Promise<void> {
    try {
      await next();
    } catch (error) {
      // Once headers are out only Koa's own handling can close the response properly.
      if (ctx.headerSent) throw error;
      // A body parser's failure is a 4xx with a fixed message, not a fault to report.
      const mapped = fromBodyParserError(error);
      sendError(ctx, mapped);
      report(mapped, ctx);
    }
  };
}

/**
 * Answers `error` as `{"error":{"code","message"}}` with the status from `toHttpError`, or cuts the response short
 * if part of it was already sent. The client never sees an unexposed message or a stack.
 */
export function sendError(ctx: ParameterizedContext, error: unknown): void {
  if (ctx.headerSent) {
    // A half-sent body must not look complete to the client.
    ctx.res.destroy();
    return;
  }
  const { status, headers, body } = toHttpError(fromBodyParserError(error));
  ctx.status = status;
  ctx.set(headers);
  ctx.body = body;
}

/**
 * The `onError` of `caller`'s options, checked, as a reporter of server errors. Without one, errors go to the
 * app's `error` event, Koa's own channel for them.
 */
export function errorReporter(
  caller: string,
  options: { readonly onError?: unknown } | undefined,
): (error: unknown, ctx: ParameterizedContext) => void {
  // The default needs the request's app, so one reporter (and its once-per-error memory) per context's app.
  let current: ParameterizedContext | undefined;
  const report = reporterFromOptions(caller, options, (error) => current?.app.emit('error', error, current));
  return (error, ctx) => {
    current = ctx;
    try {
      report(error);
    } finally {
      current = undefined;
    }
  };
}
