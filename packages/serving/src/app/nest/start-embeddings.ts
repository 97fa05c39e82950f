import type { EmbeddingsAppOptions } from '../app-options.js';
import type { EmbeddingService } from '../../service/embedding-service.js';
import type { ListenOptions, RunningServer } from '../serve.js';
import { EmbeddingsModule } from './embeddings.module.js';
import { startNestModule } from './start.js';

/**
 * Creates the Nest app of {@link EmbeddingsModule} and listens at once; `shutdown` stops accepting, then
 * `app.close()` drains the batcher and closes the model.
 *
 * @example
 * ```ts
 * const running = await startEmbeddingsApp(model, { port: 0, host: '127.0.0.1' });
 * ```
 */
export function startEmbeddingsApp(
  service: EmbeddingService,
  where: ListenOptions,
  options: EmbeddingsAppOptions = {},
): Promise<RunningServer> {
  return startNestModule(EmbeddingsModule.forRoot(service, options), where, service);
}
