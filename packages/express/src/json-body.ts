import { JSON_BODY_LIMIT, jsonBodyMiddleware } from '@microbatch/core/http';
import type { JsonBodyOptions } from '@microbatch/core/http';
import type { RequestHandler } from 'express';

export type { JsonBodyOptions };
export { JSON_BODY_LIMIT };

/**
 * Express middleware that reads a JSON body into `req.body`, with the same checks and answers as the Koa and Nest
 * adapters' `jsonBody`: 415 for a body that is not `application/json`, not UTF-8 or in an unknown
 * `Content-Encoding`; 413 for a body over `limit` (at once when `Content-Length` says so, before reading); 400 for
 * bytes that do not match their encoding or text that is not JSON. Errors go to `next`, so `batchErrorHandler`
 * answers them as `{"error":{"code","message"}}`, with fixed messages that never quote the body. Use it in place
 * of `express.json()`.
 *
 * @example
 * ```ts
 * app.post('/generate', jsonBody({ limit: 16 * 1024 }), batchRoute({ handler }));
 * app.use(batchErrorHandler());
 * ```
 */
export function jsonBody(options: JsonBodyOptions = {}): RequestHandler {
  return jsonBodyMiddleware(options);
}
