// The `microbatch` executable's entry (run through bin/microbatch.js, which compiles TypeScript with tsx).
import { readFileSync } from 'node:fs';
import { createProgram } from './program.js';
import { serveCommand } from './serve-command.js';
import { workerCommand } from './worker-command.js';

// src/ and dist/ are both one level below the package's root.
const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
};
const fail = (message: string): never => {
  console.error(`error: ${message}`);
  process.exit(1);
};
await createProgram(
  (flags) => serveCommand(flags, fail),
  (flags) => workerCommand(flags, fail),
  { version },
).parseAsync(process.argv);
