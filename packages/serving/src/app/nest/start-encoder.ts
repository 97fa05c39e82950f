import type { ClassifierService } from '../../service/classifier-service.js';
import type { EncoderAppOptions } from '../encoder-routes.js';
import type { ListenOptions, RunningServer } from '../serve.js';
import { EncoderModule } from './encoder.module.js';
import { startNestModule } from './start.js';

/**
 * Creates the Nest app of {@link EncoderModule} for the service's task and listens at once; `shutdown` stops
 * accepting, then `app.close()` drains the batcher and closes the model.
 *
 * @example
 * ```ts
 * const running = await startEncoderApp(reranker, { port: 0, host: '127.0.0.1' });
 * ```
 */
export function startEncoderApp(
  service: ClassifierService,
  where: ListenOptions,
  options: EncoderAppOptions = {},
): Promise<RunningServer> {
  return startNestModule(EncoderModule.forRoot(service, options), where, service);
}
