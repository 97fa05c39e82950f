import type { MultiModelAppOptions } from '../multi-model-routes.js';
import type { ListenOptions, RunningServer } from '../serve.js';
import type { ModelRegistry } from '../../registry/model-registry.js';
import { MultiModelModule } from './multi-model.module.js';
import { startNestModule } from './start.js';

/**
 * Creates the Nest app of {@link MultiModelModule} and listens at once (readiness says when the eager models are
 * loaded); `shutdown` stops accepting, then `app.close()` drains every loaded model and closes them.
 *
 * @example
 * ```ts
 * const running = await startMultiModelApp(registry, { port: 0, host: '127.0.0.1' });
 * ```
 */
export function startMultiModelApp(
  registry: ModelRegistry,
  where: ListenOptions,
  options: MultiModelAppOptions = {},
): Promise<RunningServer> {
  return startNestModule(MultiModelModule.forRoot(registry, options), where, registry);
}
