// `pnpm --filter model-composition start`, then `curl "http://127.0.0.1:8000/compose?text=Once+upon+a+time"`.
// PORT, HOST and MODEL_DIR from the environment; SIGTERM / Ctrl-C drain both models and exit 0.
import { serveUntilSignal } from '@microbatch/cli';
import { bundledModelDir, listenOptionsFromEnv } from '@microbatch/serving';
import { start } from './app.js';

await serveUntilSignal(
  (where) => start({ ...where, model: process.env.MODEL_DIR ?? bundledModelDir() }),
  listenOptionsFromEnv(),
);
