// How the Koa serving apps mount the shared route tables (`../routes.ts`, `../embeddings-routes.ts`): every route
// answers on the Node response itself (`ctx.respond = false`), the same bytes and headers as on the other frameworks.
import { Router } from '@koa/router';
import { batchErrorHandler, jsonBody } from '@microbatch/koa';
import Koa from 'koa';
import { type AppRoute, type NoRoute, mountRoutes } from '../app-routes.js';

const CLIENT_GONE: ReadonlySet<string> = new Set([
  'ECONNRESET',
  'EPIPE',
  'ECONNABORTED',
  'ERR_STREAM_PREMATURE_CLOSE',
  'ERR_HTTP_REQUEST_TIMEOUT',
]);

/**
 * A Koa app serving `routes`, with `batchErrorHandler` first (body problems (400, 413, 415) and unknown routes as
 * JSON errors) and `noRoute`'s 404 / 405 for anything the router did not answer.
 */
export function koaApp(routes: readonly AppRoute[], noRoute: NoRoute): Koa {
  const router = new Router();
  mountRoutes(routes, {
    node: (path, handler) =>
      router.get(path, async (ctx) => {
        ctx.respond = false;
        await handler(ctx.req, ctx.res);
      }),
    json: (path, handler) =>
      router.post(path, jsonBody(), async (ctx) => {
        ctx.respond = false;
        await handler((ctx.request as { body?: unknown }).body, ctx.res);
      }),
    value: (path, body) =>
      router.get(path, (ctx) => {
        ctx.body = body;
      }),
    textQuery: (path, handler) =>
      router.get(path, async (ctx) => {
        ctx.respond = false;
        await handler(ctx.query.text, ctx.req, ctx.res);
      }),
  });
  const app = new Koa();
  // Koa logs every `error` event (server faults reach it from batchErrorHandler); a client that broke the protocol
  // mid-request (a bad chunk size, a reset) is the client's problem, as on Express and Nest, not a log line.
  app.on('error', (error: unknown) => {
    const code = (error as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && (code.startsWith('HPE_') || CLIENT_GONE.has(code))) return;
    console.error(error);
  });
  app.use(batchErrorHandler());
  app.use(router.routes());
  app.use((ctx) => {
    throw noRoute(ctx.method, ctx.path);
  });
  return app;
}
