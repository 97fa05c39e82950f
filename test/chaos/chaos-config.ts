// `pnpm test:chaos`'s settings, read once from the environment; a value that makes no sense is a TypeError naming
// the variable, before anything starts.
import type { BrokerKind } from './fleet/broker.js';

/** A chaos run's settings. */
export interface ChaosConfig {
  /** `CHAOS_MINUTES`: how long faults are injected, per broker. @default 5 */
  readonly minutes: number;
  /** `CHAOS_BROKERS`: which brokers, in order. @default ['redis', 'nats'] */
  readonly brokers: readonly BrokerKind[];
  /** `CHAOS_SEED`: the fault loop's seed. @default a random one, logged */
  readonly seed: number;
  /** `CHAOS_CONCURRENCY`: requests in flight. @default 8 */
  readonly concurrency: number;
  /** `CHAOS_REDIS_AOF`: `1` keeps Redis's data over a restart (an AOF), `0` restarts it empty. @default true */
  readonly redisAppendOnly: boolean;
  /** Tokens per completion: streams long enough for a fault to land in the middle of some. @default 48 */
  readonly maxTokens: number;
  /** A request's deadline: the replica's queue deadline (`timeoutMs`, 30 s), past which it answers 504. */
  readonly deadlineMs: number;
  /**
   * How long past its deadline a request may take before it is a hang: its answer's way back on a loaded machine
   * (process starts of 50 s were seen with a load average of 24 on 2 cores); a real hang never ends.
   */
  readonly slackMs: number;
  /** The workers' `--claim-idle-ms`. @default 2000 */
  readonly claimIdleMs: number;
}

/**
 * Reads the settings from `env`.
 *
 * @example
 * ```ts
 * readChaosConfig({ CHAOS_MINUTES: '1', CHAOS_BROKERS: 'nats' }).brokers; // ['nats']
 * ```
 */
export function readChaosConfig(env: NodeJS.ProcessEnv): ChaosConfig {
  const minutes = number(env, 'CHAOS_MINUTES', 5, (value) => value > 0);
  const brokers = (env.CHAOS_BROKERS ?? 'redis,nats').split(',').map((name) => name.trim());
  for (const broker of brokers) {
    if (broker !== 'redis' && broker !== 'nats') {
      throw new TypeError(
        `Expected CHAOS_BROKERS to list redis and/or nats (comma-separated), got ${env.CHAOS_BROKERS}`,
      );
    }
  }
  const seed = number(
    env,
    'CHAOS_SEED',
    Math.floor(Math.random() * 0xffff_ffff),
    (value) => Number.isInteger(value) && value >= 0 && value <= 0xffff_ffff,
  );
  const concurrency = number(env, 'CHAOS_CONCURRENCY', 8, (value) => Number.isInteger(value) && value >= 1);
  const aof = env.CHAOS_REDIS_AOF ?? '1';
  if (aof !== '0' && aof !== '1') throw new TypeError(`Expected CHAOS_REDIS_AOF to be 0 or 1, got ${aof}`);
  return {
    minutes,
    brokers: brokers as BrokerKind[],
    seed,
    concurrency,
    redisAppendOnly: aof === '1',
    maxTokens: 48,
    deadlineMs: 30_000,
    slackMs: 30_000,
    claimIdleMs: 2_000,
  };
}

function number(env: NodeJS.ProcessEnv, name: string, fallback: number, valid: (value: number) => boolean): number {
  const text = env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || !valid(value))
    throw new TypeError(`Expected ${name} to be a valid number, got ${text}`);
  return value;
}
