import type { IncomingMessage, ServerResponse } from 'node:http';
import { writeHttpError, writeJson } from '@microbatch/core/http';
import { jsonBody } from '@microbatch/nest';
import { type Health, createHealth, instrumentBatcher, scrapeMetrics } from '@microbatch/prometheus';
import {
  type ArgumentsHost,
  type BeforeApplicationShutdown,
  Body,
  Catch,
  Controller,
  type DynamicModule,
  type ExceptionFilter,
  Get,
  HttpException,
  Inject,
  Injectable,
  type MiddlewareConsumer,
  Module,
  type NestModule,
  type OnApplicationShutdown,
  Post,
  RequestMethod,
  Res,
} from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { Registry } from 'prom-client';
import type { EmbeddingService } from '../embedding-model.js';
import { type EmbeddingsEndpoint, createEmbeddingsEndpoint } from '../embeddings-endpoint.js';
import { noEmbeddingsRoute } from '../embeddings-routes.js';
import { type ModelList, modelList } from '../models-endpoint.js';

/** The injection token of the app's `EmbeddingService`. */
export const EMBEDDING_SERVICE = Symbol.for('microbatch.serving.embeddingService');

/** The embeddings routes on NestJS (the same as the Express and Koa apps'). */
@Controller()
export class EmbeddingsController {
  readonly #embeddings: EmbeddingsEndpoint;
  readonly #health: Health;
  readonly #models: ModelList;
  readonly #registry = new Registry();

  constructor(@Inject(EMBEDDING_SERVICE) service: EmbeddingService) {
    this.#embeddings = createEmbeddingsEndpoint(service);
    this.#models = modelList(service.id, new Date());
    this.#health = createHealth({ batchers: service.batchers, ready: () => service.isReady() });
    for (const batcher of service.batchers) instrumentBatcher(batcher, { registry: this.#registry });
  }

  @Post('v1/embeddings')
  embeddings(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return this.#embeddings(body, res);
  }

  @Get('v1/models')
  models(@Res() res: ServerResponse): void {
    writeJson(res, 200, this.#models);
  }

  @Get('healthz')
  healthz(@Res() res: ServerResponse): void {
    const { status, body } = this.#health.liveness();
    writeJson(res, status, body);
  }

  @Get('readyz')
  async readyz(@Res() res: ServerResponse): Promise<void> {
    const { status, body } = await this.#health.readiness();
    writeJson(res, status, body);
  }

  @Get('metrics')
  async metrics(@Res() res: ServerResponse): Promise<void> {
    const { status, contentType, body } = await scrapeMetrics(this.#registry);
    res.statusCode = status;
    res.setHeader('Content-Type', contentType);
    res.end(body);
  }
}

/** Every error as JSON, unknown routes as the shared table's 404 / 405, as on Express and Koa. */
@Catch()
class EmbeddingsErrorFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const res = http.getResponse<ServerResponse>();
    const req = http.getRequest<IncomingMessage>();
    if (exception instanceof HttpException && exception.getStatus() === 404) {
      writeHttpError(res, noEmbeddingsRoute(req.method ?? 'GET', new URL(req.url ?? '/', 'http://x').pathname));
    } else {
      writeHttpError(res, exception);
    }
  }
}

/** Drains the batcher with `app.close()`, then releases the model. */
@Injectable()
class EmbeddingLifecycle implements BeforeApplicationShutdown, OnApplicationShutdown {
  constructor(@Inject(EMBEDDING_SERVICE) private readonly service: EmbeddingService) {}

  beforeApplicationShutdown(): Promise<void> {
    return this.service.drain();
  }

  onApplicationShutdown(): Promise<void> {
    return this.service.close();
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
  static forRoot(service: EmbeddingService): DynamicModule {
    return {
      module: EmbeddingsModule,
      controllers: [EmbeddingsController],
      providers: [
        { provide: EMBEDDING_SERVICE, useValue: service },
        { provide: APP_FILTER, useClass: EmbeddingsErrorFilter },
        EmbeddingLifecycle,
      ],
    };
  }

  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(jsonBody()).forRoutes({ path: 'v1/embeddings', method: RequestMethod.POST });
  }
}
