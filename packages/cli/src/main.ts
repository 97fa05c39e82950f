// The `microbatch` executable's entry (run through bin/microbatch.js, which compiles TypeScript with tsx).
import { createProgram } from './program.js';
import { serveCommand } from './serve-command.js';
import { workerCommand } from './worker-command.js';

const fail = (message: string): never => {
  console.error(`error: ${message}`);
  process.exit(1);
};
await createProgram(
  (flags) => serveCommand(flags, fail),
  (flags) => workerCommand(flags, fail),
).parseAsync(process.argv);
