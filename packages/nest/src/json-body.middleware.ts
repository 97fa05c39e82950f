import type { IncomingMessage, ServerResponse } from 'node:http';
import { JSON_BODY_LIMIT, jsonBodyMiddleware, writeHttpError } from '@microbatch/core/http';
import type { JsonBodyOptions } from '@microbatch/core/http';

export type { JsonBodyOptions };
export { JSON_BODY_LIMIT };

/**
 * Middleware for Nest on Express that reads a JSON body into `req.body`, with the same checks and answers as the
 * Express and Koa adapters' `jsonBody`: 415 for a body that is not `application/json`, not UTF-8 or in an unknown
 * `Content-Encoding`; 413 for a body over `limit` (at once when `Content-Length` says so, before reading); 400 for
 * bytes that do not match their encoding or text that is not JSON, answered as `{"error":{"code","message"}}` with
 * fixed messages that never quote the body (Nest's own body parser echoes it). Create the app with
 * `bodyParser: false` so this one reads the body.
 *
 * @example
 * ```ts
 * const app = await NestFactory.create(AppModule, { bodyParser: false });
 * app.use(jsonBody());
 * ```
 */
export function jsonBody(
  options: JsonBodyOptions = {},
): (req: IncomingMessage & { body?: unknown }, res: ServerResponse, next: (error?: unknown) => void) => void {
  const read = jsonBodyMiddleware(options);
  return (req, res, next) => {
    read(req, res, (error?: unknown) => {
      if (error === undefined) next();
      else writeHttpError(res, error);
    });
  };
}
