// The encoder apps on NestJS: a rerank controller (`POST /v1/rerank`, `/rerank`, `/v1/score`) or a classify
// controller (`POST /classify`), whichever the service's task serves, made from that task's route table
// (`table-module.ts`), as on the other frameworks.
import type { ClassifierService, ClassifierTask } from '../../service/classifier-service.js';
import { ENCODER_TABLES, type EncoderAppOptions, encoderRoutes, noEncoderRoute } from '../encoder-routes.js';
import { type TableApp, tableController, tableModule } from './table-module.js';

/** The injection token of the app's `ClassifierService`. */
export const CLASSIFIER_SERVICE = Symbol.for('microbatch.serving.classifierService');

/** The injection token of the app's `EncoderAppOptions` (optional: absent, the defaults). */
export const ENCODER_APP_OPTIONS = Symbol.for('microbatch.serving.encoderAppOptions');

/** The controller of one task's table. */
const taskController = (name: string, task: ClassifierTask) =>
  tableController<ClassifierService, EncoderAppOptions>({
    name,
    table: ENCODER_TABLES[task],
    routes: encoderRoutes,
    service: CLASSIFIER_SERVICE,
    options: ENCODER_APP_OPTIONS,
  });

/** The rerank routes on NestJS (a `rerank` service): the shared table's routes, as on the other frameworks. */
export const RerankController = taskController('RerankController', 'rerank');

/** The classify route on NestJS (a `text-classification` service). */
export const ClassifyController = taskController('ClassifyController', 'text-classification');

/** Each task's app: its controller, its table, and the table's 404 / 405. */
const TASK_APPS: Readonly<Record<ClassifierTask, TableApp>> = {
  rerank: { controller: RerankController, table: ENCODER_TABLES.rerank, noRoute: noEncoderRoute('rerank') },
  'text-classification': {
    controller: ClassifyController,
    table: ENCODER_TABLES['text-classification'],
    noRoute: noEncoderRoute('text-classification'),
  },
};

/**
 * The encoder app as a Nest module, for the service's task; create the app with `bodyParser: false`.
 *
 * @example
 * ```ts
 * const app = await NestFactory.create(EncoderModule.forRoot(reranker), { bodyParser: false });
 * ```
 */
export const EncoderModule = tableModule<ClassifierService, EncoderAppOptions>({
  name: 'EncoderModule',
  service: CLASSIFIER_SERVICE,
  options: ENCODER_APP_OPTIONS,
  app: (service) => TASK_APPS[service.task],
});
