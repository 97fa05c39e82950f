// The text-completion app's routes, the same on Express, Koa and Nest: one table, so that a request on a known path
// with another method gets the same 405 (with `Allow`) on all three, and anything else the same 404.
import { unmatchedRoute } from '@microbatch/core/http';
import type { BatchError } from '@microbatch/core';

/**
 * Path → the methods the text-completion app answers there (HEAD as GET, without a body).
 *
 * @example
 * ```ts
 * TEXT_COMPLETION_ROUTES['/v1/completions']; // ['POST']
 * ```
 */
export const TEXT_COMPLETION_ROUTES: Readonly<Record<string, readonly string[]>> = {
  '/': ['GET', 'HEAD'],
  '/v1/completions': ['POST'],
  '/v1/chat/completions': ['POST'],
  '/v1/models': ['GET', 'HEAD'],
  '/healthz': ['GET', 'HEAD'],
  '/readyz': ['GET', 'HEAD'],
  '/metrics': ['GET', 'HEAD'],
  '/dashboard': ['GET', 'HEAD'],
};

/**
 * The error for a request none of the app's routes matched: 405 with `Allow` on a known path, else 404.
 *
 * @example
 * ```ts
 * app.use((req, res) => writeHttpError(res, noRoute(req.method, req.path)));
 * ```
 */
export function noRoute(method: string, path: string): BatchError<'NOT_FOUND' | 'METHOD_NOT_ALLOWED'> {
  return unmatchedRoute(method, path, TEXT_COMPLETION_ROUTES);
}

/**
 * The request's path as sent, as Express's `req.path` and Koa's `ctx.path` read it: not resolved the way `new URL()`
 * would (`/v1/../healthz` is not `/healthz`, and `//healthz` is not a host named `healthz`), so that an unmatched
 * path gets the same 404 on every framework (Nest and Hono route the resolved URL).
 *
 * @example
 * ```ts
 * requestPath('/v1/../healthz?x=1'); // '/v1/../healthz'
 * ```
 */
export function requestPath(url: string | undefined): string {
  const path = (url ?? '/').split('?', 1)[0] ?? '/';
  return path === '' ? '/' : path;
}
