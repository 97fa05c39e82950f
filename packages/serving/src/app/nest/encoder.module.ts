// The encoder apps on NestJS: a rerank controller (`POST /v1/rerank`, `/rerank`, `/v1/score`) or a classify
// controller (`POST /classify`), whichever the service's task serves, over the shared table's handlers.
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type ArgumentsHost,
  Body,
  Catch,
  Controller,
  type DynamicModule,
  type ExceptionFilter,
  HttpException,
  Inject,
  type MiddlewareConsumer,
  Module,
  type NestModule,
  Optional,
  Post,
  RequestMethod,
  Res,
} from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { httpErrorOptions } from '../app-options.js';
import type { ClassifierService, ClassifierTask } from '../../service/classifier-service.js';
import {
  ENCODER_POST_PATHS,
  ENCODER_ROUTES,
  type EncoderAppOptions,
  encoderHandlers,
  noEncoderRoute,
} from '../encoder-routes.js';
import type { JsonRoute } from '../route-table.js';
import { writeRouteError } from '../route-errors.js';
import { requestPath } from '../text-completion-routes.js';
import { exactPaths } from './exact-paths.middleware.js';
import { HideServerStack } from './express-settings.js';
import { openAiJsonBody } from './openai-json-body.js';
import { ServingController } from './serving.controller.js';
import { serviceLifecycle } from './service-lifecycle.js';

/** The injection token of the app's `ClassifierService`. */
export const CLASSIFIER_SERVICE = Symbol.for('microbatch.serving.classifierService');

/** The injection token of the app's `EncoderAppOptions` (optional: absent, the defaults). */
export const ENCODER_APP_OPTIONS = Symbol.for('microbatch.serving.encoderAppOptions');

/** A handler the task's table has (the module mounts only the controller of the service's task). */
function route(handler: JsonRoute | undefined): JsonRoute {
  if (handler === undefined) throw new Error('This route is not served for this model task');
  return handler;
}

/** The rerank routes on NestJS (a `rerank` service): the shared table's handlers, as on the other frameworks. */
@Controller()
export class RerankController extends ServingController {
  protected readonly routes: ReturnType<typeof encoderHandlers>;

  constructor(
    @Inject(CLASSIFIER_SERVICE) service: ClassifierService,
    @Optional() @Inject(ENCODER_APP_OPTIONS) options: EncoderAppOptions = {},
  ) {
    super();
    this.routes = encoderHandlers(service, options);
  }

  @Post('v1/rerank')
  rerankV1(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return route(this.routes.rerank).handler(body, res);
  }

  @Post('rerank')
  rerank(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return route(this.routes.rerank).handler(body, res);
  }

  @Post('v1/score')
  score(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return route(this.routes.score).handler(body, res);
  }
}

/** The classify route on NestJS (a `text-classification` service). */
@Controller()
export class ClassifyController extends ServingController {
  protected readonly routes: ReturnType<typeof encoderHandlers>;

  constructor(
    @Inject(CLASSIFIER_SERVICE) service: ClassifierService,
    @Optional() @Inject(ENCODER_APP_OPTIONS) options: EncoderAppOptions = {},
  ) {
    super();
    this.routes = encoderHandlers(service, options);
  }

  @Post('classify')
  classify(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return route(this.routes.classify).handler(body, res);
  }
}

/** Every error as JSON (OpenAI's shape on the encoder routes), unknown routes as the table's 404 / 405. */
function encoderErrorFilter(task: ClassifierTask) {
  const noRoute = noEncoderRoute(task);
  @Catch()
  class EncoderErrorFilter implements ExceptionFilter {
    catch(exception: unknown, host: ArgumentsHost): void {
      const http = host.switchToHttp();
      const res = http.getResponse<ServerResponse>();
      const req = http.getRequest<IncomingMessage>();
      const path = requestPath(req.url);
      if (exception instanceof HttpException && exception.getStatus() === 404) {
        writeRouteError(res, path, noRoute(req.method ?? 'GET', path));
      } else {
        writeRouteError(res, path, exception);
      }
    }
  }
  return EncoderErrorFilter;
}

/**
 * The encoder app as a Nest module, for the service's task; create the app with `bodyParser: false`.
 *
 * @example
 * ```ts
 * const app = await NestFactory.create(EncoderModule.forRoot(reranker), { bodyParser: false });
 * ```
 */
@Module({})
export class EncoderModule implements NestModule {
  static forRoot(service: ClassifierService, options: EncoderAppOptions = {}): DynamicModule {
    httpErrorOptions(options); // a bad `exposeDetails` fails here, not when Nest first builds the controller
    const task = service.task;
    const controller = task === 'rerank' ? RerankController : ClassifyController;
    return {
      module: EncoderModule,
      controllers: [controller],
      providers: [
        { provide: CLASSIFIER_SERVICE, useValue: service },
        { provide: ENCODER_APP_OPTIONS, useValue: options },
        { provide: APP_FILTER, useClass: encoderErrorFilter(task) },
        serviceLifecycle(CLASSIFIER_SERVICE),
        HideServerStack,
      ],
    };
  }

  readonly #task: ClassifierTask;

  constructor(@Inject(CLASSIFIER_SERVICE) service: ClassifierService) {
    this.#task = service.task;
  }

  configure(consumer: MiddlewareConsumer): void {
    const task = this.#task;
    // First: a path that is not exactly a route's is a 404 before its body is read.
    consumer
      .apply(exactPaths(ENCODER_ROUTES[task], noEncoderRoute(task)))
      .forRoutes(task === 'rerank' ? RerankController : ClassifyController);
    consumer
      .apply(openAiJsonBody())
      .forRoutes(...ENCODER_POST_PATHS[task].map((path) => ({ path: path.slice(1), method: RequestMethod.POST })));
  }
}
