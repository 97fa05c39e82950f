// The Ray Serve text-generator tutorial on NestJS, with an OpenAI-compatible endpoint, health probes and a graceful
// shutdown: `@Batch()` batches the tutorial's route, the OpenAI endpoint shares the model's batchers.
import 'reflect-metadata';
import type { Server } from 'node:http';
import { BatchModule, BatchRegistry } from '@microbatch/nest';
import { createTextCompletionModel, logBatches, serverUrl, shutdownServer } from '@microbatch/serving';
import type { RunningServer, TextCompletionModel, TextCompletionServerOptions } from '@microbatch/serving';
import { type BeforeApplicationShutdown, type DynamicModule, Inject, Injectable, Module, type OnApplicationShutdown } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TextCompletionController } from './text-completion.controller.js';
import { TEXT_COMPLETION_MODEL, TextQueryPipe } from './text-query.js';

/** Drains the model's batchers with the app's own (`app.close()`), then stops its workers. */
@Injectable()
class ModelLifecycle implements BeforeApplicationShutdown, OnApplicationShutdown {
  constructor(@Inject(TEXT_COMPLETION_MODEL) private readonly model: TextCompletionModel) {}

  beforeApplicationShutdown(): Promise<void> {
    return this.model.drain();
  }

  onApplicationShutdown(): Promise<void> {
    return this.model.close();
  }
}

@Module({})
export class AppModule {
  /** The app over `model`; `@Batch()` routes batch like the model's own batchers. */
  static forRoot(model: TextCompletionModel): DynamicModule {
    const { maxBatchSize, batchWaitTimeoutMs } = model.generate;
    return {
      module: AppModule,
      imports: [BatchModule.forRoot({ maxBatchSize, batchWaitTimeoutMs, maxConcurrentBatches: model.pool.size })],
      controllers: [TextCompletionController],
      providers: [{ provide: TEXT_COMPLETION_MODEL, useValue: model }, TextQueryPipe, ModelLifecycle],
    };
  }
}

/** Loads the model and listens at once (readiness says when the model is loaded). */
export async function start(options: TextCompletionServerOptions): Promise<RunningServer> {
  const { port, host, ...modelOptions } = options;
  const model = createTextCompletionModel(modelOptions);
  const app = await NestFactory.create(AppModule.forRoot(model), { logger: ['error', 'warn'] });
  try {
    await app.listen(port, host);
  } catch (error) {
    await app.close(); // stops the workers, which would keep the process alive
    throw error;
  }
  // One line per batch for the `@Batch()` route too (the model logs its own batchers).
  if (modelOptions.log !== false) for (const batcher of app.get(BatchRegistry).batchers) logBatches(batcher, modelOptions.log);
  const server = app.getHttpServer() as Server;
  // `app.close()` drains every batcher (BatchRegistry, ModelLifecycle) before Nest closes the server.
  return { server, url: serverUrl(server), ready: model.ready, shutdown: shutdownServer(server, { drain: () => app.close() }) };
}
