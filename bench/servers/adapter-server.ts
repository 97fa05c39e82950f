// One server of `pnpm bench:adapters`: `POST /add` answering `{"result": n + 1}` for `{"number": n}`, either with a
// plain route handler or through `batchRoute` with an instant batch handler, on Express or Koa. It prints one JSON
// line `{"port": N}` once listening; the driver (bench/adapters.bench.ts) sends the load from its own process.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { bodyParser } from '@koa/bodyparser';
import { Router } from '@koa/router';
import { batchRoute as expressBatchRoute } from '@microbatch/express';
import { batchRoute as koaBatchRoute } from '@microbatch/koa';
import express from 'express';
import Koa from 'koa';

type Variant = 'express-plain' | 'express-batched' | 'koa-plain' | 'koa-batched';

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

const listener =
  variant === 'express-plain' || variant === 'express-batched'
    ? expressApp(variant === 'express-batched')
    : variant === 'koa-plain' || variant === 'koa-batched'
      ? koaApp(variant === 'koa-batched').callback()
      : undefined;
if (listener === undefined)
  throw new TypeError(
    `Expected a variant (express-plain, express-batched, koa-plain, koa-batched), got ${String(variant)}`,
  );

const server = createServer(listener).listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ port: (server.address() as AddressInfo).port }));
});
process.once('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
});
