// `pnpm start` (root) or `pnpm --filter express-text-completion start`. PORT (8000), HOST (127.0.0.1) and MODEL_DIR
// (the bundled model) from the environment; SIGTERM / Ctrl-C drain the requests in flight and exit 0.
// Work-conserving batching (a batch goes as soon as the model is free); a request predicted to take longer than
// MAX_LATENCY_MS (default 1500) is refused at once with 503 OVERLOADED + Retry-After instead of queueing.
import { serveUntilSignal } from '@microbatch/cli';
import { bundledModelDir, listenOptionsFromEnv } from '@microbatch/serving';
import { start } from './app.js';

const model = process.env.MODEL_DIR ?? bundledModelDir();
const maxLatencyMs = Number(process.env.MAX_LATENCY_MS ?? 1_500);
await serveUntilSignal((where) => start({ ...where, model, maxSequences: 8, maxLatencyMs }), listenOptionsFromEnv());
