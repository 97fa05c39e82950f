// The Ray Serve batching tutorial's vectorized adder: `GET /adder?number=N` answers N + 1, and concurrent requests
// are added in one vectorized call. Like `@serve.batch(max_batch_size=4)` with Ray's default wait of 0: the first
// request runs alone at once, and those arriving while it computes gather into batches of 4.
import { setTimeout as sleep } from 'node:timers/promises';
import express from 'express';
import { BatchError, createBatcher } from '@microbatch/core';
import type { Batcher } from '@microbatch/core';
import { batchErrorHandler, batchRoute } from '@microbatch/express';
import { createHealth, toNodeHandler } from '@microbatch/prometheus';
import { type ListenOptions, type LogLine, type RunningServer, logBatches, startServer } from '@microbatch/serving';

/** Options of {@link createAdder}. */
export interface AdderOptions {
  /** Simulated compute time per batch, in ms (the tutorial's "this could be CPU intensive computation"). */
  readonly computeMs?: number;
  /** Where the one-line-per-batch log goes; `false` turns it off. */
  readonly log?: LogLine | false;
}

/** The batched adder: call it with ONE number, get ONE number back; concurrent calls share one vectorized add. */
export function createAdder({ computeMs = 50, log = console.log }: AdderOptions = {}): Batcher<number, number> {
  const adder = createBatcher(
    async (numbers: number[]) => {
      const input = Float64Array.from(numbers); // the tutorial's np.array(numbers)
      await sleep(computeMs);
      return Array.from(input.map((n) => n + 1));
    },
    { name: 'adder', maxBatchSize: 4, batchWaitTimeoutMs: 0 },
  );
  if (log !== false) logBatches(adder, log);
  return adder;
}

/** The adder's routes: `GET /adder?number=N` and the health probes. */
export function createApp(adder: Batcher<number, number>): express.Express {
  const app = express();
  app.get(
    '/adder',
    batchRoute({
      batcher: adder,
      input: (req) => {
        const number = Number(req.query.number);
        if (typeof req.query.number !== 'string' || !Number.isSafeInteger(number)) {
          throw new BatchError('INVALID_INPUT', 'Query parameter `number` must be an integer', {
            details: { field: 'number' },
          });
        }
        return number;
      },
      output: (result, _req, res) => res.type('text/plain').send(String(result)),
    }),
  );
  const health = createHealth({ batchers: [adder] });
  app.get('/healthz', toNodeHandler(health.liveness));
  app.get('/readyz', toNodeHandler(health.readiness));
  app.use(batchErrorHandler());
  return app;
}

/** Listens; the shutdown lets queued and running additions finish. */
export function start(where: ListenOptions, options?: AdderOptions): Promise<RunningServer> {
  const adder = createAdder(options);
  return startServer(createApp(adder), where, { drain: () => adder.close() });
}
