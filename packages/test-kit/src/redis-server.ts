// A throwaway redis-server for tests: its own free port, no persistence unless asked (then an AOF in a folder of its
// own), never the shared 127.0.0.1:6379.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port.js';

/** A redis-server this test started. */
export interface TestRedis {
  readonly port: number;
  readonly url: string;
  /** Whether it keeps an append-only file, so that a restart brings its data back. */
  readonly appendOnly: boolean;
  /** Kills it (SIGKILL: Redis "crashes"); its data is gone unless it keeps an AOF. */
  kill(): Promise<void>;
  /** Starts it again on the same port: empty, or with the data of its AOF. */
  restart(): Promise<void>;
  /** Kills it and removes its AOF folder, if any. */
  stop(): Promise<void>;
}

/** Options of {@link startRedisServer}. */
export interface TestRedisOptions {
  /**
   * Keep an append-only file (`appendfsync always`: every write is on disk before its reply) in a temporary folder,
   * so that a server killed and restarted comes back with every acknowledged write, as a persistent Redis would.
   * @default false
   */
  readonly appendOnly?: boolean;
}

const running = new Set<ChildProcess>();
// A test run that dies must not leave Redis servers behind.
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

async function spawnRedis(port: number, dir: string | undefined): Promise<ChildProcess> {
  const persistence =
    dir === undefined ? ['--appendonly', 'no'] : ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', dir];
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', ...persistence], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) {
        child.stdout?.off('data', onData);
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`redis-server exited (${code}) before it was ready:\n${output}`)));
  });
  child.removeAllListeners('exit');
  // Keep reading its log, so a full pipe never blocks it.
  child.stdout?.resume();
  child.stderr?.resume();
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/**
 * Starts `redis-server` (the Debian package's binary) on a free port of 127.0.0.1, without persistence unless
 * `appendOnly` (an AOF in a temporary folder of its own): tests and benchmarks never touch a shared instance's data.
 *
 * @example
 * ```ts
 * const redis = await startRedisServer();
 * const queue = createRedisQueue({ url: redis.url, queue: 'test' });
 * await redis.kill(); // Redis "crashes"; await redis.restart() brings it back empty
 * const durable = await startRedisServer({ appendOnly: true }); // its restart() brings its data back
 * ```
 */
export async function startRedisServer(options: TestRedisOptions = {}): Promise<TestRedis> {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`Expected \`options\` to be an object, got ${options === null ? 'null' : typeof options}`);
  }
  const appendOnly = options.appendOnly ?? false;
  if (typeof appendOnly !== 'boolean') {
    throw new TypeError(`Expected \`appendOnly\` to be a boolean, got ${typeof appendOnly}`);
  }
  const port = await freePort();
  const dir = appendOnly ? mkdtempSync(join(tmpdir(), 'microbatch-redis-')) : undefined;
  let child = await spawnRedis(port, dir);
  const kill = async (): Promise<void> => {
    child.kill('SIGKILL');
    await exited(child);
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    appendOnly,
    kill,
    restart: async () => {
      child = await spawnRedis(port, dir);
    },
    stop: async () => {
      await kill();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
}
