// `pnpm start` (root) or `pnpm --filter express-text-completion start`. PORT (8000), HOST (127.0.0.1) and MODEL_DIR
// (the bundled model) from the environment; SIGTERM / Ctrl-C drain the requests in flight and exit 0.
import { bundledModelDir, listenOptionsFromEnv, serveUntilSignal } from '@microbatch/serving';
import { start } from './app.js';

const model = process.env.MODEL_DIR ?? bundledModelDir();
await serveUntilSignal((where) => start({ ...where, model, maxBatchSize: 8, batchWaitTimeoutMs: 5 }), listenOptionsFromEnv());
