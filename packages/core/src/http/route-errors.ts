import { BatchError } from '../errors.js';

/** How much of a request path an error message quotes: enough to recognise it, never a client's 20 KB. */
export const QUOTED_PATH_CHARS = 64;

/**
 * The 404 of a request no route answers, naming its method and path (cut to {@link QUOTED_PATH_CHARS} characters,
 * so a long path is not echoed back).
 *
 * @example
 * ```ts
 * app.use((req, res) => writeHttpError(res, routeNotFound(req.method, req.path))); // 'No route for GET /nope'
 * ```
 */
export function routeNotFound(method: string, path: string): BatchError<'NOT_FOUND'> {
  return new BatchError('NOT_FOUND', `No route for ${method} ${quotePath(path)}`);
}

/**
 * The 405 of a request whose path a route answers, but not with its method; `toHttpError` turns `details.allowed`
 * into the `Allow` header.
 *
 * @example
 * ```ts
 * methodNotAllowed('PUT', '/v1/completions', ['POST']); // 405, Allow: POST
 * ```
 */
export function methodNotAllowed(
  method: string,
  path: string,
  allowed: readonly string[],
): BatchError<'METHOD_NOT_ALLOWED'> {
  return new BatchError(
    'METHOD_NOT_ALLOWED',
    `${method} is not allowed on ${quotePath(path)}; allowed: ${allowed.join(', ')}`,
    {
      details: { allowed: [...allowed] },
    },
  );
}

/**
 * The 404, or the 405 when `routes` (path → the methods answered there) knows the path: what an app answers when
 * none of its routes matched.
 *
 * @example
 * ```ts
 * app.use((req, res) => writeHttpError(res, unmatchedRoute(req.method, req.path, { '/v1/completions': ['POST'] })));
 * ```
 */
export function unmatchedRoute(
  method: string,
  path: string,
  routes: Readonly<Record<string, readonly string[]>>,
): BatchError<'NOT_FOUND' | 'METHOD_NOT_ALLOWED'> {
  const allowed = Object.hasOwn(routes, path) ? routes[path] : undefined;
  return allowed === undefined ? routeNotFound(method, path) : methodNotAllowed(method, path, allowed);
}

function quotePath(path: string): string {
  return path.length > QUOTED_PATH_CHARS ? `${path.slice(0, QUOTED_PATH_CHARS)}...` : path;
}
