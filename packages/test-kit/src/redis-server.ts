// A throwaway redis-server for tests: its own free port, no persistence, never the shared 127.0.0.1:6379.
import { type ChildProcess, spawn } from 'node:child_process';
import { freePort } from './free-port.js';

/** A redis-server this test started. */
export interface TestRedis {
  readonly port: number;
  readonly url: string;
  /** Kills it (SIGKILL: Redis "crashes"); its data is gone. */
  kill(): Promise<void>;
  /** Starts it again on the same port, empty. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
// A test run that dies must not leave Redis servers behind.
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

async function spawnRedis(port: number): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
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
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/**
 * Starts `redis-server` (the Debian package's binary) on a free port of 127.0.0.1, without persistence: tests and
 * benchmarks never touch a shared instance's data.
 *
 * @example
 * ```ts
 * const redis = await startRedisServer();
 * const queue = createRedisQueue({ url: redis.url, queue: 'test' });
 * await redis.kill(); // Redis "crashes"; await redis.restart() brings it back empty
 * ```
 */
export async function startRedisServer(): Promise<TestRedis> {
  const port = await freePort();
  let child = await spawnRedis(port);
  const kill = async (): Promise<void> => {
    child.kill('SIGKILL');
    await exited(child);
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    kill,
    restart: async () => {
      child = await spawnRedis(port);
    },
    stop: kill,
  };
}
