// Bench servers and the offline runner are separate processes started with tsx from the repository root (so the
// root tsconfig resolves @microbatch/* to the package sources; the inference worker runs from its built dist).
import type { ChildProcess } from 'node:child_process';
import { startProcess } from '@microbatch/test-kit';
import { REPO_ROOT } from './paths.js';

export interface Child {
  readonly process: ChildProcess;
  /** Resolves with the first stdout line that parses as JSON and satisfies `accept`. */
  nextJson<T>(accept: (value: unknown) => boolean, timeoutMs: number): Promise<T>;
  /** Every JSON line the child printed so far. */
  values(): readonly unknown[];
  /** The last 20,000 characters the child wrote to stderr (for error messages). */
  stderr(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
  stop(graceMs?: number): Promise<void>;
  readonly exited: Promise<number | null>;
}

/**
 * Starts `script` under tsx (the test kit's process starter). `BENCH_NODE_ARGS` adds Node flags to every child,
 * e.g. `--cpu-prof --cpu-prof-dir=prof` to profile the servers (Node refuses profiling flags in NODE_OPTIONS).
 */
export function startChild(script: string, args: readonly string[], env: Readonly<Record<string, string>>): Child {
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter((arg) => arg !== '');
  const child = startProcess({
    args: [...nodeArgs, '--import', 'tsx', script, ...args],
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stderrTailChars: 20_000,
  });
  return {
    process: child.child,
    exited: child.exited.then(({ code }) => code),
    stderr: child.stderr,
    values: child.jsonLines,
    nextJson: (accept, timeoutMs) => child.nextJson(accept, timeoutMs),
    stop: async (graceMs = 5_000) => {
      await child.stop(graceMs);
    },
  };
}
