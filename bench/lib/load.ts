// Closed-loop HTTP load from the driver process with autocannon: `connections` clients, each sending its next
// request as soon as its previous response arrives (so concurrency = connections). Only 127.0.0.1 is targeted.
import autocannon from 'autocannon';
import { percentile } from './stats.js';

export interface LoadOptions {
  readonly port: number;
  readonly path: string;
  /** JSON bodies, sent round-robin across all connections so that every batch mixes different inputs. */
  readonly bodies: readonly object[];
  readonly connections: number;
  readonly seconds: number;
  /** Counted runs outlast their window a little so that it ends under full load; warm-ups need not. */
  readonly counted?: boolean;
  /** Called about every 250 ms with the responses so far (for the progress display). */
  readonly onTick?: (responses: number, elapsedS: number) => void;
}

export interface LoadResult {
  /** 2xx responses that completed inside the window. */
  readonly ok: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly timeouts: number;
  readonly seconds: number;
  readonly itemsPerS: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly meanMs: number;
}

/**
 * Runs the load for `seconds` and measures what completed in that window. Latencies are kept raw (float ms) rather
 * than read from autocannon's histogram, which rounds to whole milliseconds: the concurrency-1 comparison needs
 * better than 1 ms.
 */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const encoded = options.bodies.map((body) => JSON.stringify(body));
  let next = 0;
  const latencies: number[] = [];
  let non2xx = 0;
  let start = Number.NaN;
  let end = Number.NaN;
  let instance!: autocannon.Instance;
  // The callback form: it is the one whose return value is the event emitter (the promise form returns a bare promise).
  const done = new Promise<autocannon.Result>((resolve, reject) => {
    const opts: autocannon.Options = {
      url: `http://127.0.0.1:${options.port}`,
      connections: options.connections,
      // Past the window; responses after `end` are not counted, so the run just has to outlast it.
      duration: options.seconds + (options.counted === false ? 0 : 0.3),
      sampleInt: 250,
      timeout: 30,
      requests: [
        {
          method: 'POST',
          path: options.path,
          headers: { 'content-type': 'application/json' },
          setupRequest: (request) => ({ ...request, body: encoded[next++ % encoded.length] }),
        },
      ],
    };
    instance = autocannon(opts, (error, result) => (error ? reject(error) : resolve(result)));
  });
  instance.on('start', () => {
    start = performance.now();
    end = start + options.seconds * 1000;
  });
  instance.on('response', (_client, statusCode, _bytes, responseTime) => {
    if (performance.now() > end) return;
    if (statusCode >= 200 && statusCode < 300) latencies.push(responseTime);
    else non2xx += 1;
  });
  const ticker = setInterval(() => {
    if (!Number.isNaN(start)) options.onTick?.(latencies.length, (performance.now() - start) / 1000);
  }, 250);
  let result: autocannon.Result;
  try {
    result = await done;
  } finally {
    clearInterval(ticker);
  }
  latencies.sort((a, b) => a - b);
  return {
    ok: latencies.length,
    non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    seconds: options.seconds,
    itemsPerS: latencies.length / options.seconds,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    meanMs: latencies.reduce((sum, value) => sum + value, 0) / Math.max(latencies.length, 1),
  };
}
