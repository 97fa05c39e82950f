// Several models behind one Nest app, each request routed by its `model`: the multi-model table's controller and
// module (`table-module.ts`) over its routes (`../multi-model-routes.ts`), as on the other frameworks.
import {
  MULTI_MODEL_TABLE,
  type MultiModelAppOptions,
  multiModelRoutes,
  noMultiModelRoute,
} from '../multi-model-routes.js';
import type { ModelRegistry } from '../../registry/model-registry.js';
import { tableController, tableModule } from './table-module.js';

/** The injection token of the app's `ModelRegistry`. */
export const MODEL_REGISTRY = Symbol.for('microbatch.serving.modelRegistry');

/** The injection token of the app's `MultiModelAppOptions` (optional: absent, the defaults). */
export const MULTI_MODEL_APP_OPTIONS = Symbol.for('microbatch.serving.multiModelAppOptions');

/** The multi-model routes on NestJS. */
export const MultiModelController = tableController<ModelRegistry, MultiModelAppOptions>({
  name: 'MultiModelController',
  table: MULTI_MODEL_TABLE,
  routes: multiModelRoutes,
  service: MODEL_REGISTRY,
  options: MULTI_MODEL_APP_OPTIONS,
});

/**
 * The multi-model app as a Nest module; create the app with `bodyParser: false` (`jsonBody()` reads the bodies).
 * `app.close()` drains every loaded model, then closes them.
 *
 * @example
 * ```ts
 * const app = await NestFactory.create(MultiModelModule.forRoot(registry), { bodyParser: false });
 * ```
 */
export const MultiModelModule = tableModule<ModelRegistry, MultiModelAppOptions>({
  name: 'MultiModelModule',
  service: MODEL_REGISTRY,
  options: MULTI_MODEL_APP_OPTIONS,
  app: () => ({ controller: MultiModelController, table: MULTI_MODEL_TABLE, noRoute: noMultiModelRoute }),
});
