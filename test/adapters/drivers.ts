// The contract suite's drivers: each builds the same app on one framework, so one test file checks Express, Koa,
// Fastify and Hono alike through real servers. Tests describe routes in a framework-neutral way (`NeutralRequest`), and the
// driver translates them to `batchRoute`'s own signature; what differs between frameworks is here and only here.
import { type ServerResponse, createServer } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import { bodyParser } from '@koa/bodyparser';
import { Router, type RouterContext } from '@koa/router';
import type { Batcher, StreamingBatcher } from '@microbatch/core';
import { BatchError } from '@microbatch/core';
import { applyServerLimits } from '@microbatch/core/http';
import type { RequestCallOptions, RouteBatcherOptions, ServerErrorListener, ServerLimits } from '@microbatch/core/http';
import * as expressAdapter from '@microbatch/express';
import * as fastifyAdapter from '@microbatch/fastify';
import * as honoAdapter from '@microbatch/hono';
import * as koaAdapter from '@microbatch/koa';
import { type TestServer, listen } from '@microbatch/test-kit';
import express, { type NextFunction, type Request, type Response } from 'express';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { HTTPException } from 'hono/http-exception';
import Koa, { type Next, type ParameterizedContext } from 'koa';

/** One request as a route's `input`, `output` and `callOptions` see it, whatever the framework. */
export interface NeutralRequest {
  /** The parsed JSON body. */
  readonly body: any;
  query(name: string): string | undefined;
  param(name: string): string | undefined;
  /** Whether the request's Content-Type is `type`. */
  is(type: string): boolean;
  /**
   * Fails the request with `status` the framework's way (Express: a `BatchError`, Koa: `ctx.throw`, Fastify: an
   * error with `statusCode`, Hono: an `HTTPException`).
   */
  reject(status: 415, message: string): never;
}

/** How a neutral `output` answers. */
export interface NeutralReply {
  text(status: number, body: string): void;
  json(value: unknown): void;
}

/** `batchRoute`'s options with the route functions written against {@link NeutralRequest}. */
export interface NeutralRouteOptions<I, O> extends RouteBatcherOptions<I, O> {
  readonly input?: (req: NeutralRequest) => I | PromiseLike<I>;
  readonly output?: (result: O, req: NeutralRequest, reply: NeutralReply) => void;
  readonly callOptions?: (req: NeutralRequest) => RequestCallOptions;
  readonly onError?: ServerErrorListener;
}

/** A route made by a driver: the framework's middleware and its batcher. */
export interface Route<I = any, O = any> {
  readonly batcher: Batcher<I, O> | StreamingBatcher<I, O>;
  readonly middleware: unknown;
}

/** One route of an app. */
export interface RouteSpec {
  /** `use` mounts the route for every method and path (`app.use`). */
  readonly method: 'get' | 'post' | 'use';
  readonly path?: string;
  readonly route: Route;
  /**
   * The JSON body parser in front of the route: the adapter's `jsonBody` (default), the framework's usual library
   * (`express.json()`, `@koa/bodyparser`), or none.
   */
  readonly json?: false | { readonly limit?: number; readonly parser?: 'jsonBody' | 'library' };
}

/** An app to serve. */
export interface AppSpec {
  readonly routes: readonly RouteSpec[];
  /** Plain (not batched) GET routes, for the error handler's tests. */
  readonly plain?: ReadonlyArray<{ readonly path: string; readonly run: () => unknown }>;
  /** Adds `batchErrorHandler` with these options. */
  readonly errorHandler?: { readonly onError?: ServerErrorListener };
  /** Runs in a middleware just before every route (an async auth check, say), with the Node response. */
  readonly beforeRoute?: (res: ServerResponse) => Promise<void>;
  /** Applies core's `applyServerLimits` to the server (timeouts, `Expect: 100-continue`). */
  readonly limits?: ServerLimits;
}

/** A served app: its URL, and the errors the framework's own channel got (Koa's `error` event). */
export interface ServedApp {
  readonly url: string;
  readonly appErrors: unknown[];
}

export interface Driver {
  readonly name: 'Express' | 'Koa' | 'Fastify' | 'Hono';
  /**
   * Where errors go without `onError`: the console (Express's final handler and Hono's error handler log with
   * `console.error`) or the framework's own channel, collected in `appErrors` (Koa's `error` event, Fastify's logger).
   */
  readonly errorChannel: 'console' | 'app';
  /**
   * The body parsers `json.parser` may name: the adapter's `jsonBody`, and the framework's usual library where there
   * is one besides it (Fastify's JSON parsing is the plugin's, Hono has none).
   */
  readonly parsers: ReadonlyArray<'jsonBody' | 'library'>;
  /** The framework's `batchRoute`, untranslated, for the misuse tests. */
  readonly batchRoute: (options: never) => unknown;
  route<I, O>(options: NeutralRouteOptions<I, O>): Route<I, O>;
  serve(spec: AppSpec): Promise<ServedApp>;
}

const servers: TestServer[] = [];

/** Closes every server the drivers started (call it in `afterEach`). */
export async function closeServers(): Promise<void> {
  await Promise.all(servers.splice(0).map((server) => server.close()));
}

async function track(server: Promise<TestServer>, spec: AppSpec): Promise<TestServer> {
  const started = await server;
  servers.push(started);
  if (spec.limits !== undefined) applyServerLimits(started.server, spec.limits);
  return started;
}

const expressDriver: Driver = {
  name: 'Express',
  errorChannel: 'console',
  parsers: ['jsonBody', 'library'],
  batchRoute: expressAdapter.batchRoute as (options: never) => unknown,
  route<I, O>(options: NeutralRouteOptions<I, O>): Route<I, O> {
    const { input, output, callOptions, ...rest } = options;
    const middleware = expressAdapter.batchRoute<I, O>({
      // The suite also gives neither or both of `handler` and `batcher` on purpose (the run-time errors).
      ...(rest as expressAdapter.BatchRouteOptions<I, O>),
      input: input && ((req) => input(expressRequest(req))),
      output: output && ((result, req, res) => output(result, expressRequest(req), expressReply(res))),
      callOptions: callOptions && ((req) => callOptions(expressRequest(req))),
    });
    return { batcher: middleware.batcher, middleware };
  },
  async serve(spec: AppSpec): Promise<ServedApp> {
    const app = express();
    const before = spec.beforeRoute;
    const record = (_req: Request, res: Response, next: NextFunction): void => {
      if (before === undefined) next();
      else {
        before(res).then(
          () => process.nextTick(next),
          (error: unknown) => process.nextTick(next, error),
        );
      }
    };
    for (const { method, path, route, json } of spec.routes) {
      const limit = json === false || json?.limit === undefined ? {} : { limit: json.limit };
      const parser =
        json === false ? [] : [json?.parser === 'library' ? express.json(limit) : expressAdapter.jsonBody(limit)];
      const handlers = [...parser, record, route.middleware as express.RequestHandler];
      if (method === 'use') app.use(...handlers);
      else app[method](path ?? '/', ...handlers);
    }
    for (const { path, run } of spec.plain ?? []) app.get(path, () => run());
    if (spec.errorHandler !== undefined) app.use(expressAdapter.batchErrorHandler(spec.errorHandler));
    const server = await track(listen(app), spec);
    return { url: server.url, appErrors: [] };
  },
};

function expressRequest(req: Request): NeutralRequest {
  return {
    body: req.body,
    query: (name) => (typeof req.query[name] === 'string' ? req.query[name] : undefined),
    param: (name) => (req.params as Record<string, string | undefined>)[name],
    is: (type) => req.is(type) !== false && req.is(type) !== null,
    reject: (_status, message) => {
      throw new BatchError('UNSUPPORTED_MEDIA_TYPE', message);
    },
  };
}

function expressReply(res: Response): NeutralReply {
  return {
    text: (status, body) => void res.status(status).type('text/plain').send(body),
    json: (value) => void res.json(value),
  };
}

const koaDriver: Driver = {
  name: 'Koa',
  errorChannel: 'app',
  parsers: ['jsonBody', 'library'],
  batchRoute: koaAdapter.batchRoute as (options: never) => unknown,
  route<I, O>(options: NeutralRouteOptions<I, O>): Route<I, O> {
    const { input, output, callOptions, ...rest } = options;
    const middleware = koaAdapter.batchRoute<I, O, RouterContext>({
      // The suite also gives neither or both of `handler` and `batcher` on purpose (the run-time errors).
      ...(rest as koaAdapter.BatchRouteOptions<I, O, RouterContext>),
      input: input && ((ctx) => input(koaRequest(ctx))),
      output: output && ((result, ctx) => output(result, koaRequest(ctx), koaReply(ctx))),
      callOptions: callOptions && ((ctx) => callOptions(koaRequest(ctx))),
    });
    return { batcher: middleware.batcher, middleware };
  },
  async serve(spec: AppSpec): Promise<ServedApp> {
    const app = new Koa();
    const appErrors: unknown[] = [];
    // Collected rather than logged: Koa's default `error` listener prints to stderr.
    app.on('error', (error: unknown) => appErrors.push(error));
    if (spec.errorHandler !== undefined) app.use(koaAdapter.batchErrorHandler(spec.errorHandler));
    const before = spec.beforeRoute;
    const record = async (ctx: ParameterizedContext, next: Next): Promise<void> => {
      if (before !== undefined) await before(ctx.res);
      await next();
    };
    const router = new Router();
    for (const { method, path, route, json } of spec.routes) {
      const limit = json === false || json?.limit === undefined ? undefined : json.limit;
      const parser =
        json === false
          ? []
          : [
              json?.parser === 'library'
                ? bodyParser(limit === undefined ? {} : { jsonLimit: limit })
                : koaAdapter.jsonBody(limit === undefined ? {} : { limit }),
            ];
      const handlers = [...parser, record, route.middleware as Koa.Middleware];
      if (method === 'use') for (const handler of handlers) app.use(handler);
      else router[method](path ?? '/', ...(handlers as Parameters<Router['get']>[1][]));
    }
    for (const { path, run } of spec.plain ?? []) {
      router.get(path, () => {
        run();
      });
    }
    app.use(router.routes());
    const callback = app.callback();
    const server = await track(
      listen((req, res) => void callback(req, res)),
      spec,
    );
    return { url: server.url, appErrors };
  },
};

function koaRequest(ctx: ParameterizedContext): NeutralRequest {
  return {
    body: (ctx.request as { body?: unknown }).body,
    query: (name) => (typeof ctx.query[name] === 'string' ? ctx.query[name] : undefined),
    param: (name) => (ctx as Partial<RouterContext>).params?.[name],
    is: (type) => ctx.is(type) !== false && ctx.is(type) !== null,
    reject: (status, message) => ctx.throw(status, message),
  };
}

function koaReply(ctx: ParameterizedContext): NeutralReply {
  return {
    text: (status, body) => {
      ctx.status = status;
      ctx.body = body;
    },
    json: (value) => {
      ctx.body = value;
    },
  };
}

const fastifyDriver: Driver = {
  name: 'Fastify',
  errorChannel: 'app',
  parsers: ['jsonBody'],
  batchRoute: fastifyAdapter.batchRoute,
  route<I, O>(options: NeutralRouteOptions<I, O>): Route<I, O> {
    const { input, output, callOptions, ...rest } = options;
    const middleware = fastifyAdapter.batchRoute<I, O>({
      // The suite also gives neither or both of `handler` and `batcher` on purpose (the run-time errors).
      ...(rest as fastifyAdapter.BatchRouteOptions<I, O>),
      input: input && ((req) => input(fastifyRequest(req))),
      output: output && ((result, req, reply) => output(result, fastifyRequest(req), fastifyReply(reply))),
      callOptions: callOptions && ((req) => callOptions(fastifyRequest(req))),
    });
    return { batcher: middleware.batcher, middleware };
  },
  async serve(spec: AppSpec): Promise<ServedApp> {
    const appErrors: unknown[] = [];
    const app = Fastify({ serverFactory: (handler) => createServer(handler), loggerInstance: errorLogger(appErrors) });
    // Fastify's own channel for what the plugin reports without `onError` is the request's logger.
    await app.register(fastifyAdapter.microbatch, spec.errorHandler ?? {});
    const before = spec.beforeRoute;
    for (const { method, path, route, json } of spec.routes) {
      const bodyLimit = json === false || json?.limit === undefined ? {} : { bodyLimit: json.limit };
      const handler = route.middleware as (request: FastifyRequest, reply: FastifyReply) => void;
      const preHandler = async (_request: FastifyRequest, reply: FastifyReply): Promise<void> => {
        if (before !== undefined) await before(reply.raw);
      };
      const methods = method === 'use' ? ['GET', 'POST', 'PUT', 'DELETE', 'PATCH'] : [method.toUpperCase()];
      app.route({ method: methods, url: method === 'use' ? '/*' : (path ?? '/'), ...bodyLimit, preHandler, handler });
    }
    for (const { path, run } of spec.plain ?? []) app.get(path, async () => run());
    await app.listen({ port: 0, host: '127.0.0.1' });
    const server: TestServer = {
      url: `http://127.0.0.1:${(app.server.address() as { port: number }).port}`,
      server: app.server,
      close: async () => {
        app.server.closeAllConnections();
        await app.close();
      },
    };
    await track(Promise.resolve(server), spec);
    return { url: server.url, appErrors };
  },
};

/** A Fastify logger that keeps the errors logged at `error` level, and drops the rest. */
function errorLogger(errors: unknown[]): any {
  const logger = {
    level: 'error',
    error: (value: unknown) => errors.push((value as { err?: unknown } | null)?.err ?? value),
    fatal: (value: unknown) => errors.push(value),
    warn: () => undefined,
    info: () => undefined,
    debug: () => undefined,
    trace: () => undefined,
    silent: () => undefined,
    child: () => logger,
  };
  return logger;
}

function fastifyRequest(req: FastifyRequest): NeutralRequest {
  return {
    body: req.body,
    query: (name) => {
      const value = (req.query as Record<string, unknown>)[name];
      return typeof value === 'string' ? value : undefined;
    },
    param: (name) => (req.params as Record<string, string | undefined>)[name],
    is: (type) => (req.headers['content-type'] ?? '').split(';', 1)[0]?.trim().toLowerCase() === type,
    reject: (status, message) => {
      throw Object.assign(new Error(message), { statusCode: status });
    },
  };
}

function fastifyReply(reply: FastifyReply): NeutralReply {
  return {
    text: (status, body) => void reply.code(status).type('text/plain').send(body),
    json: (value) => void reply.send(value),
  };
}

/** The Node response under a Hono context served by `@hono/node-server`. */
function outgoing(c: Context): ServerResponse {
  return (c.env as { outgoing: ServerResponse }).outgoing;
}

const honoDriver: Driver = {
  name: 'Hono',
  errorChannel: 'console',
  parsers: ['jsonBody'],
  batchRoute: honoAdapter.batchRoute,
  route<I, O>(options: NeutralRouteOptions<I, O>): Route<I, O> {
    const { input, output, callOptions, ...rest } = options;
    const middleware = honoAdapter.batchRoute<I, O>({
      // The suite also gives neither or both of `handler` and `batcher` on purpose (the run-time errors).
      ...(rest as honoAdapter.BatchRouteOptions<I, O>),
      input: input && ((c) => input(honoRequest(c))),
      output:
        output &&
        ((result, c) => {
          let response: globalThis.Response | undefined;
          output(result, honoRequest(c), {
            text: (status, body) => (response = c.text(body, status as 200)),
            json: (value) => (response = c.json(value)),
          });
          return response ?? c.body(null);
        }),
      callOptions: callOptions && ((c) => callOptions(honoRequest(c))),
    });
    return { batcher: middleware.batcher, middleware };
  },
  async serve(spec: AppSpec): Promise<ServedApp> {
    const app = new Hono();
    const before = spec.beforeRoute;
    const record: MiddlewareHandler = async (c, next) => {
      if (before !== undefined) await before(outgoing(c));
      await next();
    };
    for (const { method, path, route, json } of spec.routes) {
      const limit = json === false || json?.limit === undefined ? {} : { limit: json.limit };
      const parser = json === false ? [] : [honoAdapter.jsonBody(limit)];
      const handlers = [...parser, record, route.middleware as MiddlewareHandler];
      // Hono's overloads type each handler position; a list of any length is typed here.
      const on = app.on.bind(app) as (method: string, path: string, ...chain: MiddlewareHandler[]) => unknown;
      if (method === 'use') on('ALL', '*', ...handlers);
      else on(method.toUpperCase(), path ?? '/', ...handlers);
    }
    for (const { path, run } of spec.plain ?? []) app.get(path, () => run() as globalThis.Response);
    if (spec.errorHandler !== undefined) app.onError(honoAdapter.batchErrorHandler(spec.errorHandler));
    const listener = getRequestListener(app.fetch);
    const server = await track(
      listen((req, res) => void listener(req, res)),
      spec,
    );
    return { url: server.url, appErrors: [] };
  },
};

function honoRequest(c: Context): NeutralRequest {
  return {
    body: c.var.jsonBody,
    query: (name) => c.req.query(name),
    param: (name) => c.req.param(name),
    is: (type) => (c.req.header('content-type') ?? '').split(';', 1)[0]?.trim().toLowerCase() === type,
    reject: (status, message) => {
      throw new HTTPException(status, { message });
    },
  };
}

/** Every driver, for `describe.each`. */
export const DRIVERS: readonly Driver[] = [expressDriver, koaDriver, fastifyDriver, honoDriver];
