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
