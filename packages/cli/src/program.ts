import { Command, InvalidArgumentError, Option } from 'commander';

/**
 * The frameworks `microbatch serve` can run, each one an example app of this repository.
 *
 * @example
 * ```ts
 * FRAMEWORKS.includes('koa'); // true
 * ```
 */
export const FRAMEWORKS = ['express', 'koa', 'nest'] as const;

/**
 * The checked flags of `microbatch serve`.
 *
 * @example
 * ```ts
 * const flags: ServeFlags = { task: 'text-generation', model: 'models/tinystories-656k', framework: 'express', ... };
 * ```
 */
export interface ServeFlags {
  readonly task: 'text-generation';
  readonly model: string;
  readonly modelsDir: string;
  readonly maxBatchSize: number;
  readonly batchWaitMs: number;
  readonly port: number;
  readonly host: string;
  readonly framework: (typeof FRAMEWORKS)[number];
  readonly workers: number;
  readonly threads: number;
  readonly executionProvider: string;
}

function integer(min: number, max = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value) => {
    const parsed = Number(value);
    if (!/^\d+$/.test(value) || parsed < min || parsed > max) {
      throw new InvalidArgumentError(`Expected an integer from ${min}${max === Number.MAX_SAFE_INTEGER ? ' up' : ` to ${max}`}.`);
    }
    return parsed;
  };
}

function milliseconds(value: string): number {
  const parsed = Number(value);
  if (value.trim() === '' || !Number.isFinite(parsed) || parsed < 0) throw new InvalidArgumentError('Expected a number of ms >= 0.');
  return parsed;
}

/**
 * The `microbatch` command line: `serve` with its flags, checked by commander (a bad flag prints commander's error
 * and exits 1). `serve` is called with the parsed flags.
 *
 * @example
 * ```ts
 * await createProgram(async (flags) => console.log(flags)).parseAsync(['serve', '--model', 'models/x'], { from: 'user' });
 * ```
 */
export function createProgram(serve: (flags: ServeFlags) => Promise<void>): Command {
  const program = new Command('microbatch')
    .description('Serve batched models over HTTP.')
    .showHelpAfterError('(add --help for the flags)');
  program
    .command('serve')
    .description('Serve a local model with request batching: GET /?text=, OpenAI-compatible POST /v1/completions, /healthz, /readyz.')
    .addOption(new Option('--task <task>', 'what the model does').choices(['text-generation']).default('text-generation'))
    .requiredOption('--model <dir>', 'local model directory in transformers.js layout (or a hub id already under --models-dir)')
    .option('--models-dir <dir>', 'where hub ids are looked up', 'models')
    .option('--max-batch-size <n>', 'most requests per model call', integer(1), 8)
    .option('--batch-wait-ms <ms>', 'how long the first request of a batch waits for company', milliseconds, 5)
    .option('--port <n>', 'port to listen on (0: any free port)', integer(0, 65_535), 8000)
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .addOption(new Option('--framework <name>', 'which example app serves').choices(FRAMEWORKS).default('express'))
    .option('--workers <n>', 'worker threads, each with its own copy of the model', integer(1), 1)
    .option('--threads <n>', 'onnxruntime intra-op threads per worker', integer(1), 1)
    .option('--execution-provider <name>', 'onnxruntime execution provider', 'cpu')
    .action((flags: ServeFlags) => serve(flags));
  return program;
}
