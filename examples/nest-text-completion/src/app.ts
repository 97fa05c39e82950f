// The Ray Serve text-generator tutorial on NestJS, with an OpenAI-compatible endpoint, health probes and a graceful
// shutdown: every route goes through the model's own batchers, as in the Express and Koa apps. The module
// itself is `@microbatch/serving/nest`'s.
import { createTextCompletionModel } from '@microbatch/serving';
import type { RunningServer, TextCompletionServerOptions } from '@microbatch/serving';
import { startTextCompletionApp } from '@microbatch/serving/nest';

/** The app's module: `AppModule.forRoot(model)`. */
export { TextCompletionModule as AppModule } from '@microbatch/serving/nest';

/** Loads the model and listens at once (readiness says when the model is loaded). */
export function start(options: TextCompletionServerOptions): Promise<RunningServer> {
  const { port, host, ...modelOptions } = options;
  return startTextCompletionApp(createTextCompletionModel(modelOptions), { port, host });
}
