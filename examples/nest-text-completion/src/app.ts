// The Ray Serve text-generator tutorial on NestJS, with an OpenAI-compatible endpoint, health probes and a graceful
// shutdown: `@Batch()` batches the tutorial's route, the OpenAI endpoint shares the model's batchers. The module
// itself is `@microbatch/serving/nest`'s.
import { createTextCompletionModel } from '@microbatch/serving';
import type { RunningServer, TextCompletionServerOptions } from '@microbatch/serving';
import { startTextCompletionApp } from '@microbatch/serving/nest';

/** The app's module: `AppModule.forRoot(model)`; `@Batch()` routes batch like the model's own batchers. */
export { TextCompletionModule as AppModule } from '@microbatch/serving/nest';

/** Loads the model and listens at once (readiness says when the model is loaded). */
export function start(options: TextCompletionServerOptions): Promise<RunningServer> {
  const { port, host, ...modelOptions } = options;
  return startTextCompletionApp(createTextCompletionModel(modelOptions), { port, host }, { log: modelOptions.log });
}
