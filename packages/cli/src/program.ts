import { DEFAULTS } from '@microbatch/core';
import { DTYPE_CHOICES, SCHEDULINGS, TEXT_GENERATION_DEFAULTS } from '@microbatch/inference';
import { Command, InvalidArgumentError, Option } from 'commander';
import { type FairnessKeyFlag, collect, fairnessKeyFlag } from './access-flags.js';
import { MODEL_FLAGS, WORKER_MODEL_FLAGS } from './config/model-flags.js';
import { scheduledHelp, uselessFlag } from './flag-rules.js';
import { LOG_FORMATS } from './logger.js';

/**
 * The frameworks `microbatch serve` can run, each one an example app of this repository.
 *
 * @example
 * ```ts
 * FRAMEWORKS.includes('koa'); // true
 * ```
 */
export const FRAMEWORKS = ['express', 'koa', 'fastify', 'hono', 'nest'] as const;

/** What `/readyz` may mean (see `createHealth`'s `mode`). */
export const READINESS_MODES = ['fleet', 'instance'] as const;

/**
 * What `microbatch serve` can serve: text generation (`/v1/completions`, `/v1/chat/completions`) or embeddings
 * (`/v1/embeddings`).
 *
 * @example
 * ```ts
 * TASKS[1]; // 'feature-extraction'
 * ```
 */
export const TASKS = ['text-generation', 'feature-extraction', 'text-classification', 'rerank'] as const;

/** The flags a sequence classifier or cross-encoder has no use for (no decode loop, no pooling, no Batch API). */
const ENCODER_REFUSED = [
  'scheduling',
  'maxSequences',
  'maxStepTokens',
  'prefixCacheMb',
  'pooling',
  'normalize',
  'truncatableDimensions',
  'dataDir',
  'batchApi',
  'maxUploadMb',
  'batchMaxInFlight',
  'sharedPrefixCache',
];

/** Flags that mean something for one task only: given for the other, they are refused rather than ignored. */
const TASK_FLAGS: Readonly<Record<(typeof TASKS)[number], readonly string[]>> = {
  'text-generation': ['maxBatchCost', 'pooling', 'normalize', 'truncatableDimensions'],
  'feature-extraction': ['scheduling', 'maxSequences', 'maxStepTokens', 'prefixCacheMb', 'sharedPrefixCache'],
  'text-classification': ENCODER_REFUSED,
  rerank: ENCODER_REFUSED,
};

/** `microbatch worker`'s flags that only text generation reads: refused for an encoder task, naming it. */
const WORKER_DECODER_ONLY = ['scheduling', 'maxSequences', 'maxStepTokens', 'prefixCacheMb'] as const;

/** The flag a camel-cased option key is spelled as on the command line. */
const flagName = (key: string) => `--${key.replaceAll(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`;

/**
 * The checked flags of `microbatch serve`. A model setting nobody gave is `undefined`: the library's default applies
 * (core's `DEFAULTS`, the worker pool's, the runner's), written nowhere else.
 *
 * @example
 * ```ts
 * const flags: ServeFlags = { task: 'text-generation', model: 'models/tinystories-656k', framework: 'express', ... };
 * ```
 */
export interface ServeFlags {
  readonly task: (typeof TASKS)[number];
  /** Absent only with `config`. */
  readonly model: string;
  readonly modelsDir: string;
  /** `--scheduling request` only: the most requests one batch (one generate call) holds. */
  readonly maxBatchSize?: number;
  /** `--scheduling continuous` only: the most sequences one worker decodes together. */
  readonly maxSequences?: number;
  /** `--scheduling continuous` only: the most tokens (decode rows + prefill chunk) one loop iteration runs. */
  readonly maxStepTokens?: number;
  /** `--scheduling continuous` only: each worker's prefix KV cache in MiB (0: none). */
  readonly prefixCacheMb?: number;
  /** `--scheduling request` only: how long the first request of a batch waits for company. */
  readonly batchWaitMs?: number;
  /** Refuse (503 `OVERLOADED`) what is predicted to take longer than this; absent: no limit. */
  readonly maxLatencyMs?: number;
  /** The most requests waiting (with `queue`: queued or running across every replica); then 503 `QUEUE_FULL`. */
  readonly maxQueueSize?: number;
  /** With `queue` only: how long waiting requests wait for a worker once none is alive, then 503. */
  readonly workerGraceMs?: number;
  readonly port: number;
  readonly host: string;
  readonly framework: (typeof FRAMEWORKS)[number];
  readonly workers?: number;
  readonly threads?: number;
  readonly executionProvider?: string;
  /** Which of the folder's ONNX files the workers load (`auto`: the first in a CPU preference order). */
  readonly dtype: (typeof DTYPE_CHOICES)[number];
  readonly scheduling: (typeof SCHEDULINGS)[number];
  /**
   * Whether `--scheduling` was given: left out, a decoder graph without a KV cache runs under request scheduling
   * (logged); given as continuous for one, start-up fails saying why.
   */
  readonly schedulingGiven?: boolean;
  readonly logFormat: (typeof LOG_FORMATS)[number];
  /** What `/readyz` means: `fleet` (default; overload answered by 503s) or `instance` (unready when overloaded). */
  readonly readiness: (typeof READINESS_MODES)[number];
  /** `redis://host:port` or `nats://host:port`: serve as a web replica of workers behind this queue, with no local model. */
  readonly queue?: string;
  /** feature-extraction: the most tokens one model call holds. */
  readonly maxBatchCost?: number;
  /** OpenAI's Files and Batch APIs, kept in this folder (batches resume after a restart on it); absent: off. */
  readonly dataDir?: string;
  /**
   * With `queue`: OpenAI's Files and Batch APIs on the broker's storage, shared by every replica (any replica
   * answers for any batch; any worker runs its lines); absent: off.
   */
  readonly batchApi?: boolean;
  /** With `dataDir` or `batchApi`: the largest upload, in MiB (413 past it). */
  readonly maxUploadMb?: number;
  /** With `dataDir` or `batchApi`: batch lines running at once (default: 4, or half the batchers' slots when fewer). */
  readonly batchMaxInFlight?: number;
  /** feature-extraction: how token vectors are pooled (default: the folder's `1_Pooling/config.json`, else mean). */
  readonly pooling?: 'mean' | 'cls' | 'last_token';
  /** feature-extraction: L2-normalise embeddings (default: the folder's `modules.json`, else on). */
  readonly normalize?: 'on' | 'off';
  /** feature-extraction: the model allows shorter `dimensions`. */
  readonly truncatableDimensions?: boolean;
  /** API keys every route but the probes requires (repeatable; with `MICROBATCH_API_KEY` and the key file's). */
  readonly apiKey?: readonly string[];
  /** A file of API keys, one a line (`name:key` or a bare key), re-read on SIGHUP. */
  readonly apiKeyFile?: string;
  /** With keys: `/metrics` and `/dashboard` need one too. */
  readonly protectMetrics?: boolean;
  /** Who a client is for fair shares (default: `api-key` with keys, else `address`). */
  readonly fairnessKey?: FairnessKeyFlag;
  /** One prefix cache for every client (a documented shared system prompt), instead of one partition per tenant. */
  readonly sharedPrefixCache?: boolean;
  /** Several models from a YAML or JSON file (`config/`); the model flags are then the file's, per model. */
  readonly config?: string;
  /** With `config`: all models' worker threads x onnxruntime threads together (default: the cores). */
  readonly maxThreads?: number;
  /** With `config`: the most models loaded at once; the least recently used idle one is unloaded for another. */
  readonly maxLoadedModels?: number;
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
  /** What the model serves: text generation, or an encoder (embeddings, rerank, text classification). */
  readonly task: (typeof TASKS)[number];
  /** The most entries one pull takes (one handler call; an encoder's model calls too). */
  readonly maxBatchSize?: number;
  /** Encoders: the most tokens one model call holds. */
  readonly maxBatchCost?: number;
  /** `--scheduling continuous` only: the most sequences one worker thread decodes together. */
  readonly maxSequences?: number;
  /** `--scheduling continuous` only: the most tokens (decode rows + prefill chunk) one loop iteration runs. */
  readonly maxStepTokens?: number;
  /** `--scheduling continuous` only: each worker thread's prefix KV cache in MiB (0: none). */
  readonly prefixCacheMb?: number;
  /** Which of the folder's ONNX files the workers load (`auto`: the first in a CPU preference order). */
  readonly dtype: (typeof DTYPE_CHOICES)[number];
  readonly batchWaitMs?: number;
  readonly workers?: number;
  readonly threads?: number;
  readonly executionProvider?: string;
  readonly scheduling: (typeof SCHEDULINGS)[number];
  /**
   * Whether `--scheduling` was given: left out, a decoder graph without a KV cache runs under request scheduling
   * (logged); given as continuous for one, start-up fails saying why.
   */
  readonly schedulingGiven?: boolean;
  readonly logFormat: (typeof LOG_FORMATS)[number];
  readonly claimIdleMs?: number;
  readonly maxDeliveries?: number;
  /** Several models from a `serve --config` file, one queue each (named after the model); `model` is then absent. */
  readonly config?: string;
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

function megabytes(value: string): number {
  const parsed = Number(value);
  if (value.trim() === '' || !Number.isFinite(parsed) || parsed < 0)
    throw new InvalidArgumentError('Expected a number of MiB >= 0 (0: no prefix cache).');
  return parsed;
}

function uploadMegabytes(value: string): number {
  const parsed = Number(value);
  if (value.trim() === '' || !Number.isFinite(parsed) || parsed <= 0)
    throw new InvalidArgumentError('Expected a number of MiB > 0.');
  return parsed;
}

/** The step budget must leave room beside every decode row: checked here to name the flags, not the runner option. */
function stepBudgetError(flags: {
  readonly maxStepTokens?: number;
  readonly maxSequences?: number;
}): string | undefined {
  const rows = flags.maxSequences ?? TEXT_GENERATION_DEFAULTS.maxSequences;
  if (flags.maxStepTokens === undefined || flags.maxStepTokens > rows) return undefined;
  return (
    `--max-step-tokens (${flags.maxStepTokens}) must exceed --max-sequences (${rows}): a step decodes every ` +
    'running row and needs room for a prompt token'
  );
}

/** `--shared-prefix-cache` where there is no prefix cache to share (a local server's; a replica's workers have one). */
function sharedCacheError(flags: ServeFlags): string | undefined {
  if (flags.sharedPrefixCache !== true || flags.queue !== undefined) return undefined;
  if (flags.scheduling === 'request')
    return '--shared-prefix-cache has no effect: --scheduling request has no prefix cache';
  if (flags.prefixCacheMb === 0) return '--shared-prefix-cache has no effect: --prefix-cache-mb 0 turns the cache off';
  return undefined;
}

/** `--queue`: its scheme picks the transport (`queue-transport.ts`). */
function queueUrl(value: string): string {
  if (!/^(rediss?|nats):\/\/[^\s]+$/.test(value))
    throw new InvalidArgumentError('Expected a redis://HOST:PORT or nats://HOST:PORT URL.');
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

const CONFIG_HELP =
  'serve several models from a YAML or JSON file (`models:` a list of name, path, task, load, dtype, workers, ' +
  'threads and the batching settings; see docs/many-models.md), each request routed by its `model`; the model ' +
  "flags are then the file's";

/** With `--config`, the model flags are the file's: one given on the command line is refused, naming it. */
/** Serve flags the multi-model app does not take yet (the Batch API's). */
const CONFIG_NOT_YET = ['dataDir', 'batchApi', 'maxUploadMb', 'batchMaxInFlight'] as const;

function configFlagError(flags: ServeFlags, command: Command): string | undefined {
  if (flags.config === undefined) {
    if (flags.model === undefined) return "required option '--model <dir>' not specified (or --config <file>)";
    const only = (['maxThreads', 'maxLoadedModels'] as const).find(
      (key) => command.getOptionValueSource(key) === 'cli',
    );
    return only === undefined ? undefined : `${flagName(only)} applies with --config only`;
  }
  // The Batch API is not wired into the multi-model app yet: refused, never silently off.
  const notYet = CONFIG_NOT_YET.find((key) => command.getOptionValueSource(key) === 'cli');
  if (notYet !== undefined) return `${flagName(notYet)} is not supported with --config yet`;
  const given = MODEL_FLAGS.find((key) => command.getOptionValueSource(key) === 'cli');
  if (given !== undefined) return `${flagName(given)} does not apply with --config: set it per model in the file`;
  if (flags.queue === undefined) {
    const grace = command.getOptionValueSource('workerGraceMs') === 'cli';
    return grace ? '--worker-grace-ms applies with --queue only' : undefined;
  }
  // A web replica holds no model: nothing to multiplex, no threads of its own.
  const local = (['maxThreads', 'maxLoadedModels'] as const).find((key) => command.getOptionValueSource(key) === 'cli');
  return local === undefined
    ? undefined
    : `${flagName(local)} does not apply with --queue (a web replica loads no model)`;
}

/** A `microbatch worker` flag the task chosen does not read (a decoder's for an encoder, and the reverse). */
function workerTaskError(flags: WorkerFlags, command: Command): string | undefined {
  const given = (key: string) => command.getOptionValueSource(key) === 'cli';
  if (flags.task === 'text-generation') {
    return given('maxBatchCost') ? '--max-batch-cost does not apply to --task text-generation' : undefined;
  }
  const decoder = WORKER_DECODER_ONLY.find(given);
  return decoder === undefined ? undefined : `${flagName(decoder)} does not apply to --task ${flags.task}`;
}

/** `worker --config`: the model flags are the file's; without it, `--model` is required. */
function workerConfigError(flags: WorkerFlags, command: Command): string | undefined {
  if (flags.config === undefined) {
    return flags.model === undefined ? "required option '--model <dir>' not specified (or --config <file>)" : undefined;
  }
  const given = WORKER_MODEL_FLAGS.find((key) => command.getOptionValueSource(key) === 'cli');
  return given === undefined
    ? undefined
    : `${flagName(given)} does not apply with --config: set it per model in the file`;
}

/**
 * Options of {@link createProgram}.
 *
 * @example
 * ```ts
 * createProgram(serve, worker, { version: '0.1.0' });
 * ```
 */
export interface ProgramOptions {
  /** What `microbatch --version` prints; without it there is no `--version`. */
  readonly version?: string;
}

const MODEL_HELP = 'local model directory in transformers.js layout (or a hub id already under --models-dir)';
const LOG_FORMAT_HELP =
  'JSON lines (json), colourised lines (pretty), or pretty on a terminal and JSON otherwise (auto)';
const STEP_TOKENS_HELP =
  "the most tokens one decode-loop step runs, its rows' decode tokens plus a prefill chunk: longer prompts are " +
  'prefilled in chunks, and running streams get a token every step (default: 64, or twice --max-sequences when ' +
  'that is more; must exceed --max-sequences). Smaller: steadier streams while long prompts arrive; larger: their ' +
  'first token sooner';
const PREFIX_CACHE_HELP =
  "each worker thread's prefix KV cache, in MiB (default: 64; 0: none): prompts that start like earlier ones (a " +
  'system prompt, a chat template) reuse its 16-token blocks and prefill only the rest';
const POOL_HELP = {
  workers: 'worker threads, each with its own copy of the model (default: 1)',
  threads: 'onnxruntime intra-op threads per worker thread (default: 1)',
  executionProvider: 'onnxruntime execution provider (default: cpu)',
} as const;

const DTYPE_HELP =
  "which of the model folder's ONNX files the worker threads load, as transformers.js names them (q8: " +
  'onnx/model_quantized.onnx, q4: onnx/model_q4.onnx, fp32: onnx/model.onnx ...); auto: the first present of ' +
  `${DTYPE_CHOICES.slice(1).join(', ')}. A missing file is refused at start, naming the dtypes the folder has`;

const API_KEY_HELP =
  'an API key every route but /healthz and /readyz requires as `Authorization: Bearer <key>` (401 otherwise); ' +
  'repeatable; also read from MICROBATCH_API_KEY. Its name in logs, metrics and fair shares is key- and 8 hex ' +
  'digits of its SHA-256 (name keys in --api-key-file)';
const API_KEY_FILE_HELP =
  'a file of API keys, one a line: name:key or a bare key (# comments); re-read on SIGHUP (a bad file keeps the ' +
  'keys there were)';
const FAIRNESS_KEY_HELP =
  "who a client is for fair shares: address (the connection's), api-key (the key's name), or header:NAME (a " +
  "header a trusted proxy sets); default: api-key with API keys, else address. Never the body's `user`";
const SHARED_PREFIX_CACHE_HELP =
  'one prefix cache for every client, for a documented system prompt all clients send (a client can then tell ' +
  "from cached_tokens or its first token's time whether another sent the same prompt start); default: one " +
  'partition per tenant (the API key, else the fairness key)';
/** Why `microbatch worker` refuses key flags. */
const WORKER_KEYS_REFUSAL =
  'has no effect on a worker: it serves no HTTP, so it sees no Authorization header; the web replicas check the ' +
  'keys (microbatch serve --queue ... --api-key) and each entry carries its tenant';

/** `--dtype`, alike on both commands but for where the scheduling rules refuse it (`serve --queue` loads no model). */
function dtypeOption(command: 'serve' | 'worker'): Option {
  return new Option('--dtype <dtype>', scheduledHelp('dtype', command, DTYPE_HELP))
    .choices(DTYPE_CHOICES)
    .default('auto');
}

/**
 * The `microbatch` command line: `serve` and `worker` with their flags, checked by commander (a bad flag prints
 * commander's error and exits 1). A flag that has no effect in the mode chosen (`serve --queue ... --workers 2`,
 * `--max-batch-size` under continuous scheduling) is refused the same way, naming it, before anything starts. Each
 * command's function is called with its parsed flags; a model flag left out is `undefined` (the library default).
 *
 * @example
 * ```ts
 * await createProgram(async (flags) => console.log(flags), async (flags) => console.log(flags)).parseAsync(['serve', '--model', 'models/x'], { from: 'user' });
 * ```
 */
export function createProgram(
  serve: (flags: ServeFlags) => Promise<void>,
  worker: (flags: WorkerFlags) => Promise<void>,
  options: ProgramOptions = {},
): Command {
  const program = new Command('microbatch')
    .description('Serve batched models over HTTP.')
    .showHelpAfterError('(add --help for the flags)');
  if (options.version !== undefined) program.version(options.version, '-V, --version', 'print the version');
  program
    .command('serve')
    .description(
      'Serve a model with request batching: GET /?text=, OpenAI-compatible POST /v1/completions, /healthz, ' +
        '/readyz, /metrics. Locally (the model in worker threads of this process), or with --queue as a web ' +
        'replica of `microbatch worker`s. A flag with no effect in the mode chosen is refused, naming it.',
    )
    .addOption(
      new Option(
        '--task <task>',
        'what the model does: text generation (completions, chat), embeddings, text classification (/classify) or ' +
          'rerank (a cross-encoder: /v1/rerank, /rerank, /v1/score)',
      )
        .choices(TASKS)
        .default('text-generation'),
    )
    .option(
      '--model <dir>',
      `${MODEL_HELP}; with --queue: only the queue's name (its last part), but an encoder task's folder (the ` +
        'replica tokenizes and bounds requests). Required without --config',
    )
    .option('--models-dir <dir>', scheduledHelp('modelsDir', 'serve', 'where hub ids are looked up'), 'models')
    .addOption(
      new Option(
        '--scheduling <how>',
        scheduledHelp(
          'scheduling',
          'serve',
          'continuous: each request joins the running decode loop at its next step and leaves the step it ends; ' +
            'request: one generate call per batch, until its longest request ends. Left out, a decoder graph ' +
            'without a KV cache runs under request (logged)',
        ),
      )
        .choices(SCHEDULINGS)
        .default('continuous'),
    )
    .option(
      '--max-batch-size <n>',
      scheduledHelp(
        'maxBatchSize',
        'serve',
        `the most requests one batch (one generate call) holds (default: ${DEFAULTS.maxBatchSize}); under ` +
          'continuous scheduling the batcher hands the loop one request at a time (see --max-sequences)',
      ),
      integer(1),
    )
    .addOption(
      new Option(
        '--readiness <mode>',
        'what /readyz means: fleet (behind a load balancer: unready only while it cannot serve, overload answered by 503s) or instance (also unready when overloaded)',
      )
        .choices(READINESS_MODES)
        .default('fleet'),
    )
    .option(
      '--max-sequences <n>',
      scheduledHelp(
        'maxSequences',
        'serve',
        "the most sequences one worker thread decodes together (default: the runner's, 32); more wait in the batcher",
      ),
      integer(1),
    )
    .option('--max-step-tokens <n>', scheduledHelp('maxStepTokens', 'serve', STEP_TOKENS_HELP), integer(2))
    .option('--prefix-cache-mb <mb>', scheduledHelp('prefixCacheMb', 'serve', PREFIX_CACHE_HELP), megabytes)
    .option(
      '--batch-wait-ms <ms>',
      scheduledHelp(
        'batchWaitTimeoutMs',
        'serve',
        'how long the first request of a batch waits for company (default: ' +
          `${DEFAULTS.batchWaitTimeoutMs}, work-conserving: a batch goes when a worker is free); under continuous ` +
          'scheduling a request joins the loop at once',
      ),
      milliseconds,
    )
    .option(
      '--max-latency-ms <ms>',
      scheduledHelp(
        'maxLatencyMs',
        'serve',
        'refuse at once (503 OVERLOADED + Retry-After) a request predicted to take longer than this (default: no ' +
          "limit). Locally: predicted from the batcher's queue and its batch times; with --queue: from this " +
          "replica's requests in the queue and the time each took per request ahead of it",
      ),
      positiveMilliseconds,
    )
    .option(
      '--max-queue-size <n>',
      scheduledHelp(
        'maxQueueSize',
        'serve',
        `the most requests waiting, then 503 QUEUE_FULL (default: ${DEFAULTS.maxQueueSize}). Locally: per batcher ` +
          '(whole and streamed completions); with --queue: queued or running across all replicas',
      ),
      integer(1),
    )
    .option(
      '--worker-grace-ms <ms>',
      scheduledHelp(
        'workerGraceMs',
        'serve',
        'with --queue: once no worker is alive, how long the requests already waiting wait for one (a worker ' +
          'restarted or replaced within it serves them) before 503; new requests are refused with 503 meanwhile ' +
          '(default: 5000; 0: at once)',
      ),
      milliseconds,
    )
    .option('--port <n>', 'port to listen on (0: any free port)', integer(0, 65_535), 8000)
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .addOption(new Option('--framework <name>', 'which app serves').choices(FRAMEWORKS).default('express'))
    .option('--workers <n>', scheduledHelp('workers', 'serve', POOL_HELP.workers), integer(1))
    .option('--threads <n>', scheduledHelp('threads', 'serve', POOL_HELP.threads), integer(1))
    .option('--execution-provider <name>', scheduledHelp('executionProvider', 'serve', POOL_HELP.executionProvider))
    .addOption(dtypeOption('serve'))
    .addOption(new Option('--log-format <format>', LOG_FORMAT_HELP).choices(LOG_FORMATS).default('auto'))
    .option(
      '--queue <url>',
      'serve as a web replica of the workers behind this queue (redis://HOST:PORT or nats://HOST:PORT, NATS with ' +
        'JetStream), with no local model',
      queueUrl,
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
    .option(
      '--data-dir <dir>',
      "turn on OpenAI's Files and Batch APIs (/v1/files, /v1/batches), keeping files, batches and results in this " +
        'folder; batch lines run at the lowest priority on spare capacity, and a restart on the same folder resumes ' +
        'unfinished batches (default: off)',
    )
    .option(
      '--batch-api',
      "with --queue: turn on OpenAI's Files and Batch APIs with files, batches and results kept in the broker " +
        '(Redis keys and streams, NATS JetStream KV and Object Store): any replica answers for any batch, any worker ' +
        "runs its lines, and a batch whose replica died is taken up by another (default: off; without --queue it's " +
        '--data-dir)',
    )
    .option(
      '--max-upload-mb <mb>',
      'with --data-dir or --batch-api: the largest file upload, in MiB (default: 100); 413 past it',
      uploadMegabytes,
    )
    .option(
      '--batch-max-in-flight <n>',
      'with --data-dir or --batch-api: batch lines running at once, across every batch, while no interactive request runs (none ' +
        "runs beside them: they are preempted and fed again later; default: the batchers' slots less an eighth); " +
        'more: faster batches on an idle server, more work thrown away when interactive requests arrive',
      integer(1),
    )
    .option('--api-key <key>', API_KEY_HELP, collect)
    .option('--api-key-file <file>', API_KEY_FILE_HELP)
    .option('--protect-metrics', 'with API keys: /metrics and /dashboard need a key too (the probes never do)')
    .option('--fairness-key <who>', FAIRNESS_KEY_HELP, fairnessKeyFlag)
    .option('--shared-prefix-cache', SHARED_PREFIX_CACHE_HELP)
    .option('--config <file>', CONFIG_HELP)
    .option(
      '--max-threads <n>',
      "with --config: all models' worker threads x threads together (default: the cores)",
      integer(1),
    )
    .option(
      '--max-loaded-models <n>',
      'with --config: the most models loaded at once (default: all); models load on first request',
      integer(1),
    )
    .action((flags: ServeFlags, command: Command) => {
      const notWithConfig = configFlagError(flags, command);
      if (notWithConfig !== undefined) command.error(`error: ${notWithConfig}`);
      if (flags.config !== undefined) return serve(flags);
      const wrongTask = TASK_FLAGS[flags.task].find((key) => command.getOptionValueSource(key) === 'cli');
      if (wrongTask !== undefined)
        command.error(`error: ${flagName(wrongTask)} does not apply to --task ${flags.task}`);
      // Embeddings have no decode loop: their batches are the batcher's, as under request scheduling.
      const mode =
        flags.queue !== undefined
          ? 'web replica'
          : flags.task !== 'text-generation'
            ? 'serve request'
            : (`serve ${flags.scheduling}` as const);
      for (const [value, flag] of [
        [flags.maxUploadMb, '--max-upload-mb'],
        [flags.batchMaxInFlight, '--batch-max-in-flight'],
      ] as const) {
        if (value !== undefined && flags.dataDir === undefined && flags.batchApi !== true)
          command.error(`error: ${flag} has no effect without --data-dir or --batch-api`);
      }
      // Batches kept by one replica would be answered by that replica only, and resumed by every replica sharing
      // the folder: a fleet keeps them in its broker (--batch-api).
      if (flags.dataDir !== undefined && flags.queue !== undefined) {
        command.error(
          "error: --data-dir keeps the Batch API on this replica's disk, which the other replicas cannot see: with " +
            '--queue use --batch-api (files, batches and results kept in the broker)',
        );
      }
      if (flags.batchApi === true && flags.queue === undefined) {
        command.error(
          'error: --batch-api applies with --queue only (the Batch API of a server on its own is --data-dir <dir>)',
        );
      }
      // An encoder replica tokenizes and bounds requests; how its workers batch them is theirs.
      if (
        mode === 'web replica' &&
        flags.task !== 'text-generation' &&
        command.getOptionValueSource('maxBatchCost') === 'cli'
      ) {
        command.error(
          'error: --max-batch-cost has no effect here: a web replica (--queue) runs no model, its workers do: set it on `microbatch worker`',
        );
      }
      const refused = uselessFlag(command, mode) ?? stepBudgetError(flags) ?? sharedCacheError(flags);
      if (refused !== undefined) command.error(`error: ${refused}`);
      return serve({ ...flags, schedulingGiven: command.getOptionValueSource('scheduling') === 'cli' });
    });
  program
    .command('worker')
    .description(
      "Run a model worker: pull batches from a Redis or NATS JetStream queue, formed from every web replica's " +
        'requests, and answer ' +
        'them. A flag with no effect under the scheduling chosen is refused, naming it.',
    )
    .requiredOption('--queue <url>', 'the queue (redis://HOST:PORT, or nats://HOST:PORT with JetStream)', queueUrl)
    .option('--model <dir>', `${MODEL_HELP}. Required without --config`)
    .option(
      '--config <file>',
      "serve every model of a `serve --config` file (text generation and encoders), each from the queue named after it (the model flags are then the file's)",
    )
    .addOption(
      new Option(
        '--task <task>',
        'what the model serves: text-generation, or an encoder (feature-extraction, rerank, text-classification) ' +
          'for the web replicas of `serve --task <same> --queue`',
      )
        .choices(TASKS)
        .default('text-generation'),
    )
    .option(
      '--max-batch-cost <n>',
      "encoders: the most tokens one model call holds (default: 8192; at least the model's max_position_embeddings)",
      integer(1),
    )
    .option('--models-dir <dir>', scheduledHelp('modelsDir', 'worker', 'where hub ids are looked up'), 'models')
    .addOption(
      new Option(
        '--scheduling <how>',
        scheduledHelp(
          'scheduling',
          'worker',
          'continuous: pulled requests join the running decode loop; request: one generate call per pull. Left ' +
            'out, a decoder graph without a KV cache runs under request (logged)',
        ),
      )
        .choices(SCHEDULINGS)
        .default('continuous'),
    )
    .addOption(dtypeOption('worker'))
    .option(
      '--max-batch-size <n>',
      scheduledHelp(
        'maxBatchSize',
        'worker',
        `the most entries one pull takes (default: ${DEFAULTS.maxBatchSize}). Request scheduling: one generate ` +
          'call (split by sampling settings); continuous: that many join the decode loop together, up to ' +
          '--max-sequences',
      ),
      integer(1),
    )
    .option(
      '--max-sequences <n>',
      scheduledHelp(
        'maxSequences',
        'worker',
        "the most sequences one worker thread decodes together (default: the runner's, 32)",
      ),
      integer(1),
    )
    .option('--max-step-tokens <n>', scheduledHelp('maxStepTokens', 'worker', STEP_TOKENS_HELP), integer(2))
    .option('--prefix-cache-mb <mb>', scheduledHelp('prefixCacheMb', 'worker', PREFIX_CACHE_HELP), megabytes)
    .option(
      '--batch-wait-ms <ms>',
      scheduledHelp(
        'batchWaitTimeoutMs',
        'worker',
        'after a pull that found fewer than --max-batch-size entries, wait this long to top the batch up (default: ' +
          `${DEFAULTS.batchWaitTimeoutMs}: take what is waiting)`,
      ),
      milliseconds,
    )
    .option(
      '--workers <n>',
      scheduledHelp('workers', 'worker', `${POOL_HELP.workers}; their batches run at once`),
      integer(1),
    )
    .option('--threads <n>', scheduledHelp('threads', 'worker', POOL_HELP.threads), integer(1))
    .option('--execution-provider <name>', scheduledHelp('executionProvider', 'worker', POOL_HELP.executionProvider))
    .addOption(new Option('--log-format <format>', LOG_FORMAT_HELP).choices(LOG_FORMATS).default('auto'))
    .option(
      '--claim-idle-ms <ms>',
      'take over entries another worker has held unanswered this long (it died) (default: 5000)',
      milliseconds,
    )
    .option(
      '--max-deliveries <n>',
      'answer an entry with an error once it was delivered this many times (default: 3)',
      integer(1),
    )
    .option('--api-key <key>', 'refused: a worker has no HTTP server (see docs/operating.md)')
    .option('--api-key-file <file>', 'refused: a worker has no HTTP server (see docs/operating.md)')
    .action((flags: WorkerFlags, command: Command) => {
      const keyFlag = ['apiKey', 'apiKeyFile'].find((key) => command.getOptionValueSource(key) === 'cli');
      if (keyFlag !== undefined) command.error(`error: ${flagName(keyFlag)} ${WORKER_KEYS_REFUSAL}`);
      const notWithConfig = workerConfigError(flags, command);
      if (notWithConfig !== undefined) command.error(`error: ${notWithConfig}`);
      if (flags.config !== undefined) return worker(flags);
      const encoderRefused = workerTaskError(flags, command);
      if (encoderRefused !== undefined) command.error(`error: ${encoderRefused}`);
      if (flags.task !== 'text-generation') return worker(flags);
      const refused = uselessFlag(command, `worker ${flags.scheduling}`) ?? stepBudgetError(flags);
      if (refused !== undefined) command.error(`error: ${refused}`);
      return worker({ ...flags, schedulingGiven: command.getOptionValueSource('scheduling') === 'cli' });
    });
  return program;
}
