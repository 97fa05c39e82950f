// Strict routing for the serving apps' Nest modules, as on every framework's app: Nest routes through Express's
// router, which folds letter case and a trailing slash unless the Express instance had `strict routing` and
// `case sensitive routing` before Nest's adapter was made (the module cannot set them then), so the module itself
// answers a path that is not exactly one of its table's (or one of its `{param}` paths) with the table's 404.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type NoRoute, routeKeyOf } from '../route-table.js';
import { writeRouteError } from '../route-errors.js';
import { requestPath } from '../text-completion-routes.js';

/**
 * Middleware passing a request whose path (as sent) is one of `routes`' exactly, and answering any other with
 * `noRoute`'s 404 (OpenAI's shape on `/v1/*`).
 *
 * @example
 * ```ts
 * consumer.apply(exactPaths(TEXT_COMPLETION_ROUTES, noRoute)).forRoutes(TextCompletionController);
 * ```
 */
export function exactPaths(
  routes: Readonly<Record<string, readonly string[]>>,
  noRoute: NoRoute,
): (req: IncomingMessage, res: ServerResponse, next: () => void) => void {
  return (req, res, next) => {
    const path = requestPath(req.url);
    if (routeKeyOf(routes, path) !== undefined) next();
    else writeRouteError(res, path, noRoute(req.method ?? 'GET', path));
  };
}
