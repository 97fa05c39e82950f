// A throwaway `nats-server -js` for tests: its own free port and store folder, never the shared 127.0.0.1:4222.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { freePort } from './free-port.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A nats-server (JetStream on) this test started. */
export interface TestNats {
  readonly port: number;
  readonly url: string;
  /** Kills it (SIGKILL: NATS "crashes"); its store folder stays. */
  kill(): Promise<void>;
  /** Starts it again on the same port and store: file-stored streams come back. */
  restart(): Promise<void>;
  /** Kills it and removes its store. */
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
// A test run that dies must not leave NATS servers behind.
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** Debian's package puts the binary in /usr/sbin, which is not on every user's PATH. */
const BINARY = process.env.NATS_SERVER ?? 'nats-server';
const PATH = `${process.env.PATH ?? ''}:/usr/sbin:/usr/local/sbin`;

async function spawnNats(port: number, store: string): Promise<ChildProcess> {
  const child = spawn(BINARY, ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', store], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PATH },
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      if (output.includes('Server is ready')) {
        child.stderr?.off('data', onData);
        resolve();
      }
    };
    child.stderr?.on('data', onData);
    child.stdout?.on('data', onData);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`nats-server exited (${code}) before it was ready:\n${output}`)));
  });
  child.removeAllListeners('exit');
  // Keep reading its log, so a full pipe never blocks it.
  child.stderr?.resume();
  child.stdout?.resume();
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/**
 * Starts `nats-server -js` (the Debian package's binary) on a free port of 127.0.0.1, with a store folder of its
 * own: tests and benchmarks never touch a shared instance's streams.
 *
 * @example
 * ```ts
 * const nats = await startNatsServer();
 * const queue = createNatsQueue({ url: nats.url, queue: 'test' });
 * await nats.kill(); // NATS "crashes"; await nats.restart() brings it back with its streams
 * ```
 */
export async function startNatsServer(): Promise<TestNats> {
  const port = await freePort();
  const store = mkdtempSync(join(tmpdir(), 'microbatch-nats-'));
  let child = await spawnNats(port, store);
  const kill = async (): Promise<void> => {
    child.kill('SIGKILL');
    await exited(child);
  };
  return {
    port,
    url: `nats://127.0.0.1:${port}`,
    kill,
    restart: async () => {
      child = await spawnNats(port, store);
    },
    stop: async () => {
      await kill();
      rmSync(store, { recursive: true, force: true });
    },
  };
}
