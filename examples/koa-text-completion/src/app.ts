// The Ray Serve text-generator tutorial on Koa, with an OpenAI-compatible endpoint, health probes and a graceful
// shutdown. Every route shares ONE batched model: concurrent requests coalesce into one model call.
import Koa from 'koa';
import { bodyParser } from '@koa/bodyparser';
import { Router } from '@koa/router';
import { batchErrorHandler, batchRoute } from '@microbatch/koa';
import { createHealth } from '@microbatch/prometheus';
import { createCompletionsEndpoint, parseTextQuery, startTextCompletionServer, textQueryAnswer } from '@microbatch/serving';
import type { RunningServer, TextCompletionModel, TextCompletionServerOptions } from '@microbatch/serving';

/** The app's routes over a text-completion model (from `createTextCompletionModel`). */
export function createApp(model: TextCompletionModel): Koa {
  const router = new Router();

  // The tutorial's curl: `curl "http://127.0.0.1:8000/?text=Once+upon+a+time"` prints the story, as plain text.
  router.get('/', batchRoute({
    batcher: model.generate,
    input: (ctx) => parseTextQuery(ctx.query.text, model.validate),
    output: (result, ctx) => {
      ctx.type = 'text/plain';
      ctx.body = textQueryAnswer(ctx.query.text, result);
    },
  }));

  // OpenAI's completions API (JSON or `stream: true`); the endpoint writes the Node response itself.
  const completions = createCompletionsEndpoint(model);
  router.post('/v1/completions', async (ctx) => {
    ctx.respond = false;
    await completions(ctx.request.body, ctx.res);
  });

  // Liveness always 200; readiness 503 while the model loads and once the server drains.
  const health = createHealth({ batchers: model.batchers, ready: model.isReady });
  router.get('/healthz', (ctx) => {
    ({ status: ctx.status, body: ctx.body } = health.liveness());
  });
  router.get('/readyz', async (ctx) => {
    ({ status: ctx.status, body: ctx.body } = await health.readiness());
  });

  // The error handler goes first: it answers body-parser failures (malformed JSON 400, too large 413) as JSON.
  const app = new Koa();
  app.use(batchErrorHandler()).use(bodyParser({ jsonLimit: '64kb' })).use(router.routes());
  app.use((ctx) => ctx.throw(404, `No route for ${ctx.method} ${ctx.path}`)); // answered as JSON by batchErrorHandler
  return app;
}

/** Loads the model and listens at once (readiness says when the model is loaded). */
export function start(options: TextCompletionServerOptions): Promise<RunningServer> {
  return startTextCompletionServer(options, (model) => createApp(model).callback());
}
