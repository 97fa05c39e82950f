// A purpose-built server for the reliability suite (run as a child process: `node --import tsx <this file>`): the
// real bundled model in a worker pool whose worker misbehaves on marked prompts (createWorkerPoolForTesting), behind
// `batchRoute`, with `executionTimeoutMs` and `onBatchError: 'isolate'`, plus a test-only `GET /__stats` that
// reports the queue, the pool and the process's handles and listeners. It prints `listening on URL`, then
// `ready: URL` once the model is loaded, or `load failed: ...` on stderr and stays up, answering 503.
//
// The batchers run on an `OffsetClock`: real time, which a test can jump forward (`POST /__clock`). A test gives
// `executionTimeoutMs` a value no run reaches on real time (an hour) and jumps there once the batch it wants timed
// out runs: the limit passes exactly then, and never for a batch that merely waits for a worker being replaced,
// however slow the machine. Batch windows (`batchWaitTimeoutMs`) stay on real time.
//
// Prompt markers: `__exit__` makes the worker `process.exit`, `__throw__` throws an uncaught exception in it,
// `__hang__` busy-loops it forever, `__poison__` makes the batch handler throw on the main thread.
//
// Routes (bodies as `POST /v1/completions` bodies of one prompt: `{ prompt, max_tokens?, temperature?, ... }`):
//   POST /generate        onBatchError 'isolate': a throwing batch is re-run by halves, only the poison fails
//   POST /generate-plain  onBatchError 'fail-batch' (the default): a throwing batch fails every item
//   POST /stream          the same model, streamed as Server-Sent Events
//   GET /healthz, /readyz createHealth from @microbatch/prometheus
//   GET /__stats          test-only counters (never mount anything like it in production)
//   POST /__clock         test-only: `{ "advance": ms }` jumps the batchers' clock forward, answers `{ "fired" }`
//
// Environment: PORT (0), HOST (127.0.0.1), MODEL_DIR (the bundled model), EXECUTION_TIMEOUT_MS (4000),
// MAX_QUEUE_SIZE (256), MAX_BATCH_SIZE (8), BATCH_WAIT_MS (50), START_TIMEOUT_MS (30000), SCHEDULING (the runner's
// default: continuous).
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import express from 'express';
import { type BatchContext, createBatcher, createStreamingBatcher } from '@microbatch/core';
import { batchErrorHandler, batchRoute } from '@microbatch/express';
import { createTextGenerationParser, textGenerationBatchKey } from '@microbatch/inference';
import type { TextGenerationInput, TextGenerationOutput } from '@microbatch/inference';
import { createHealth, toNodeHandler } from '@microbatch/prometheus';
import { OffsetClock } from '@microbatch/test-kit';
import { createWorkerPoolForTesting } from '../../packages/inference/src/testing.js';
import { MARKERS } from './helpers/markers.js';

function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0)
    throw new TypeError(`Expected ${name} to be a number >= 0, got ${JSON.stringify(raw)}`);
  return value;
}

const modelDir = process.env.MODEL_DIR ?? fileURLToPath(new URL('../../models/tinystories-656k', import.meta.url));
const executionTimeoutMs = envNumber('EXECUTION_TIMEOUT_MS', 4_000);
const maxQueueSize = envNumber('MAX_QUEUE_SIZE', 256);
const maxBatchSize = envNumber('MAX_BATCH_SIZE', 8);
const batchWaitTimeoutMs = envNumber('BATCH_WAIT_MS', 50);
const startTimeoutMs = envNumber('START_TIMEOUT_MS', 30_000);

const scheduling =
  process.env.SCHEDULING === 'request' || process.env.SCHEDULING === 'continuous' ? process.env.SCHEDULING : undefined;
const pool = createWorkerPoolForTesting(
  {
    runner: { task: 'text-generation', model: modelDir, ...(scheduling === undefined ? {} : { scheduling }) },
    size: 1,
    startTimeoutMs,
    name: 'fault-pool',
  },
  { exitOn: MARKERS.exit, throwOn: MARKERS.throw, hangOn: MARKERS.hang },
);

/** Sizes of the handler calls of each route, newest last (the last 200), to see isolation re-run by halves. */
const calls: Record<string, number[]> = { generate: [], 'generate-plain': [] };
function recordCall(route: string, size: number): void {
  const list = calls[route] as number[];
  list.push(size);
  if (list.length > 200) list.shift();
}

function handlerFor(route: string) {
  return (inputs: TextGenerationInput[], context: BatchContext): Promise<Array<TextGenerationOutput | Error>> => {
    recordCall(route, inputs.length);
    if (inputs.some((input) => input.prompt.includes(MARKERS.poison))) {
      return Promise.reject(new Error(`poison in batch ${context.batchId}`));
    }
    return pool.run(inputs, { signal: context.signal });
  };
}

/** The batchers' clock: real time plus the jumps a test makes through `POST /__clock`. */
const clock = new OffsetClock();
const common = {
  clock,
  maxBatchSize,
  batchWaitTimeoutMs,
  maxQueueSize,
  executionTimeoutMs,
  maxConcurrentBatches: pool.size,
  batchKey: textGenerationBatchKey,
};
const isolating = createBatcher(handlerFor('generate'), { ...common, name: 'generate', onBatchError: 'isolate' });
const plain = createBatcher(handlerFor('generate-plain'), { ...common, name: 'generate-plain' });
const streaming = createStreamingBatcher(pool.streamingHandler, { ...common, name: 'stream' });
const batchers = [isolating, plain, streaming] as const;

const parse = createTextGenerationParser();
/** Requests per route whose body was valid, so their item was handed to the batcher. */
const enqueued: Record<string, number> = { generate: 0, 'generate-plain': 0, stream: 0 };
const inputFor =
  (route: string) =>
  (req: express.Request): TextGenerationInput => {
    const item = parse(req.body);
    enqueued[route] = (enqueued[route] ?? 0) + 1;
    return item;
  };

/** Requests in progress (their response has not closed), and what became of the finished ones. */
const open = new Set<ServerResponse>();
const counts = { requests: 0, finished: 0, closedEarly: 0 };
const sockets = new Set<Socket>();

const app = express();
app.use((req, res, next) => {
  // The test-only routes are not the traffic under test.
  if (!req.path.startsWith('/__')) {
    counts.requests += 1;
    open.add(res);
    res.once('close', () => {
      open.delete(res);
      if (res.writableFinished) counts.finished += 1;
      else counts.closedEarly += 1;
    });
  }
  next();
});
/**
 * The errors answered with 500 (a poison batch's own error), by message: counted for /__stats rather than printed,
 * so that stderr stays for what nobody expected (a crash, a warning).
 */
const serverErrors: Record<string, number> = {};
const onError = (error: unknown): void => {
  const message = error instanceof Error ? error.message : String(error);
  serverErrors[message] = (serverErrors[message] ?? 0) + 1;
};
app.post(
  '/generate',
  express.json({ limit: '64kb' }),
  batchRoute({ batcher: isolating, input: inputFor('generate'), onError }),
);
app.post(
  '/generate-plain',
  express.json({ limit: '64kb' }),
  batchRoute({ batcher: plain, input: inputFor('generate-plain'), onError }),
);
app.post(
  '/stream',
  express.json({ limit: '64kb' }),
  batchRoute({ batcher: streaming, input: inputFor('stream'), onError }),
);
const health = createHealth({ batchers, ready: () => pool.isReady });
app.get('/healthz', toNodeHandler(health.liveness));
app.get('/readyz', toNodeHandler(health.readiness));
app.get('/__stats', (_req, res) => {
  void stats().then((body) => res.set('Cache-Control', 'no-store').json(body));
});
app.post('/__clock', express.json(), (req, res) => {
  const advance = (req.body as { advance?: unknown } | undefined)?.advance;
  if (typeof advance !== 'number' || !Number.isFinite(advance) || advance < 0) {
    res.status(400).json({ error: { code: 'INVALID_INPUT', message: 'Expected a body { "advance": ms >= 0 }' } });
    return;
  }
  res.set('Cache-Control', 'no-store').json({ fired: clock.advance(advance) });
});
app.use(batchErrorHandler());

const server = createServer(app as (req: IncomingMessage, res: ServerResponse) => void);
server.on('connection', (socket: Socket) => {
  sockets.add(socket);
  socket.once('close', () => sockets.delete(socket));
});

function tally(names: readonly string[]): Record<string, number> {
  const result: Record<string, number> = {};
  for (const name of names) result[name] = (result[name] ?? 0) + 1;
  return result;
}

function sum(values: Iterable<number>): number {
  let total = 0;
  for (const value of values) total += value;
  return total;
}

async function stats() {
  const connections = await new Promise<number>((resolve) => server.getConnections((_error, count) => resolve(count)));
  const responses = [...open];
  const socketList = [...sockets];
  return {
    pid: process.pid,
    batchers: Object.fromEntries(
      batchers.map((batcher) => {
        const { rejected, succeeded, failed, cancelled, expired, batchesProcessed, itemsProcessed } = batcher.stats();
        const summary = { succeeded, failed, cancelled, expired, batchesProcessed, itemsProcessed, rejected };
        return [
          batcher.name,
          { queueLength: batcher.queueLength, inFlightBatches: batcher.inFlightBatches, ...summary },
        ];
      }),
    ),
    pool: { ...pool.stats(), isReady: pool.isReady },
    calls,
    enqueued,
    serverErrors,
    requests: { ...counts, open: responses.length },
    connections,
    listeners: {
      // Summed over the responses still open and the sockets still connected: both 0 once every client is gone.
      openResponses: sum(responses.flatMap((res) => res.eventNames().map((name) => res.listenerCount(name)))),
      openSockets: sum(socketList.flatMap((socket) => socket.eventNames().map((name) => socket.listenerCount(name)))),
      server: sum(server.eventNames().map((name) => server.listenerCount(name))),
      process: sum(process.eventNames().map((name) => process.listenerCount(name))),
    },
    resources: tally(process.getActiveResourcesInfo()),
    memory: process.memoryUsage(),
  };
}

server.listen(envNumber('PORT', 0), process.env.HOST ?? '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  const url = `http://${process.env.HOST ?? '127.0.0.1'}:${port}`;
  console.log(`listening on ${url}`);
  pool.ready.then(
    () => console.log(`ready: ${url}`),
    (error: unknown) => console.error(`load failed: ${error instanceof Error ? error.message : String(error)}`),
  );
});

let stopping = false;
process.on('SIGTERM', () => {
  if (stopping) return;
  stopping = true;
  server.close();
  server.closeIdleConnections();
  void Promise.all(batchers.map((batcher) => batcher.close({ force: true })))
    .then(() => pool.close())
    .then(
      () => process.exit(0),
      () => process.exit(1),
    );
});
