import { Command, InvalidArgumentError, Option } from 'commander';
import { LOG_FORMATS } from './logger.js';

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
 * How requests share the model: `continuous` (join the running decode loop step by step) or `request` (one batch,
 * one generate call).
 *
 * @example
 * ```ts
 * SCHEDULINGS[0]; // 'continuous'
 * ```
 */
export const SCHEDULINGS = ['continuous', 'request'] as const;

/**
 * What `microbatch serve` can serve: text generation (`/v1/completions`, `/v1/chat/completions`) or embeddings
 * (`/v1/embeddings`).
 *
 * @example
 * ```ts
 * TASKS[1]; // 'feature-extraction'
 * ```
 */
export const TASKS = ['text-generation', 'feature-extraction'] as const;

/** Flags that mean something for one task only: given for the other, they are refused rather than ignored. */
const TASK_FLAGS: Readonly<Record<(typeof TASKS)[number], readonly string[]>> = {
  'text-generation': ['maxBatchCost', 'pooling', 'normalize', 'truncatableDimensions'],
  'feature-extraction': ['scheduling', 'queue'],
};

/** The flag a camel-cased option key is spelled as on the command line. */
const flagName = (key: string) => `--${key.replaceAll(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`;

/**
 * The checked flags of `microbatch serve`.
 *
 * @example
 * ```ts
 * const flags: ServeFlags = { task: 'text-generation', model: 'models/tinystories-656k', framework: 'express', ... };
 * ```
 */
export interface ServeFlags {
  readonly task: (typeof TASKS)[number];
  readonly model: string;
  readonly modelsDir: string;
  readonly maxBatchSize: number;
  readonly batchWaitMs: number;
  /** Refuse (503 `OVERLOADED`) what is predicted to take longer than this; absent: no limit. */
  readonly maxLatencyMs?: number;
  /** The most requests waiting (with `queue`: queued or running across every replica); then 503 `QUEUE_FULL`. */
  readonly maxQueueSize: number;
  readonly port: number;
  readonly host: string;
  readonly framework: (typeof FRAMEWORKS)[number];
  readonly workers: number;
  readonly threads: number;
  readonly executionProvider: string;
  readonly scheduling: (typeof SCHEDULINGS)[number];
  readonly logFormat: (typeof LOG_FORMATS)[number];
  /** `redis://host:port`: serve as a web replica of workers behind this queue, with no local model. */
  readonly queue?: string;
  /** feature-extraction: the most tokens one model call holds. */
  readonly maxBatchCost?: number;
  /** feature-extraction: how token vectors are pooled (default: the folder's `1_Pooling/config.json`, else mean). */
  readonly pooling?: 'mean' | 'cls' | 'last_token';
  /** feature-extraction: L2-normalise embeddings (default: the folder's `modules.json`, else on). */
  readonly normalize?: 'on' | 'off';
  /** feature-extraction: the model allows shorter `dimensions`. */
  readonly truncatableDimensions?: boolean;
}

/**
 * The checked flags of `microbatch worker`.
 *
 * @example
 * ```ts
 * const flags: WorkerFlags = { queue: 'redis://127.0.0.1:6379', model: 'models/tinystories-656k', maxBatchSize: 16, ... };
 * ```
 */
export interface WorkerFlags {
  readonly queue: string;
  readonly model: string;
  readonly modelsDir: string;
  readonly maxBatchSize: number;
  readonly batchWaitMs: number;
  readonly workers: number;
  readonly threads: number;
  readonly executionProvider: string;
  readonly scheduling: (typeof SCHEDULINGS)[number];
  readonly logFormat: (typeof LOG_FORMATS)[number];
  readonly claimIdleMs: number;
  readonly maxDeliveries: number;
}

function integer(min: number, max = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value) => {
    const parsed = Number(value);
    if (!/^\d+$/.test(value) || parsed < min || parsed > max) {
      throw new InvalidArgumentError(
        `Expected an integer from ${min}${max === Number.MAX_SAFE_INTEGER ? ' up' : ` to ${max}`}.`,
      );
    }
    return parsed;
  };
}

function redisUrl(value: string): string {
  if (!/^rediss?:\/\/[^\s]+$/.test(value)) throw new InvalidArgumentError('Expected a redis://HOST:PORT URL.');
  return value;
}

function positiveMilliseconds(value: string): number {
  const parsed = Number(value);
  if (value.trim() === '' || !Number.isFinite(parsed) || parsed <= 0)
    throw new InvalidArgumentError('Expected a number of ms > 0.');
  return parsed;
}

function milliseconds(value: string): number {
  const parsed = Number(value);
  if (value.trim() === '' || !Number.isFinite(parsed) || parsed < 0)
    throw new InvalidArgumentError('Expected a number of ms >= 0.');
  return parsed;
}

/**
 * The `microbatch` command line: `serve` and `worker` with their flags, checked by commander (a bad flag prints
 * commander's error and exits 1). Each command's function is called with its parsed flags.
 *
 * @example
 * ```ts
 * await createProgram(async (flags) => console.log(flags), async (flags) => console.log(flags)).parseAsync(['serve', '--model', 'models/x'], { from: 'user' });
 * ```
 */
export function createProgram(
  serve: (flags: ServeFlags) => Promise<void>,
  worker: (flags: WorkerFlags) => Promise<void>,
): Command {
  const program = new Command('microbatch')
    .description('Serve batched models over HTTP.')
    .showHelpAfterError('(add --help for the flags)');
  program
    .command('serve')
    .description(
      'Serve a local model with request batching: GET /?text=, OpenAI-compatible POST /v1/completions, /healthz, /readyz.',
    )
    .addOption(
      new Option('--task <task>', 'what the model does: text generation (completions, chat) or embeddings')
        .choices(TASKS)
        .default('text-generation'),
    )
    .requiredOption(
      '--model <dir>',
      'local model directory in transformers.js layout (or a hub id already under --models-dir)',
    )
    .option('--models-dir <dir>', 'where hub ids are looked up', 'models')
    .option('--max-batch-size <n>', 'most requests per model call', integer(1), 8)
    .option(
      '--batch-wait-ms <ms>',
      'how long the first request of a batch waits for company (0: work-conserving, a batch goes when a worker is free)',
      milliseconds,
      0,
    )
    .option(
      '--max-latency-ms <ms>',
      'refuse at once (503 OVERLOADED + Retry-After) a request predicted to take longer than this',
      positiveMilliseconds,
    )
    .option(
      '--max-queue-size <n>',
      'the most requests waiting (with --queue: queued or running across all replicas); then 503 QUEUE_FULL',
      integer(1),
      1_024,
    )
    .option('--port <n>', 'port to listen on (0: any free port)', integer(0, 65_535), 8000)
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .addOption(new Option('--framework <name>', 'which example app serves').choices(FRAMEWORKS).default('express'))
    .option('--workers <n>', 'worker threads, each with its own copy of the model', integer(1), 1)
    .option('--threads <n>', 'onnxruntime intra-op threads per worker', integer(1), 1)
    .option('--execution-provider <name>', 'onnxruntime execution provider', 'cpu')
    .addOption(
      new Option(
        '--scheduling <how>',
        'continuous: requests join the running decode loop; request: one generate call per batch',
      )
        .choices(SCHEDULINGS)
        .default('continuous'),
    )
    .addOption(
      new Option(
        '--log-format <format>',
        'JSON lines (json), colourised lines (pretty), or pretty on a terminal and JSON otherwise (auto)',
      )
        .choices(LOG_FORMATS)
        .default('auto'),
    )
    .option(
      '--queue <url>',
      'serve as a web replica of the workers behind this Redis queue (redis://HOST:PORT), with no local model',
      redisUrl,
    )
    .option('--max-batch-cost <n>', 'feature-extraction: the most tokens one model call holds', integer(1))
    .addOption(
      new Option(
        '--pooling <mode>',
        "feature-extraction: pooling (default: the model's 1_Pooling/config.json, else mean)",
      ).choices(['mean', 'cls', 'last_token']),
    )
    .addOption(
      new Option(
        '--normalize <on|off>',
        "feature-extraction: L2-normalise (default: the model's modules.json, else on)",
      ).choices(['on', 'off']),
    )
    .option('--truncatable-dimensions', 'feature-extraction: the model allows requests to ask for fewer `dimensions`')
    .action((flags: ServeFlags, command: Command) => {
      const refused = TASK_FLAGS[flags.task].find((key) => command.getOptionValueSource(key) === 'cli');
      if (refused !== undefined) command.error(`error: ${flagName(refused)} does not apply to --task ${flags.task}`);
      return serve(flags);
    });
  program
    .command('worker')
    .description(
      "Run a model worker: pull batches from a Redis queue, formed from every web replica's requests, and answer them.",
    )
    .requiredOption('--queue <url>', 'the Redis queue (redis://HOST:PORT)', redisUrl)
    .requiredOption(
      '--model <dir>',
      'local model directory in transformers.js layout (or a hub id already under --models-dir)',
    )
    .option('--models-dir <dir>', 'where hub ids are looked up', 'models')
    .option('--max-batch-size <n>', 'most entries one pull (one model call) takes', integer(1), 8)
    .option(
      '--batch-wait-ms <ms>',
      'after a pull that found fewer, wait this long to top the batch up (0: take what is waiting)',
      milliseconds,
      0,
    )
    .option('--workers <n>', 'worker threads, each with its own copy of the model (batches run at once)', integer(1), 1)
    .option('--threads <n>', 'onnxruntime intra-op threads per worker', integer(1), 1)
    .option('--execution-provider <name>', 'onnxruntime execution provider', 'cpu')
    .addOption(
      new Option(
        '--scheduling <how>',
        'continuous: requests join the running decode loop; request: one generate call per batch',
      )
        .choices(SCHEDULINGS)
        .default('continuous'),
    )
    .addOption(
      new Option(
        '--log-format <format>',
        'JSON lines (json), colourised lines (pretty), or pretty on a terminal and JSON otherwise (auto)',
      )
        .choices(LOG_FORMATS)
        .default('auto'),
    )
    .option(
      '--claim-idle-ms <ms>',
      'take over entries another worker has held unanswered this long (it died)',
      milliseconds,
      5_000,
    )
    .option(
      '--max-deliveries <n>',
      'answer an entry with an error once it was delivered this many times',
      integer(1),
      3,
    )
    .action((flags: WorkerFlags) => worker(flags));
  return program;
}
