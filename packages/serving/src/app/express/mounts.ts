// How the Express serving apps mount the shared route tables (`../text-completion-routes.ts`,
// `../embeddings-routes.ts`): routed strictly (case and trailing slash matter, as on every framework's app), errors
// on `/v1/*` in OpenAI's shape.
import { fromBodyParserError, serverErrorReporter, writeJson } from '@microbatch/core/http';
import { batchErrorHandler, jsonBody } from '@microbatch/express';
import express from 'express';
import { type AppRoute, type NoRoute, mountRoutes } from '../route-table.js';
import { isOpenAiPath, writeRouteError } from '../route-errors.js';
import { writeOpenAiError } from '../../openai/openai-error.js';

/**
 * An Express app serving `routes`, `noRoute`'s 404 / 405 for anything else, and body problems (400, 413, 415) as
 * JSON errors with fixed messages (OpenAI's shape on `/v1/*`); no `X-Powered-By` (nothing to tell a client about
 * the stack). Routing is strict and case-sensitive: `/healthz/` and `/HEALTHZ` are 404s, as on Fastify and OpenAI.
 */
export function expressApp(routes: readonly AppRoute[], noRoute: NoRoute): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // Read when Express makes its router, at the first route: set before any.
  app.enable('strict routing');
  app.enable('case sensitive routing');
  mountRoutes(routes, {
    node: (path, handler) => app.get(path, handler),
    json: (path, handler) => app.post(path, jsonBody(), (req, res) => handler(req.body, res)),
    value: (path, body) => app.get(path, (_req, res) => writeJson(res, 200, body)),
    textQuery: (path, handler) => app.get(path, (req, res) => handler(req.query.text, req, res)),
    // The body unread: the handler streams it (a multipart upload) or reads its JSON itself.
    raw: (method, path, handler) => {
      const answer = (req: express.Request, res: express.Response) => handler(req, res);
      if (method === 'GET') app.get(path, answer);
      else if (method === 'POST') app.post(path, answer);
      else app.delete(path, answer);
    },
  });
  app.use((req, res) => writeRouteError(res, req.path, noRoute(req.method, req.path)));
  const report = serverErrorReporter((error) => console.error(error));
  app.use((error: unknown, req: express.Request, res: express.Response, next: express.NextFunction) => {
    if (!isOpenAiPath(req.path) || res.headersSent) {
      next(error);
      return;
    }
    // A body parser's failure is a 4xx with a fixed message (its own may quote the body), not a fault to report.
    const mapped = fromBodyParserError(error);
    writeOpenAiError(res, mapped);
    report(mapped);
  });
  app.use(batchErrorHandler());
  return app;
}
