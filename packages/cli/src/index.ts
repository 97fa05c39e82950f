export { exitOnSignals, serveUntilSignal } from './lifecycle.js';
export type { ExitOnSignalsOptions } from './lifecycle.js';
export { resolveModelDir } from './model-dir.js';
export type { ModelDirOptions } from './model-dir.js';
export { FRAMEWORKS, createProgram } from './program.js';
export type { ProgramOptions, ServeFlags, WorkerFlags } from './program.js';
export { serveCommand } from './serve-command.js';
