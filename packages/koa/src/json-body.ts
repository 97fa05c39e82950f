import { JSON_BODY_LIMIT, hasBody, lingerAfterRefusal, readJsonBody } from '@microbatch/core/http';
import type { JsonBodyOptions } from '@microbatch/core/http';
import type { Next, ParameterizedContext } from 'koa';

export type { JsonBodyOptions };
export { JSON_BODY_LIMIT };

// Where `jsonBody` puts the body; the same declaration as @koa/bodyparser's, so either (or both) may be used.
declare module 'koa' {
  interface Request {
    body?: unknown;
  }
}

/**
 * Koa middleware that reads a JSON body into `ctx.request.body`, with the same checks and answers as the Express
 * and Nest adapters' `jsonBody`: 415 for a body that is not `application/json`, not UTF-8 or in an unknown
 * `Content-Encoding`; 413 for a body over `limit` (at once when `Content-Length` says so, before reading); 400 for
 * bytes that do not match their encoding or text that is not JSON. Errors are thrown, so `batchErrorHandler`
 * answers them as `{"error":{"code","message"}}`, with fixed messages that never quote the body. Use it in place
 * of `@koa/bodyparser`.
 *
 * @example
 * ```ts
 * app.use(batchErrorHandler());
 * router.post('/generate', jsonBody({ limit: 16 * 1024 }), batchRoute({ handler }));
 * ```
 */
export function jsonBody(options: JsonBodyOptions = {}): (ctx: ParameterizedContext, next: Next) => Promise<void> {
  return async function jsonBodyMiddleware(ctx: ParameterizedContext, next: Next): Promise<void> {
    const request = ctx.request as { body?: unknown };
    if (hasBody(ctx.req) && request.body === undefined) {
      try {
        request.body = await readJsonBody(ctx.req, options);
      } catch (error) {
        lingerAfterRefusal(ctx.res, error);
        throw error;
      }
    }
    await next();
  };
}
