import type { RequestListener, Server } from 'node:http';
import { NestFactory } from '@nestjs/core';
import type { EmbeddingsAppOptions } from '../app-options.js';
import type { EmbeddingService } from '../embedding-model.js';
import { shutdownServer } from '../graceful-shutdown.js';
import { type ListenOptions, type RunningServer, listen, serverUrl } from '../serve.js';
import { EmbeddingsModule } from './embeddings.module.js';

/**
 * Creates the Nest app of {@link EmbeddingsModule} and listens at once; `shutdown` stops accepting, then
 * `app.close()` drains the batcher and closes the model.
 *
 * @example
 * ```ts
 * const running = await startEmbeddingsApp(model, { port: 0, host: '127.0.0.1' });
 * ```
 */
export async function startEmbeddingsApp(
  service: EmbeddingService,
  where: ListenOptions,
  options: EmbeddingsAppOptions = {},
): Promise<RunningServer> {
  const app = await NestFactory.create(EmbeddingsModule.forRoot(service, options), {
    logger: ['error', 'warn'],
    bodyParser: false,
  });
  let server: Server;
  try {
    await app.init();
    server = await listen(app.getHttpAdapter().getInstance() as RequestListener, where);
  } catch (error) {
    await app.close();
    throw error;
  }
  return {
    server,
    url: serverUrl(server),
    ready: service.ready,
    shutdown: shutdownServer(server, { drain: () => app.close() }),
  };
}
