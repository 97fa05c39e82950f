// Servers under test run as child processes, exactly as an operator starts them, so a crash, a hang or a leak is
// the server's own and not hidden by the test runner's process. Every wait here is bounded.
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  type ExitInfo,
  type ServerProcess as KitServerProcess,
  startProcess,
  startServerProcess,
} from '@microbatch/test-kit';
import { assertLoopback } from './http.js';

/** The repository root. */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** How a child process ended. */
export type { ExitInfo } from '@microbatch/test-kit';

/** A server started as a child process (the test kit's), with its resident memory. */
export interface ServerProcess extends KitServerProcess {
  /** Its resident memory from /proc, in bytes; `undefined` where /proc is not available or it has exited. */
  rssBytes(): number | undefined;
}

export interface StartOptions {
  /** Arguments after `node` (for example `['--import', 'tsx', 'path/to/main.ts']`). */
  readonly args: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  /** Resolve once this line is printed (its first group is the URL): `ready` (model loaded) or `listening`. */
  readonly until?: 'ready' | 'listening';
  /** Longest wait for that line. */
  readonly timeoutMs?: number;
}

/**
 * The documented start command of the Express text-completion example: the root `start` script, which is
 * `node --import tsx examples/express-text-completion/src/main.ts`. Run with this Node directly (not through pnpm),
 * so the child's pid is the server's own (its RSS is the server's, and SIGTERM reaches it).
 */
export function exampleStartArgs(): string[] {
  const manifest = JSON.parse(readFileSync(new URL('package.json', `file://${REPO_ROOT}`), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const words = (manifest.scripts.start ?? '').trim().split(/\s+/);
  if (words[0] !== 'node' || !words.some((word) => word.includes('express-text-completion'))) {
    throw new Error(
      `The root \`start\` script is no longer \`node ... express-text-completion ...\`: ${manifest.scripts.start}`,
    );
  }
  return words.slice(1);
}

/** Starts a server process and waits (bounded) until it prints `listening on URL` / `ready: URL`. */
export async function startServer(options: StartOptions): Promise<ServerProcess> {
  const server = await startServerProcess({
    args: options.args,
    cwd: options.cwd ?? REPO_ROOT,
    env: childEnv(options.env),
    ready: options.until === 'listening' ? /^listening on (http:\S+)$/m : /^ready: (http:\S+)$/m,
    readyTimeoutMs: options.timeoutMs ?? 90_000,
  });
  assertLoopback(server.url);
  return { ...server, rssBytes: () => (server.exitInfo() === undefined ? readRss(server.pid) : undefined) };
}

/** Runs a process to its end (bounded: killed after `timeoutMs`) and returns how it ended and what it printed. */
export async function runToExit(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<{ exit: ExitInfo; output: string; stderr: string; ms: number; killed: boolean }> {
  const started = performance.now();
  const run = startProcess({ args, cwd: REPO_ROOT, env: childEnv(env) });
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    run.child.kill('SIGKILL');
  }, timeoutMs);
  const exit = await run.exited;
  clearTimeout(timer);
  return { exit, output: run.output(), stderr: run.stderr(), ms: performance.now() - started, killed };
}

/**
 * The environment of a server under test: this one without what the test runner adds (`NODE_ENV=test`, `VITEST*`),
 * so the server runs as `pnpm start` runs it from a shell, on 127.0.0.1 and a free port unless `extra` says otherwise.
 */
function childEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env))
    if (name === 'NODE_ENV' || name === 'TEST' || name.startsWith('VITEST')) delete env[name];
  return { ...env, HOST: '127.0.0.1', PORT: '0', ...extra };
}

/** Resident set size of a process from /proc/<pid>/status (Linux), in bytes. */
export function readRss(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status)?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

export { pollUntil } from '@microbatch/test-kit';

/** CPU time (ms) a process has used so far, split into its main thread and all its other threads (Linux /proc). */
export function readCpu(pid: number): { main: number; others: number } | undefined {
  try {
    const tick = 10; // USER_HZ is 100 on every Linux Node supports: one tick is 10 ms
    let main = 0;
    let others = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      // Fields after the command name, which is in parentheses and may contain spaces: utime and stime are 14 and 15.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ms = (Number(fields[11]) + Number(fields[12])) * tick;
      if (tid === String(pid)) main += ms;
      else others += ms;
    }
    return { main, others };
  } catch {
    return undefined;
  }
}
