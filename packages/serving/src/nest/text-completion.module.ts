import { jsonBody } from '@microbatch/nest';
import {
  type DynamicModule,
  Inject,
  Injectable,
  type MiddlewareConsumer,
  Module,
  type NestModule,
  type OnModuleInit,
  RequestMethod,
} from '@nestjs/common';
import { APP_FILTER, HttpAdapterHost } from '@nestjs/core';
import { JsonErrorFilter } from './json-error.filter.js';
import { serviceLifecycle } from './service-lifecycle.js';
import { type TextCompletionAppOptions, httpErrorOptions } from '../app-options.js';
import type { TextCompletionService } from '../text-completion-model.js';
import { TEXT_COMPLETION_APP_OPTIONS, TEXT_COMPLETION_SERVICE } from './text-completion.constants.js';
import { TextCompletionController } from './text-completion.controller.js';

/** No `X-Powered-By` on any answer, 404s included (Express sets it before any route or middleware of the module runs). */
@Injectable()
class HideServerStack implements OnModuleInit {
  constructor(@Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost) {}

  onModuleInit(): void {
    const instance = this.adapterHost.httpAdapter?.getInstance<{ disable?: (setting: string) => unknown }>();
    instance?.disable?.('x-powered-by');
  }
}

/**
 * The text-completion app as a Nest module: `GET /?text=`, OpenAI `POST /v1/completions`, `/healthz`,
 * `/readyz`. `app.close()` drains every batcher, then closes the service.
 *
 * @example
 * ```ts
 * const app = await NestFactory.create(TextCompletionModule.forRoot(model));
 * ```
 */
@Module({})
export class TextCompletionModule implements NestModule {
  /**
   * The app over `service`: every route goes through the service's own batchers, so the options they were made
   * with (batch size, wait, `maxLatencyMs`, `maxQueueSize`) hold here exactly as in the Express and Koa apps.
   */
  static forRoot(service: TextCompletionService, options: TextCompletionAppOptions = {}): DynamicModule {
    httpErrorOptions(options); // a bad `exposeDetails` fails here, not when Nest first builds the controller
    return {
      module: TextCompletionModule,
      controllers: [TextCompletionController],
      providers: [
        { provide: TEXT_COMPLETION_SERVICE, useValue: service },
        { provide: TEXT_COMPLETION_APP_OPTIONS, useValue: options },
        { provide: APP_FILTER, useClass: JsonErrorFilter },
        serviceLifecycle(TEXT_COMPLETION_SERVICE),
        HideServerStack,
      ],
    };
  }

  /**
   * Bodies are read by `jsonBody()` (415, 413 before reading, fixed messages), as in the Express and Koa apps;
   * create the app with `bodyParser: false` so that Nest's parser, which quotes the body in its errors, does not
   * read them first.
   */
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(jsonBody()).forRoutes({ path: 'v1/completions', method: RequestMethod.POST });
    consumer.apply(jsonBody()).forRoutes({ path: 'v1/chat/completions', method: RequestMethod.POST });
  }
}
