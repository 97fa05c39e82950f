// `pnpm --filter batch-adder start` (PORT 8000, HOST 127.0.0.1), then `pnpm --filter batch-adder query`.
// SIGTERM / Ctrl-C finish the additions in flight and exit 0.
import { serveUntilSignal } from '@microbatch/cli';
import { listenOptionsFromEnv } from '@microbatch/serving';
import { start } from './app.js';

// ADDER_COMPUTE_MS sets the simulated compute time per batch (default 50 ms).
const computeMs = process.env.ADDER_COMPUTE_MS === undefined ? undefined : Number(process.env.ADDER_COMPUTE_MS);
await serveUntilSignal((where) => start(where, { computeMs }), listenOptionsFromEnv());
