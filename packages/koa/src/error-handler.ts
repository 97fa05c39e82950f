import type { Next, ParameterizedContext } from 'koa';
import { toHttpError } from '@microbatch/core';

/**
 * Creates Koa middleware that answers any error thrown downstream as `{"error":{"code","message"}}` with the
 * status from `toHttpError`: `@koa/bodyparser` failures (malformed JSON 400, too large 413, unsupported
 * Content-Encoding 415) get their 4xx, anything else a generic 500 (emitted as the app's `error` event for
 * logging). Stack traces and unexposed messages never reach the client. Use it before the body parser.
 *
 * @example
 * ```ts
 * app.use(batchErrorHandler());
 * app.use(bodyParser());
 * app.use(router.routes());
 * ```
 */
export function batchErrorHandler(): (ctx: ParameterizedContext, next: Next) => Promise<void> {
  return async function batchErrorMiddleware(ctx: ParameterizedContext, next: Next): Promise<void> {
    try {
      await next();
    } catch (error) {
      // Once headers are out only Koa's own handling can close the response properly.
      if (ctx.headerSent) throw error;
      renderError(ctx, error);
    }
  };
}

/**
 * Answers `error` as `{"error":{"code","message"}}` with the status from `toHttpError`, or cuts the response short
 * if part of it was already sent. Server errors are also emitted as the app's `error` event, which Koa logs
 * unless `app.silent` (or the error is exposed); the client never sees their message or stack.
 */
export function renderError(ctx: ParameterizedContext, error: unknown): void {
  if (ctx.headerSent) {
    // A half-sent body must not look complete to the client.
    ctx.res.destroy();
    return;
  }
  const { status, headers, body } = toHttpError(error);
  ctx.status = status;
  ctx.set(headers);
  ctx.body = body;
  if (status >= 500) ctx.app.emit('error', error, ctx);
}
