// One server of `pnpm bench:adapters`: `POST /add` answering `{"result": n + 1}` for `{"number": n}`, either with a
// plain route handler or through `batchRoute` with an instant batch handler, on Express, Koa, Fastify or Hono. Both
// variants of a framework read the body with the same parser, so the difference is `batchRoute` alone. It prints one JSON
// line `{"port": N}` once listening; the driver (bench/adapters.bench.ts) sends the load from its own process.
import { type RequestListener, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import { bodyParser } from '@koa/bodyparser';
import { Router } from '@koa/router';
import { batchRoute as expressBatchRoute } from '@microbatch/express';
import { batchRoute as fastifyBatchRoute, microbatch } from '@microbatch/fastify';
import { batchRoute as honoBatchRoute, jsonBody as honoJsonBody } from '@microbatch/hono';
import { batchRoute as koaBatchRoute } from '@microbatch/koa';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';

const VARIANTS = [
  'express-plain',
  'express-batched',
  'koa-plain',
  'koa-batched',
  'fastify-plain',
  'fastify-batched',
  'hono-plain',
  'hono-batched',
] as const;
type Variant = (typeof VARIANTS)[number];

const variant = process.argv[2] as Variant;
const add = async (numbers: number[]): Promise<number[]> => numbers.map((n) => n + 1);

function numberOf(body: unknown): number {
  const value = (body as { number?: unknown } | undefined)?.number;
  if (!Number.isInteger(value)) throw new TypeError('`number` must be an integer');
  return value as number;
}

function expressApp(batched: boolean): express.Express {
  const app = express();
  app.disable('x-powered-by');
  if (batched) {
    app.post(
      '/add',
      express.json(),
      expressBatchRoute({
        input: (req) => numberOf(req.body),
        output: (result, _req, res) => res.json({ result }),
        handler: add,
      }),
    );
  } else {
    app.post('/add', express.json(), (req, res) => {
      void add([numberOf(req.body)]).then(([result]) => res.json({ result }));
    });
  }
  return app;
}

function koaApp(batched: boolean) {
  const router = new Router();
  if (batched) {
    router.post(
      '/add',
      koaBatchRoute({
        input: (ctx) => numberOf(ctx.request.body),
        output: (result, ctx) => {
          ctx.body = { result };
        },
        handler: add,
      }),
    );
  } else {
    router.post('/add', async (ctx) => {
      const [result] = await add([numberOf(ctx.request.body)]);
      ctx.body = { result };
    });
  }
  return new Koa().use(bodyParser()).use(router.routes());
}

/** Fastify's routing as a Node listener, so every variant is served by the same plain Node server. */
async function fastifyListener(batched: boolean): Promise<RequestListener> {
  let handler: RequestListener | undefined;
  const app = Fastify({
    serverFactory: (fastifyHandler) => {
      handler = fastifyHandler;
      return createServer();
    },
  });
  await app.register(microbatch);
  if (batched) {
    app.post(
      '/add',
      fastifyBatchRoute({
        input: (request) => numberOf(request.body),
        output: (result, _request, reply) => reply.send({ result }),
        handler: add,
      }),
    );
  } else {
    app.post('/add', async (request) => {
      const [result] = await add([numberOf(request.body)]);
      return { result };
    });
  }
  await app.ready();
  return handler as RequestListener;
}

function honoListener(batched: boolean): RequestListener {
  const app = new Hono();
  if (batched) {
    app.post(
      '/add',
      honoJsonBody(),
      honoBatchRoute({
        input: (c) => numberOf(c.var.jsonBody),
        output: (result, c) => c.json({ result }),
        handler: add,
      }),
    );
  } else {
    app.post('/add', honoJsonBody(), async (c) => {
      const [result] = await add([numberOf(c.var.jsonBody)]);
      return c.json({ result });
    });
  }
  const listener = getRequestListener(app.fetch);
  return (req, res) => void listener(req, res);
}

async function listenerFor(name: Variant): Promise<RequestListener> {
  const [framework, kind] = name.split('-') as [string, string];
  const batched = kind === 'batched';
  if (framework === 'express') return expressApp(batched);
  if (framework === 'koa') {
    const callback = koaApp(batched).callback();
    return (req, res) => void callback(req, res);
  }
  if (framework === 'fastify') return fastifyListener(batched);
  return honoListener(batched);
}

if (!(VARIANTS as readonly string[]).includes(variant)) {
  throw new TypeError(`Expected a variant (${VARIANTS.join(', ')}), got ${String(variant)}`);
}
const server = createServer(await listenerFor(variant)).listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ port: (server.address() as AddressInfo).port }));
});
process.once('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
});
