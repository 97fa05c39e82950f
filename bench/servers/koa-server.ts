// Bench server on Koa: POST <workload path> batched with @microbatch/koa over the worker pool.
// Configured by the driver through the environment (see bench-app.ts); prints one ready line with its port.
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { bodyParser } from '@koa/bodyparser';
import { Router } from '@koa/router';
import { batchErrorHandler, batchRoute } from '@microbatch/koa';
import { SNAPSHOT_PATH, announce, closeOnSignal, snapshot, startModel } from './bench-app.js';

const model = await startModel();
const { workload } = model.config;
const route = batchRoute({
  input: (ctx) => workload.parse(ctx.request.body),
  handler: model.handler,
  output: (result, ctx) => {
    ctx.body = workload.respond(result);
  },
  ...model.options,
});

const router = new Router();
router.post(workload.path, route);
router.post(SNAPSHOT_PATH, (ctx) => {
  ctx.body = snapshot(model, route.batcher);
});
const app = new Koa().use(batchErrorHandler()).use(bodyParser()).use(router.routes());

const server = app.listen(0, '127.0.0.1', () => announce((server.address() as AddressInfo).port));
closeOnSignal(async () => {
  server.close();
  server.closeAllConnections();
  await route.batcher.close({ force: true });
  await model.pool.close();
});
