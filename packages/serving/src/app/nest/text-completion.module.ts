import { type DynamicModule, type MiddlewareConsumer, Module, type NestModule, RequestMethod } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { HideServerStack } from './express-settings.js';
import { exactPaths } from './exact-paths.middleware.js';
import { JsonErrorFilter } from './json-error.filter.js';
import { openAiJsonBody } from './openai-json-body.js';
import { serviceLifecycle } from './service-lifecycle.js';
import { type TextCompletionAppOptions, httpErrorOptions } from '../app-options.js';
import type { TextCompletionService } from '../../service/text-completion-service.js';
import { TEXT_COMPLETION_ROUTES, noRoute } from '../text-completion-routes.js';
import { TEXT_COMPLETION_APP_OPTIONS, TEXT_COMPLETION_SERVICE } from './text-completion.constants.js';
import { TextCompletionController } from './text-completion.controller.js';

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
   * Bodies are read by core's reader (415, 413 before reading, fixed messages, OpenAI's shape), as in the other apps;
   * create the app with `bodyParser: false` so that Nest's parser, which quotes the body in its errors, does not
   * read them first.
   */
  configure(consumer: MiddlewareConsumer): void {
    // First: a path that is not exactly a route's is a 404 before its body is read.
    consumer.apply(exactPaths(TEXT_COMPLETION_ROUTES, noRoute)).forRoutes(TextCompletionController);
    consumer.apply(openAiJsonBody()).forRoutes({ path: 'v1/completions', method: RequestMethod.POST });
    consumer.apply(openAiJsonBody()).forRoutes({ path: 'v1/chat/completions', method: RequestMethod.POST });
  }
}
