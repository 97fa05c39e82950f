import type { BatcherBase } from '@microbatch/core';
import type { HttpResult } from './node-handler.js';
import { MAX_FINITE, checkNumber, fail, isObjectLike } from '@microbatch/core/util';

/** Options of {@link createHealth}; checked once, when the health checks are created. */
export interface HealthOptions {
  /**
   * Batchers whose closing, or whose overload (predicted latency above `maxLatencyMs`), makes the process unready,
   * so a load balancer stops sending work before it is refused.
   * @default []
   */
  readonly batchers?: readonly BatcherBase[];
  /**
   * Whether the model can serve, for example a worker pool's readiness. Only `true` means ready: `false`, another
   * value, a throw, a rejection or no answer within `readyTimeoutMs` all mean not ready.
   * @default () => true
   */
  readonly ready?: () => boolean | PromiseLike<boolean>;
  /**
   * How long `readiness()` waits for `ready()`. Below the probe's own timeout (Kubernetes: 1 s), so the probe gets a
   * 503 with a reason instead of a timeout.
   * @default 500
   */
  readonly readyTimeoutMs?: number;
  /**
   * What readiness means. `'instance'`: unready while the model is not ready, a batcher is closed, or a batcher is
   * overloaded (so a load balancer sends the work elsewhere). `'fleet'`: unready only while the process cannot
   * serve at all (model not ready, batcher closed); overload is answered by the requests' own 503s (with
   * `Retry-After`), not by unreadiness, because under a fleet-wide peak every replica would go unready at once and
   * the load balancer would have nowhere left to send anything. Use `'fleet'` behind a load balancer.
   * @default 'instance'
   */
  readonly mode?: 'instance' | 'fleet';
}

const DEFAULTS = {
  batchers: [],
  ready: () => true,
  readyTimeoutMs: 500,
  mode: 'instance',
} as const satisfies Required<HealthOptions>;

/** The JSON body of a health answer. */
export type HealthBody =
  | { readonly status: 'ok' }
  | { readonly status: 'unavailable'; readonly reasons: readonly string[] };

/** The checks made by {@link createHealth}; both are plain functions, safe to pass unbound. */
export interface Health {
  /** Always 200 `{ status: 'ok' }`: the process answers, so restarting it would not help. */
  readonly liveness: () => HttpResult<HealthBody>;
  /**
   * 200 `{ status: 'ok' }`, or 503 `{ status: 'unavailable', reasons }` while the model is not ready, a batcher
   * closed, or (mode `'instance'`) a batcher's predicted latency for new work exceeds its `maxLatencyMs`.
   */
  readonly readiness: () => Promise<HttpResult<HealthBody>>;
}

/**
 * Creates liveness and readiness checks returning framework-free `{ status, body }` answers.
 *
 * @example
 * ```ts
 * const health = createHealth({ batchers: [route.batcher], ready: () => pool.ready.then(() => true) });
 * app.get('/healthz', toNodeHandler(health.liveness));
 * app.get('/readyz', toNodeHandler(health.readiness)); // 503 while the model loads and once close() was called
 * ```
 */
export function createHealth(options: HealthOptions = {}): Health {
  if (typeof options !== 'object' || options === null) fail('options', 'an object', options);
  const batchers = options.batchers ?? DEFAULTS.batchers;
  if (!Array.isArray(batchers)) fail('batchers', 'an array of batchers', batchers);
  batchers.forEach((batcher: unknown, index) => {
    const ok = isObjectLike(batcher) && typeof batcher.name === 'string' && typeof batcher.closed === 'boolean';
    if (!ok) fail(`batchers[${index}]`, 'a batcher from `createBatcher`', batcher);
  });
  const ready: () => boolean | PromiseLike<boolean> = options.ready ?? DEFAULTS.ready;
  if (typeof ready !== 'function') fail('ready', 'a function', ready);
  const readyTimeoutMs = options.readyTimeoutMs ?? DEFAULTS.readyTimeoutMs;
  checkNumber('readyTimeoutMs', readyTimeoutMs, 0, MAX_FINITE, true);
  const mode = options.mode ?? DEFAULTS.mode;
  if (mode !== 'instance' && mode !== 'fleet') fail('mode', "'instance' or 'fleet'", mode);
  // A copy: the array the caller keeps must not change what was checked above.
  const watched = [...batchers];

  return {
    liveness: () => ({ status: 200, body: { status: 'ok' } }),
    readiness: async () => {
      const reasons: string[] = [];
      const model = await checkReady(ready, readyTimeoutMs);
      if (model !== undefined) reasons.push(model);
      for (const batcher of watched) {
        const overload = batcher.closed || mode === 'fleet' ? undefined : overloadOf(batcher);
        if (batcher.closed) reasons.push(`batcher ${JSON.stringify(batcher.name)} is closed`);
        else if (overload !== undefined) reasons.push(overload);
      }
      if (reasons.length === 0) return { status: 200, body: { status: 'ok' } };
      return { status: 503, body: { status: 'unavailable', reasons } };
    },
  };
}

/**
 * Why a batcher would refuse new work now: its predicted latency for a new item exceeds its `maxLatencyMs`, so a
 * load balancer should send the work elsewhere. `undefined` while it would admit (or has no estimate yet).
 */
function overloadOf(batcher: BatcherBase): string | undefined {
  let stats: ReturnType<BatcherBase['stats']>;
  try {
    stats = batcher.stats();
  } catch {
    return undefined; // a transport whose stats fail says nothing about overload; its own errors surface elsewhere
  }
  const { predictedLatencyMs, maxLatencyMs } = stats as { predictedLatencyMs?: unknown; maxLatencyMs?: unknown };
  if (
    typeof predictedLatencyMs !== 'number' ||
    typeof maxLatencyMs !== 'number' ||
    !(predictedLatencyMs > maxLatencyMs)
  ) {
    return undefined;
  }
  return `batcher ${JSON.stringify(batcher.name)} is overloaded: predicted latency ${Math.ceil(predictedLatencyMs)} ms exceeds maxLatencyMs ${maxLatencyMs} ms`;
}

/** Runs `ready()`, bounded by `timeoutMs`; returns why the model is not ready, or `undefined` when it is. */
async function checkReady(ready: () => boolean | PromiseLike<boolean>, timeoutMs: number): Promise<string | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = Symbol('timed out');
  try {
    const answer = await Promise.race([
      Promise.resolve().then(ready),
      new Promise<typeof timedOut>((resolve) => {
        timer = setTimeout(resolve, timeoutMs, timedOut);
        // A probe waiting on a model must not keep a process alive that is otherwise done.
        timer.unref();
      }),
    ]);
    if (answer === timedOut) return `model readiness check timed out after ${timeoutMs} ms`;
    // Strictly `true`: a check that returns something else has not said the model is ready.
    return answer === true ? undefined : 'model is not ready';
  } catch {
    // Not the error's message: readiness bodies are often visible beyond the operators, and messages carry internals.
    return 'model readiness check failed';
  } finally {
    clearTimeout(timer);
  }
}
