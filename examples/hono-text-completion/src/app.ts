// The Ray Serve text-generator tutorial on Hono (served by `@hono/node-server`), with an OpenAI-compatible endpoint,
// health probes and a graceful shutdown: the app itself is `@microbatch/serving/hono`'s, over one batched model.
import { createTextCompletionModel } from '@microbatch/serving';
import type { RunningServer, TextCompletionModel, TextCompletionServerOptions } from '@microbatch/serving';
import { createTextCompletionApp, startTextCompletionApp } from '@microbatch/serving/hono';
import type { Hono } from 'hono';

/** The app's routes over a text-completion model (from `createTextCompletionModel`). */
export function createApp(model: TextCompletionModel): Hono {
  return createTextCompletionApp(model);
}

/** Loads the model and listens at once (readiness says when the model is loaded). */
export function start(options: TextCompletionServerOptions): Promise<RunningServer> {
  const { port, host, ...modelOptions } = options;
  return startTextCompletionApp(createTextCompletionModel(modelOptions), { port, host });
}
