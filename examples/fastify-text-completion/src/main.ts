// `pnpm --filter fastify-text-completion start`. PORT (8000), HOST (127.0.0.1) and MODEL_DIR (the bundled model) from
// the environment; SIGTERM / Ctrl-C drain the requests in flight and exit 0. MAX_LATENCY_MS (default 1500): refuse
// at once (503 OVERLOADED) what is predicted to take longer.
import { serveUntilSignal } from '@microbatch/cli';
import { bundledModelDir, listenOptionsFromEnv } from '@microbatch/serving';
import { start } from './app.js';

const model = process.env.MODEL_DIR ?? bundledModelDir();
await serveUntilSignal(
  (where) => start({ ...where, model, maxLatencyMs: Number(process.env.MAX_LATENCY_MS ?? 1_500) }),
  listenOptionsFromEnv(),
);
