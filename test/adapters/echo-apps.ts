// One small batched echo app per framework (Express, Koa, Fastify, Hono, Nest on Express), each reading bodies with its adapter's
// `jsonBody` and answering errors in the project's shape, for the issue-16 tests through real servers.
import 'reflect-metadata';
import { type RequestListener, type Server, type ServerOptions, createServer } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import * as expressAdapter from '@microbatch/express';
import * as fastifyAdapter from '@microbatch/fastify';
import * as honoAdapter from '@microbatch/hono';
import * as koaAdapter from '@microbatch/koa';
import { Batch, BatchModule, jsonBody as nestJsonBody } from '@microbatch/nest';
import { type TestServer, listen } from '@microbatch/test-kit';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import { Test } from '@nestjs/testing';
import { Router } from '@koa/router';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';

export interface Echo {
  readonly url: string;
  readonly server: Server;
  /** The bodies the route received, in order. */
  readonly bodies: unknown[];
  close(): Promise<void>;
}

/** Starts an echo app; `options` are Node's server options (core's `serverOptions()` for the timeouts). */
export type StartEcho = (options?: ServerOptions) => Promise<Echo>;

async function expressEcho(options: ServerOptions = {}): Promise<Echo> {
  const bodies: unknown[] = [];
  const app = express();
  app.post(
    '/echo',
    expressAdapter.jsonBody(),
    expressAdapter.batchRoute({
      handler: async (inputs: unknown[]) => (bodies.push(...inputs), inputs.map(() => 'ok')),
      onError: () => undefined,
    }),
  );
  app.use(expressAdapter.batchErrorHandler({ onError: () => undefined }));
  return fromTestServer(await listen(app, options), bodies);
}

async function koaEcho(options: ServerOptions = {}): Promise<Echo> {
  const bodies: unknown[] = [];
  const app = new Koa();
  const router = new Router();
  router.post(
    '/echo',
    koaAdapter.jsonBody(),
    koaAdapter.batchRoute({
      handler: async (inputs: unknown[]) => (bodies.push(...inputs), inputs.map(() => 'ok')),
      onError: () => undefined,
    }),
  );
  app.use(koaAdapter.batchErrorHandler({ onError: () => undefined })).use(router.routes());
  const callback = app.callback();
  return fromTestServer(await listen((req, res) => void callback(req, res), options), bodies);
}

async function fastifyEcho(options: ServerOptions = {}): Promise<Echo> {
  const bodies: unknown[] = [];
  let handler: RequestListener | undefined;
  // Served by a server of our own, so that exactly the given Node server options apply (Fastify sets its own).
  const app = Fastify({
    bodyLimit: fastifyAdapter.JSON_BODY_LIMIT,
    serverFactory: (fastifyHandler) => {
      handler = fastifyHandler;
      return createServer();
    },
  });
  await app.register(fastifyAdapter.microbatch, { onError: () => undefined });
  app.post(
    '/echo',
    fastifyAdapter.batchRoute({
      handler: async (inputs: unknown[]) => (bodies.push(...inputs), inputs.map(() => 'ok')),
      onError: () => undefined,
    }),
  );
  await app.ready();
  const route = handler as RequestListener;
  const server = await listen((req, res) => route(req, res), options);
  return {
    url: server.url,
    server: server.server,
    bodies,
    close: async () => {
      await server.close();
      await app.close();
    },
  };
}

async function honoEcho(options: ServerOptions = {}): Promise<Echo> {
  const bodies: unknown[] = [];
  const app = new Hono();
  app.post(
    '/echo',
    honoAdapter.jsonBody(),
    honoAdapter.batchRoute({
      handler: async (inputs: unknown[]) => (bodies.push(...inputs), inputs.map(() => 'ok')),
      onError: () => undefined,
    }),
  );
  app.onError(honoAdapter.batchErrorHandler({ onError: () => undefined }));
  const listener = getRequestListener(app.fetch);
  return fromTestServer(await listen((req, res) => void listener(req, res), options), bodies);
}

async function nestEcho(options: ServerOptions = {}): Promise<Echo> {
  const bodies: unknown[] = [];
  @Controller()
  class EchoController {
    @Post('echo')
    @Batch()
    echo(@Body() received: unknown[]): string[] {
      bodies.push(...received);
      return received.map(() => 'ok');
    }
  }
  @Module({ imports: [BatchModule.forRoot({ onError: () => undefined })], controllers: [EchoController] })
  class AppModule {}
  const testing = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app = testing.createNestApplication(new ExpressAdapter(), { logger: false, bodyParser: false });
  app.use(nestJsonBody());
  await app.init();
  // Served by a server of our own, as @microbatch/serving does, so that Node's server options apply.
  const server = await listen(app.getHttpAdapter().getInstance() as RequestListener, options);
  return {
    url: server.url,
    server: server.server,
    bodies,
    close: async () => {
      await server.close();
      await app.close();
    },
  };
}

function fromTestServer(test: TestServer, bodies: unknown[]): Echo {
  return { url: test.url, server: test.server, bodies, close: test.close };
}

/** Every framework's echo app, for `describe.each`. */
export const FRAMEWORKS: ReadonlyArray<readonly [name: string, start: StartEcho]> = [
  ['Express', expressEcho],
  ['Koa', koaEcho],
  ['Fastify', fastifyEcho],
  ['Hono', honoEcho],
  ['Nest', nestEcho],
];
