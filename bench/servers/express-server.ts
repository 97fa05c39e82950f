// Bench server on Express: POST <workload path> batched with @microbatch/express over the worker pool.
// Configured by the driver through the environment (see bench-app.ts); prints one ready line with its port.
import type { AddressInfo } from 'node:net';
import express from 'express';
import { batchErrorHandler, batchRoute } from '@microbatch/express';
import { SNAPSHOT_PATH, announce, closeOnSignal, snapshot, startModel } from './bench-app.js';

const model = await startModel();
const { workload } = model.config;
const route = batchRoute({
  input: (req) => workload.parse(req.body),
  handler: model.handler,
  output: (result, _req, res) => res.json(workload.respond(result)),
  ...model.options,
});

const app = express();
app.post(workload.path, express.json(), route);
app.post(SNAPSHOT_PATH, (_req, res) => {
  res.json(snapshot(model, route.batcher));
});
app.use(batchErrorHandler());

const server = app.listen(0, '127.0.0.1', () => announce((server.address() as AddressInfo).port));
closeOnSignal(async () => {
  server.close();
  server.closeAllConnections();
  await route.batcher.close({ force: true });
  await model.pool.close();
});
