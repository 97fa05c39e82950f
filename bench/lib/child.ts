// Bench servers and the offline runner are separate processes started with tsx from the repository root (so the
// root tsconfig resolves @microbatch/* to the package sources; the inference worker runs from its built dist).
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { REPO_ROOT } from './paths.js';

export interface Child {
  readonly process: ChildProcess;
  /** Resolves with the first stdout line that parses as JSON and satisfies `accept`. */
  nextJson<T>(accept: (value: unknown) => boolean, timeoutMs: number): Promise<T>;
  /** Every JSON line the child printed so far. */
  values(): readonly unknown[];
  /** Everything the child wrote to stderr (for error messages). */
  stderr(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
  stop(graceMs?: number): Promise<void>;
  readonly exited: Promise<number | null>;
}

/**
 * Starts `script` under tsx. `BENCH_NODE_ARGS` adds Node flags to every child, e.g. `--cpu-prof --cpu-prof-dir=prof`
 * to profile the servers (Node refuses profiling flags in NODE_OPTIONS).
 */
export function startChild(script: string, args: readonly string[], env: Readonly<Record<string, string>>): Child {
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter((arg) => arg !== '');
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script, ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-20_000);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const values: unknown[] = [];
  const waiting: Array<{ accept: (value: unknown) => boolean; resolve: (value: unknown) => void }> = [];
  createInterface({ input: child.stdout as NonNullable<typeof child.stdout> }).on('line', (line) => {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      return; // not a protocol line (a library's log output)
    }
    values.push(value);
    const index = waiting.findIndex((waiter) => waiter.accept(value));
    if (index >= 0) waiting.splice(index, 1)[0]?.resolve(value);
  });
  return {
    process: child,
    exited,
    stderr: () => stderr,
    values: () => values,
    nextJson<T>(accept: (value: unknown) => boolean, timeoutMs: number): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${script}: no answer within ${timeoutMs} ms\n${stderr}`)), timeoutMs);
        const waiter = {
          accept,
          resolve: (value: unknown) => {
            clearTimeout(timer);
            resolve(value as T);
          },
        };
        waiting.push(waiter);
        void exited.then((code) => {
          clearTimeout(timer);
          reject(new Error(`${script} exited (code ${code}) before answering\n${stderr}`));
        });
      });
    },
    async stop(graceMs = 5_000): Promise<void> {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}
