// The embeddings app's routes, the same on Express, Koa and Nest (one table: the same 405 / 404 on all three).
import { unmatchedRoute } from '@microbatch/core/http';
import type { BatchError } from '@microbatch/core';

/**
 * Path → the methods the embeddings app answers there (HEAD as GET).
 *
 * @example
 * ```ts
 * EMBEDDINGS_ROUTES['/v1/embeddings']; // ['POST']
 * ```
 */
export const EMBEDDINGS_ROUTES: Readonly<Record<string, readonly string[]>> = {
  '/v1/embeddings': ['POST'],
  '/v1/models': ['GET', 'HEAD'],
  '/healthz': ['GET', 'HEAD'],
  '/readyz': ['GET', 'HEAD'],
  '/metrics': ['GET', 'HEAD'],
};

/**
 * The error for a request no route of the embeddings app matched: 405 with `Allow` on a known path, else 404.
 *
 * @example
 * ```ts
 * app.use((req, res) => writeHttpError(res, noEmbeddingsRoute(req.method, req.path)));
 * ```
 */
export function noEmbeddingsRoute(method: string, path: string): BatchError<'NOT_FOUND' | 'METHOD_NOT_ALLOWED'> {
  return unmatchedRoute(method, path, EMBEDDINGS_ROUTES);
}
