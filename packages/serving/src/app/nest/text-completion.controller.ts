// The text-completion app's controller on NestJS, made from its route table (`table-module.ts`).
import type { TextCompletionAppOptions } from '../app-options.js';
import { TEXT_COMPLETION_TABLE, textCompletionRoutes } from '../text-completion-routes.js';
import type { TextCompletionService } from '../../service/text-completion-service.js';
import { tableController } from './table-module.js';
import { TEXT_COMPLETION_APP_OPTIONS, TEXT_COMPLETION_SERVICE } from './text-completion.constants.js';

/**
 * The text-completion routes on NestJS: the shared table's routes (`textCompletionRoutes`, the same as the other
 * frameworks' apps), one method per row under its Nest decorator: `GET /?text=` through the service's own batcher
 * (every batcher option the service was made with applies here too, and the answer carries the `X-Batch-*` headers;
 * `HEAD` answers at once, without running the model), OpenAI's completions and chat completions (JSON or
 * `stream: true`), the model list, probes, metrics, dashboard, and the Files and Batch APIs. Its constructor's
 * parameters name their tokens (`TEXT_COMPLETION_SERVICE`, `TEXT_COMPLETION_APP_OPTIONS`): apps run under tsx, which
 * emits no decorator metadata for Nest to read the parameter types from.
 *
 * @example
 * ```ts
 * @Module({ controllers: [TextCompletionController], providers: [...] })
 * ```
 */
export const TextCompletionController = tableController<TextCompletionService, TextCompletionAppOptions>({
  name: 'TextCompletionController',
  table: TEXT_COMPLETION_TABLE,
  routes: textCompletionRoutes,
  service: TEXT_COMPLETION_SERVICE,
  options: TEXT_COMPLETION_APP_OPTIONS,
});
