// `microbatch serve`'s access flags: API keys (`--api-key`, `--api-key-file`, `MICROBATCH_API_KEY`), whether the
// metrics need one (`--protect-metrics`), and who a client is for fair shares (`--fairness-key`), turned into the
// serving apps' options once. A key file is re-read on SIGHUP; a bad file keeps the keys there were. No key is ever
// logged: only the keys' names.
import { readFileSync } from 'node:fs';
import {
  type ApiKeyInput,
  ApiKeys,
  type ClientKey,
  apiKeyClientKey,
  clientAddress,
  clientKeyFromHeader,
  parseApiKeyFile,
} from '@microbatch/serving';
import { InvalidArgumentError } from 'commander';

/** The environment variable holding one API key (as vLLM's `VLLM_API_KEY`). */
export const API_KEY_ENV = 'MICROBATCH_API_KEY';

/** What `--fairness-key` may say. */
export type FairnessKeyFlag = 'address' | 'api-key' | `header:${string}`;

/**
 * `--fairness-key`'s parser: `address`, `api-key` or `header:NAME` (a header set by a trusted proxy).
 *
 * @example
 * ```ts
 * fairnessKeyFlag('header:x-tenant'); // 'header:x-tenant'
 * ```
 */
export function fairnessKeyFlag(value: string): FairnessKeyFlag {
  if (value === 'address' || value === 'api-key') return value;
  if (/^header:[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(value)) return value as FairnessKeyFlag;
  throw new InvalidArgumentError('Expected address, api-key or header:NAME (an HTTP header name).');
}

/** commander's collector of a repeatable flag. */
export function collect(value: string, previous: readonly string[] = []): string[] {
  return [...previous, value];
}

/** The access flags of `microbatch serve`. */
export interface AccessFlags {
  readonly apiKey?: readonly string[];
  readonly apiKeyFile?: string;
  readonly protectMetrics?: boolean;
  readonly fairnessKey?: FairnessKeyFlag;
}

/** What the app gets, and how many keys from where (for the start-up log line; names only). */
export interface Access {
  readonly options: {
    readonly apiKeys?: ApiKeys;
    readonly protectMetrics?: boolean;
    readonly clientKey?: ClientKey;
  };
  /** The keys' names, or `null` without keys. */
  readonly keyNames: readonly string[] | null;
  /** What the fairness key is, as the log says it. */
  readonly fairnessKey: FairnessKeyFlag;
}

/** A logger's two levels used here (pino's). */
interface AccessLogger {
  info(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** The keys of the flags and the environment, in that order; the file's read now. Throws naming the source. */
function keysOf(flags: AccessFlags, env: NodeJS.ProcessEnv, fileKeys: readonly ApiKeyInput[]): ApiKeyInput[] {
  const fromEnv = env[API_KEY_ENV];
  return [...(flags.apiKey ?? []), ...(fromEnv === undefined || fromEnv === '' ? [] : [fromEnv]), ...fileKeys];
}

function readKeyFile(path: string): ApiKeyInput[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new Error(`--api-key-file ${path}: cannot read it (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  try {
    return parseApiKeyFile(text);
  } catch (error) {
    throw new Error(`--api-key-file ${path}: ${(error as Error).message}`);
  }
}

/**
 * The serving app's access options from `flags` and `env`, checked (a bad key or file, `--protect-metrics` or
 * `--fairness-key api-key` without keys: an error naming the flag, never quoting a key). With a key file, SIGHUP
 * re-reads it (logged with the keys' names; a file that cannot be read or parsed is logged and the old keys stay).
 *
 * @example
 * ```ts
 * const access = loadAccess(flags, process.env, logger, fail);
 * startTextCompletionApp(service, where, { ...access.options });
 * ```
 */
export function loadAccess(
  flags: AccessFlags,
  env: NodeJS.ProcessEnv,
  logger: AccessLogger,
  fail: (message: string) => never,
): Access {
  let apiKeys: ApiKeys | undefined;
  try {
    const fileKeys = flags.apiKeyFile === undefined ? [] : readKeyFile(flags.apiKeyFile);
    const keys = keysOf(flags, env, fileKeys);
    apiKeys = keys.length === 0 ? undefined : new ApiKeys(keys);
  } catch (error) {
    fail((error as Error).message);
  }
  const fairnessKey: FairnessKeyFlag = flags.fairnessKey ?? (apiKeys === undefined ? 'address' : 'api-key');
  if (apiKeys === undefined && flags.protectMetrics === true) {
    fail('--protect-metrics has no effect without API keys (--api-key, --api-key-file or MICROBATCH_API_KEY)');
  }
  if (apiKeys === undefined && fairnessKey === 'api-key') {
    fail('--fairness-key api-key needs API keys (--api-key, --api-key-file or MICROBATCH_API_KEY)');
  }
  const clientKey: ClientKey =
    fairnessKey === 'address'
      ? clientAddress
      : fairnessKey === 'api-key'
        ? apiKeyClientKey
        : clientKeyFromHeader(fairnessKey.slice('header:'.length));
  const { apiKeyFile } = flags;
  if (apiKeys !== undefined && apiKeyFile !== undefined) {
    const keys = apiKeys;
    process.on('SIGHUP', () => {
      try {
        keys.replace(keysOf(flags, env, readKeyFile(apiKeyFile)));
        logger.info({ apiKeys: keys.names }, `reloaded the API keys from ${apiKeyFile}`);
      } catch (error) {
        logger.error({ error: (error as Error).message }, 'API key file not reloaded; the keys stay as they were');
      }
    });
  }
  return {
    options: {
      ...(apiKeys === undefined ? {} : { apiKeys }),
      ...(flags.protectMetrics === true ? { protectMetrics: true } : {}),
      clientKey,
    },
    keyNames: apiKeys?.names ?? null,
    fairnessKey,
  };
}
