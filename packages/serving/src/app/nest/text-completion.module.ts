// The text-completion app as a Nest module, made from its route table (`table-module.ts`), with the error filter
// that passes `@Batch()`'s own answers through.
import type { TextCompletionAppOptions } from '../app-options.js';
import type { TextCompletionService } from '../../service/text-completion-service.js';
import { TEXT_COMPLETION_TABLE, noRoute } from '../text-completion-routes.js';
import { JsonErrorFilter } from './json-error.filter.js';
import { tableModule } from './table-module.js';
import { TEXT_COMPLETION_APP_OPTIONS, TEXT_COMPLETION_SERVICE } from './text-completion.constants.js';
import { TextCompletionController } from './text-completion.controller.js';

/**
 * The text-completion app as a Nest module: `GET /?text=`, OpenAI `POST /v1/completions`, `/healthz`,
 * `/readyz`. `app.close()` drains every batcher, then closes the service. Every route goes through the service's own
 * batchers, so the options they were made with (batch size, wait, `maxLatencyMs`, `maxQueueSize`) hold here exactly
 * as in the Express and Koa apps. Create the app with `bodyParser: false`, so that Nest's parser, which quotes the
 * body in its errors, does not read the bodies before core's reader.
 *
 * @example
 * ```ts
 * const app = await NestFactory.create(TextCompletionModule.forRoot(model), { bodyParser: false });
 * ```
 */
export const TextCompletionModule = tableModule<TextCompletionService, TextCompletionAppOptions>({
  name: 'TextCompletionModule',
  service: TEXT_COMPLETION_SERVICE,
  options: TEXT_COMPLETION_APP_OPTIONS,
  app: () => ({
    controller: TextCompletionController,
    table: TEXT_COMPLETION_TABLE,
    noRoute,
    filter: JsonErrorFilter,
  }),
});
