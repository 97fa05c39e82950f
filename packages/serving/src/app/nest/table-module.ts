// The serving apps on NestJS, made from their route tables as the other frameworks' apps are: one controller per
// table (a method per row, under the row's verb and path, answered by the row's resolved, key-guarded handler) and
// one module per app (the service and options as providers, the error filter, drain-then-close, strict paths, the
// JSON bodies of the `POST` rows read by core's reader). A route added to a table is served on Nest with no edit here.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { writeJson } from '@microbatch/core/http';
import {
  type ArgumentsHost,
  Catch,
  Controller,
  Delete,
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
  type Type,
} from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { BATCH_API_TABLE } from '../../batch-api/batch-api-routes.js';
import { httpErrorOptions } from '../app-options.js';
import { writeRouteError } from '../route-errors.js';
import {
  type AppRoute,
  type NoRoute,
  type RouteMethod,
  type RouteRow,
  allowedMethods,
  colonPath,
} from '../route-table.js';
import { requestPath } from '../text-completion-routes.js';
import { exactPaths } from './exact-paths.middleware.js';
import { HideServerStack } from './express-settings.js';
import { openAiJsonBody } from './openai-json-body.js';
import { serviceLifecycle } from './service-lifecycle.js';

/** How an app's controller is made: its table, its routes over the injected service and options, its tokens. */
export interface TableControllerSpec<Service, Options> {
  /** The class name Nest reports (`EmbeddingsController`). */
  readonly name: string;
  readonly table: readonly RouteRow[];
  /** The table's routes, resolved (and key-guarded) by the app's own `...Routes` function, in table order. */
  readonly routes: (service: Service, options: Options) => readonly AppRoute[];
  /** The injection token of the service. */
  readonly service: symbol;
  /** The injection token of the options (optional: absent, `{}`). */
  readonly options: symbol;
}

/** `POST` rows whose raw handlers read their own bodies (a multipart upload streams to disk): no JSON reader there. */
const RAW_POSTS: ReadonlySet<string> = new Set(
  BATCH_API_TABLE.filter((row) => row.method === 'POST').map((row) => row.path),
);

const VERBS: Readonly<Record<RouteMethod, (path: string) => MethodDecorator>> = {
  GET: Get,
  POST: Post,
  DELETE: Delete,
};

/** Answers one request with a resolved route, as the other frameworks' mounts do for its kind. */
function answer(route: AppRoute, req: IncomingMessage & { body?: unknown; query?: unknown }, res: ServerResponse) {
  switch (route.kind) {
    case 'node':
    case 'raw':
      return route.handler(req, res);
    case 'json':
      return route.handler(req.body, res); // read by `openAiJsonBody()`
    case 'text-query':
      return route.handler((req.query as Record<string, unknown> | undefined)?.text, req, res);
    case 'value':
      writeJson(res, 200, route.body);
      return Promise.resolve();
  }
}

/**
 * A Nest controller serving `spec.table`: one method per row (`GET` rows answer `HEAD` too, as Express routes them),
 * each answered by the row's route from `spec.routes`, made once when Nest builds the controller.
 *
 * @example
 * ```ts
 * const EmbeddingsController = tableController({ name: 'EmbeddingsController', table: EMBEDDINGS_TABLE, ... });
 * ```
 */
export function tableController<Service, Options extends object>(
  spec: TableControllerSpec<Service, Options>,
): Type<unknown> {
  class TableController {
    readonly #routes: readonly AppRoute[];

    constructor(service: Service, options: Options | undefined) {
      this.#routes = spec.routes(service, options ?? ({} as Options));
    }

    answer(index: number, req: IncomingMessage, res: ServerResponse): Promise<void> {
      return answer(this.#routes[index] as AppRoute, req, res);
    }
  }
  Inject(spec.service)(TableController, undefined, 0);
  Optional()(TableController, undefined, 1);
  Inject(spec.options)(TableController, undefined, 1);
  const prototype = TableController.prototype as unknown as Record<string, unknown>;
  spec.table.forEach((row, index) => {
    const key = `route${index}`;
    Object.defineProperty(prototype, key, {
      value: function (this: TableController, req: IncomingMessage, res: ServerResponse) {
        return this.answer(index, req, res);
      },
      writable: true,
      configurable: true,
    });
    Req()(prototype, key, 0);
    Res()(prototype, key, 1);
    VERBS[row.method](colonPath(row.path).slice(1))(
      prototype,
      key,
      Object.getOwnPropertyDescriptor(prototype, key) as PropertyDescriptor,
    );
  });
  Controller()(TableController);
  Object.defineProperty(TableController, 'name', { value: spec.name });
  return TableController;
}

/**
 * Every error as JSON (OpenAI's shape on `/v1/*` and the encoder paths), Nest's 404 as the table's 404 / 405
 * (`noRoute`), as on every framework's app.
 *
 * @example
 * ```ts
 * providers: [{ provide: APP_FILTER, useClass: routeErrorFilter(noEmbeddingsRoute) }]
 * ```
 */
export function routeErrorFilter(noRoute: NoRoute): Type<ExceptionFilter> {
  @Catch()
  class RouteErrorFilter implements ExceptionFilter {
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
  return RouteErrorFilter;
}

/** What a module serves for one service: the controller of its table, the table's paths, and its error filter. */
export interface TableApp {
  readonly controller: Type<unknown>;
  readonly table: readonly RouteRow[];
  readonly noRoute: NoRoute;
  /** @default `routeErrorFilter(noRoute)` */
  readonly filter?: Type<ExceptionFilter>;
}

/** How an app's module is made: its name, its tokens, and the app it serves for a service. */
export interface TableModuleSpec<Service> {
  /** The class name Nest reports (`EmbeddingsModule`). */
  readonly name: string;
  readonly service: symbol;
  readonly options: symbol;
  /** The app for `service` (the encoder module's depends on its task). */
  readonly app: (service: Service) => TableApp;
}

/** A module class made by {@link tableModule}: `forRoot(service, options?)` gives the app's dynamic module. */
export interface TableModuleClass<Service, Options> extends Type<NestModule> {
  forRoot(service: Service, options?: Options): DynamicModule;
}

/**
 * A Nest module serving one app's table over a service: create the app with `bodyParser: false`, so that the
 * `POST` rows' bodies are read by core's reader (415, 413 before reading, fixed messages, OpenAI's shape) and not by
 * Nest's, which quotes the body in its errors; `app.close()` drains the service, then closes it.
 *
 * @example
 * ```ts
 * export const EmbeddingsModule = tableModule({ name: 'EmbeddingsModule', service: EMBEDDING_SERVICE, ... });
 * ```
 */
export function tableModule<Service, Options extends object>(
  spec: TableModuleSpec<Service>,
): TableModuleClass<Service, Options> {
  @Module({})
  class TableModule implements NestModule {
    static forRoot(service: Service, options: Options = {} as Options): DynamicModule {
      httpErrorOptions(options); // a bad `exposeDetails` fails here, not when Nest first builds the controller
      const app = spec.app(service);
      return {
        module: TableModule,
        controllers: [app.controller],
        providers: [
          { provide: spec.service, useValue: service },
          { provide: spec.options, useValue: options },
          { provide: APP_FILTER, useClass: app.filter ?? routeErrorFilter(app.noRoute) },
          serviceLifecycle(spec.service),
          HideServerStack,
        ],
      };
    }

    readonly #app: TableApp;

    constructor(service: Service) {
      this.#app = spec.app(service);
    }

    configure(consumer: MiddlewareConsumer): void {
      const app = this.#app;
      // First: a path that is not exactly a route's is a 404 before its body is read.
      consumer.apply(exactPaths(allowedMethods(app.table), app.noRoute)).forRoutes(app.controller);
      for (const row of app.table) {
        if (row.method !== 'POST' || RAW_POSTS.has(row.path)) continue;
        consumer.apply(openAiJsonBody()).forRoutes({ path: row.path.slice(1), method: RequestMethod.POST });
      }
    }
  }
  Inject(spec.service)(TableModule, undefined, 0);
  Object.defineProperty(TableModule, 'name', { value: spec.name });
  return TableModule;
}
