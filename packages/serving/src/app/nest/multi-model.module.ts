// Several models behind one Nest app, each request routed by its `model`: the multi-model table's handlers
// (`../multi-model-routes.ts`), as on the other frameworks.
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type ArgumentsHost,
  Body,
  Catch,
  Controller,
  type DynamicModule,
  type ExceptionFilter,
  Get,
  HttpException,
  Inject,
  type MiddlewareConsumer,
  Module,
  type NestModule,
  Optional,
  Post,
  Req,
  RequestMethod,
  Res,
} from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { httpErrorOptions } from '../app-options.js';
import {
  MULTI_MODEL_ROUTES,
  type MultiModelAppOptions,
  multiModelHandlers,
  noMultiModelRoute,
} from '../multi-model-routes.js';
import { writeRouteError } from '../route-errors.js';
import { requestPath } from '../text-completion-routes.js';
import type { ModelRegistry } from '../../registry/model-registry.js';
import { exactPaths } from './exact-paths.middleware.js';
import { HideServerStack } from './express-settings.js';
import { openAiJsonBody } from './openai-json-body.js';
import { serviceLifecycle } from './service-lifecycle.js';

/** The injection token of the app's `ModelRegistry`. */
export const MODEL_REGISTRY = Symbol.for('microbatch.serving.modelRegistry');

/** The injection token of the app's `MultiModelAppOptions` (optional: absent, the defaults). */
export const MULTI_MODEL_APP_OPTIONS = Symbol.for('microbatch.serving.multiModelAppOptions');

/** The multi-model routes on NestJS. */
@Controller()
export class MultiModelController {
  readonly #routes: ReturnType<typeof multiModelHandlers>;

  constructor(
    @Inject(MODEL_REGISTRY) registry: ModelRegistry,
    @Optional() @Inject(MULTI_MODEL_APP_OPTIONS) options: MultiModelAppOptions = {},
  ) {
    this.#routes = multiModelHandlers(registry, options);
  }

  @Post('v1/completions')
  completions(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return this.#routes.completions.handler(body, res);
  }

  @Post('v1/chat/completions')
  chatCompletions(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return this.#routes.chatCompletions.handler(body, res);
  }

  @Post('v1/embeddings')
  embeddings(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return this.#routes.embeddings.handler(body, res);
  }

  @Post('v1/rerank')
  rerankV1(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return this.#routes.rerank.handler(body, res);
  }

  @Post('rerank')
  rerank(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return this.#routes.rerank.handler(body, res);
  }

  @Post('v1/score')
  score(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return this.#routes.score.handler(body, res);
  }

  @Post('classify')
  classify(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return this.#routes.classify.handler(body, res);
  }

  @Get('v1/models')
  models(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.#routes.models.handler(req, res);
  }

  @Get('healthz')
  healthz(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.#routes.liveness.handler(req, res);
  }

  @Get('readyz')
  readyz(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.#routes.readiness.handler(req, res);
  }

  @Get('metrics')
  metrics(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.#routes.metrics.handler(req, res);
  }

  @Get('dashboard')
  dashboard(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.#routes.dashboard.handler(req, res);
  }
}

/** Every error as JSON (OpenAI's shape on `/v1/*`), unknown routes as the table's 404 / 405, as on every app. */
@Catch()
class MultiModelErrorFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const res = http.getResponse<ServerResponse>();
    const req = http.getRequest<IncomingMessage>();
    const path = requestPath(req.url);
    if (exception instanceof HttpException && exception.getStatus() === 404) {
      writeRouteError(res, path, noMultiModelRoute(req.method ?? 'GET', path));
    } else {
      writeRouteError(res, path, exception);
    }
  }
}

/**
 * The multi-model app as a Nest module; create the app with `bodyParser: false` (`jsonBody()` reads the bodies).
 * `app.close()` drains every loaded model, then closes them.
 *
 * @example
 * ```ts
 * const app = await NestFactory.create(MultiModelModule.forRoot(registry), { bodyParser: false });
 * ```
 */
@Module({})
export class MultiModelModule implements NestModule {
  static forRoot(registry: ModelRegistry, options: MultiModelAppOptions = {}): DynamicModule {
    httpErrorOptions(options); // a bad `exposeDetails` fails here, not when Nest first builds the controller
    return {
      module: MultiModelModule,
      controllers: [MultiModelController],
      providers: [
        { provide: MODEL_REGISTRY, useValue: registry },
        { provide: MULTI_MODEL_APP_OPTIONS, useValue: options },
        { provide: APP_FILTER, useClass: MultiModelErrorFilter },
        serviceLifecycle(MODEL_REGISTRY),
        HideServerStack,
      ],
    };
  }

  configure(consumer: MiddlewareConsumer): void {
    // First: a path that is not exactly a route's is a 404 before its body is read.
    consumer.apply(exactPaths(MULTI_MODEL_ROUTES, noMultiModelRoute)).forRoutes(MultiModelController);
    for (const path of [
      'v1/completions',
      'v1/chat/completions',
      'v1/embeddings',
      'v1/rerank',
      'rerank',
      'v1/score',
      'classify',
    ]) {
      consumer.apply(openAiJsonBody()).forRoutes({ path, method: RequestMethod.POST });
    }
  }
}
