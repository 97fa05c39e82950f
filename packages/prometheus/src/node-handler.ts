import type { IncomingMessage, ServerResponse } from 'node:http';
import { fail } from '@microbatch/core/util';

/**
 * A framework-free HTTP answer. A string `body` is sent as is, anything else as JSON; `contentType` defaults to
 * `text/plain` or `application/json` accordingly.
 */
export interface HttpResult<B = unknown> {
  readonly status: number;
  readonly body: B;
  readonly contentType?: string;
}

/**
 * A Node `(req, res)` handler, also a valid Express/Connect one (Nest's Express adapter included). With Express'
 * `next`, a failure goes to the app's error handler; without it, it is answered 500. `next` is `unknown` because
 * frameworks type it loosely (Nest: `Function`); it is called only if it is a function.
 */
export type NodeHandler = (req: IncomingMessage, res: ServerResponse, next?: unknown) => Promise<void>;

/**
 * Turns a function returning an {@link HttpResult} into a `(req, res)` handler, so one line mounts it on Express,
 * on Nest (`app.getHttpAdapter().get(...)` with the Express platform) or on `node:http`.
 *
 * @example
 * ```ts
 * app.get('/readyz', toNodeHandler(health.readiness));
 * ```
 */
export function toNodeHandler(respond: () => HttpResult | PromiseLike<HttpResult>): NodeHandler {
  if (typeof respond !== 'function') fail('respond', 'a function', respond);
  return async (_req, res, next) => {
    let result: HttpResult;
    try {
      result = await respond();
    } catch (error) {
      if (typeof next === 'function') return (next as (error: unknown) => void)(error);
      // No framework to report to: answer generically, because the message may carry internals.
      send(res, { status: 500, body: 'Internal Server Error' });
      return;
    }
    send(res, result);
  };
}

function send(res: ServerResponse, { status, body, contentType }: HttpResult): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.statusCode = status;
  const fallback = typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json; charset=utf-8';
  res.setHeader('Content-Type', contentType ?? fallback);
  // Health and metrics describe this instant: a cached answer would be a wrong one.
  res.setHeader('Cache-Control', 'no-store');
  res.end(text);
}
