// How the Koa serving apps mount the shared route tables (`../text-completion-routes.ts`, `../embeddings-routes.ts`):
// every route answers on the Node response itself (`ctx.respond = false`), the same bytes and headers as on the other
// frameworks; routed strictly (case and trailing slash matter), errors on `/v1/*` in OpenAI's shape.
import { Router } from '@koa/router';
import { fromBodyParserError, serverErrorReporter } from '@microbatch/core/http';
import { batchErrorHandler, jsonBody } from '@microbatch/koa';
import Koa from 'koa';
import { type AppRoute, type NoRoute, mountRoutes } from '../route-table.js';
import { isOpenAiPath } from '../route-errors.js';
import { writeOpenAiError } from '../../openai/openai-error.js';

const CLIENT_GONE: ReadonlySet<string> = new Set([
  'ECONNRESET',
  'EPIPE',
  'ECONNABORTED',
  'ERR_STREAM_PREMATURE_CLOSE',
  'ERR_HTTP_REQUEST_TIMEOUT',
]);

/**
 * A Koa app serving `routes`, with `batchErrorHandler` first (body problems (400, 413, 415) and unknown routes as
 * JSON errors, OpenAI's shape on `/v1/*`) and `noRoute`'s 404 / 405 for anything the router did not answer.
 * Routing is strict and case-sensitive: `/healthz/` and `/HEALTHZ` are 404s, as on Fastify and OpenAI.
 */
export function koaApp(routes: readonly AppRoute[], noRoute: NoRoute): Koa {
  const router = new Router({ strict: true, sensitive: true });
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
    // The body unread: the handler streams it (a multipart upload) or reads its JSON itself.
    raw: (method, path, handler) => {
      const answer = async (ctx: Koa.Context): Promise<void> => {
        ctx.respond = false;
        await handler(ctx.req, ctx.res);
      };
      if (method === 'GET') router.get(path, answer);
      else if (method === 'POST') router.post(path, answer);
      else router.delete(path, answer);
    },
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
  app.use(openAiErrors());
  app.use(router.routes());
  app.use((ctx) => {
    throw noRoute(ctx.method, ctx.path);
  });
  return app;
}

/**
 * Answers what a `/v1/*` request threw (a body refused by `jsonBody`, an unknown route or method) in OpenAI's shape
 * on the Node response; other paths' errors go on to `batchErrorHandler`.
 */
function openAiErrors(): Koa.Middleware {
  const report = serverErrorReporter((error) => console.error(error));
  return async (ctx, next) => {
    if (!isOpenAiPath(ctx.path)) return next();
    try {
      await next();
    } catch (error) {
      // Once headers are out only Koa's own handling can close the response properly.
      if (ctx.headerSent) throw error;
      const mapped = fromBodyParserError(error);
      ctx.respond = false;
      writeOpenAiError(ctx.res, mapped);
      report(mapped);
    }
  };
}
