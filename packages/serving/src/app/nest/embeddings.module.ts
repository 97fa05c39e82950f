// The embeddings app on NestJS: its route table's controller and module (`table-module.ts`), as on the other
// frameworks: `POST /v1/embeddings`, the model list, probes, metrics, and the Files and Batch APIs.
import type { EmbeddingsAppOptions } from '../app-options.js';
import type { EmbeddingService } from '../../service/embedding-service.js';
import { EMBEDDINGS_TABLE, embeddingsRoutes, noEmbeddingsRoute } from '../embeddings-routes.js';
import { tableController, tableModule } from './table-module.js';

/** The injection token of the app's `EmbeddingService`. */
export const EMBEDDING_SERVICE = Symbol.for('microbatch.serving.embeddingService');

/** The injection token of the app's `EmbeddingsAppOptions` (optional: absent, the defaults). */
export const EMBEDDINGS_APP_OPTIONS = Symbol.for('microbatch.serving.embeddingsAppOptions');

/** The embeddings routes on NestJS: the shared table's routes (`embeddingsRoutes`), as on the other frameworks. */
export const EmbeddingsController = tableController<EmbeddingService, EmbeddingsAppOptions>({
  name: 'EmbeddingsController',
  table: EMBEDDINGS_TABLE,
  routes: embeddingsRoutes,
  service: EMBEDDING_SERVICE,
  options: EMBEDDINGS_APP_OPTIONS,
});

/**
 * The embeddings app as a Nest module; create the app with `bodyParser: false` (`jsonBody()` reads the bodies).
 *
 * @example
 * ```ts
 * const app = await NestFactory.create(EmbeddingsModule.forRoot(model), { bodyParser: false });
 * ```
 */
export const EmbeddingsModule = tableModule<EmbeddingService, EmbeddingsAppOptions>({
  name: 'EmbeddingsModule',
  service: EMBEDDING_SERVICE,
  options: EMBEDDINGS_APP_OPTIONS,
  app: () => ({ controller: EmbeddingsController, table: EMBEDDINGS_TABLE, noRoute: noEmbeddingsRoute }),
});
