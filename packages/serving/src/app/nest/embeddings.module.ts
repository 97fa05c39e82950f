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
import { type EmbeddingsAppOptions, httpErrorOptions } from '../app-options.js';
import type { EmbeddingService } from '../../service/embedding-service.js';
import { EMBEDDINGS_ROUTES, embeddingsHandlers, noEmbeddingsRoute } from '../embeddings-routes.js';
import { writeRouteError } from '../route-errors.js';
import { requestPath } from '../text-completion-routes.js';
import { exactPaths } from './exact-paths.middleware.js';
import { HideServerStack } from './express-settings.js';
import { openAiJsonBody } from './openai-json-body.js';
import { ServingController } from './serving.controller.js';
import { serviceLifecycle } from './service-lifecycle.js';

/** The injection token of the app's `EmbeddingService`. */
export const EMBEDDING_SERVICE = Symbol.for('microbatch.serving.embeddingService');

/** The injection token of the app's `EmbeddingsAppOptions` (optional: absent, the defaults). */
export const EMBEDDINGS_APP_OPTIONS = Symbol.for('microbatch.serving.embeddingsAppOptions');

/** The embeddings routes on NestJS: the shared table's handlers (`embeddingsHandlers`), as on the other frameworks. */
@Controller()
export class EmbeddingsController extends ServingController {
  protected readonly routes: ReturnType<typeof embeddingsHandlers>;

  constructor(
    @Inject(EMBEDDING_SERVICE) service: EmbeddingService,
    @Optional() @Inject(EMBEDDINGS_APP_OPTIONS) options: EmbeddingsAppOptions = {},
  ) {
    super();
    this.routes = embeddingsHandlers(service, options);
  }

  @Post('v1/embeddings')
  embeddings(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return this.routes.embeddings.handler(body, res);
  }
}

/** Every error as JSON (OpenAI's shape on `/v1/*`), unknown routes as the shared table's 404 / 405, as on every app. */
@Catch()
class EmbeddingsErrorFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const res = http.getResponse<ServerResponse>();
    const req = http.getRequest<IncomingMessage>();
    const path = requestPath(req.url);
    if (exception instanceof HttpException && exception.getStatus() === 404) {
      writeRouteError(res, path, noEmbeddingsRoute(req.method ?? 'GET', path));
    } else {
      writeRouteError(res, path, exception);
    }
  }
}

/**
 * The embeddings app as a Nest module; create the app with `bodyParser: false` (`jsonBody()` reads the bodies).
 *
 * @example
 * ```ts
 * const app = await NestFactory.create(EmbeddingsModule.forRoot(model), { bodyParser: false });
 * ```
 */
@Module({})
export class EmbeddingsModule implements NestModule {
  static forRoot(service: EmbeddingService, options: EmbeddingsAppOptions = {}): DynamicModule {
    httpErrorOptions(options); // a bad `exposeDetails` fails here, not when Nest first builds the controller
    return {
      module: EmbeddingsModule,
      controllers: [EmbeddingsController],
      providers: [
        { provide: EMBEDDING_SERVICE, useValue: service },
        { provide: EMBEDDINGS_APP_OPTIONS, useValue: options },
        { provide: APP_FILTER, useClass: EmbeddingsErrorFilter },
        serviceLifecycle(EMBEDDING_SERVICE),
        HideServerStack,
      ],
    };
  }

  configure(consumer: MiddlewareConsumer): void {
    // First: a path that is not exactly a route's is a 404 before its body is read.
    consumer.apply(exactPaths(EMBEDDINGS_ROUTES, noEmbeddingsRoute)).forRoutes(EmbeddingsController);
    consumer.apply(openAiJsonBody()).forRoutes({ path: 'v1/embeddings', method: RequestMethod.POST });
  }
}
