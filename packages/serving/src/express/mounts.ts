// How the Express serving apps mount the shared route tables (`../routes.ts`, `../embeddings-routes.ts`).
import { writeHttpError, writeJson } from '@microbatch/core/http';
import { batchErrorHandler, jsonBody } from '@microbatch/express';
import express from 'express';
import { type AppRoute, type NoRoute, mountRoutes } from '../app-routes.js';

/**
 * An Express app serving `routes`, `noRoute`'s 404 / 405 for anything else, and body problems (400, 413, 415) as
 * JSON errors with fixed messages; no `X-Powered-By` (nothing to tell a client about the stack).
 */
export function expressApp(routes: readonly AppRoute[], noRoute: NoRoute): express.Express {
  const app = express();
  app.disable('x-powered-by');
  mountRoutes(routes, {
    node: (path, handler) => app.get(path, handler),
    json: (path, handler) => app.post(path, jsonBody(), (req, res) => handler(req.body, res)),
    value: (path, body) => app.get(path, (_req, res) => writeJson(res, 200, body)),
    textQuery: (path, handler) => app.get(path, (req, res) => handler(req.query.text, req, res)),
  });
  app.use((req, res) => writeHttpError(res, noRoute(req.method, req.path)));
  app.use(batchErrorHandler());
  return app;
}
