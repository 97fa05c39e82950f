// One way to run a server (or a benchmark runner) as a child process, exactly as an operator starts it, so a crash,
// a hang or a leak is its own and not hidden by the test runner's process. Every wait here is bounded.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

/** How a child process ended. */
export interface ExitInfo {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** What {@link startProcess} runs. */
export interface ProcessOptions {
  /** Arguments after `node` (for example `['--import', 'tsx', 'src/main.ts']`). */
  readonly args: readonly string[];
  /**
   * The working directory.
   * @default process.cwd()
   */
  readonly cwd?: string;
  /**
   * The whole environment of the child.
   * @default process.env
   */
  readonly env?: NodeJS.ProcessEnv;
  /**
   * Keep only the last this many characters of stderr (a long benchmark's logs); `output()` is kept whole.
   * @default Infinity
   */
  readonly stderrTailChars?: number;
}

/** A running child process and what it printed; its functions are closures, safe to pass unbound. */
export interface ChildHandle {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Everything printed on stdout and stderr so far, interleaved as it arrived. */
  readonly output: () => string;
  /** What it printed on stderr so far. */
  readonly stderr: () => string;
  /** Every stdout line that parsed as JSON so far. */
  readonly jsonLines: () => readonly unknown[];
  /** How it ended, once it has. */
  readonly exitInfo: () => ExitInfo | undefined;
  readonly exited: Promise<ExitInfo>;
  /**
   * Resolves with the first match of `pattern` in stdout (already printed or to come); rejects if the process exits
   * first or `timeoutMs` passes.
   */
  readonly waitForOutput: (pattern: RegExp, timeoutMs: number) => Promise<RegExpExecArray>;
  /** Resolves with the first stdout JSON line, from now on, that satisfies `accept`; bounded like `waitForOutput`. */
  readonly nextJson: <T>(accept: (value: unknown) => boolean, timeoutMs: number) => Promise<T>;
  /** SIGTERM, then SIGKILL if it has not exited after `graceMs`; resolves with how it ended. */
  readonly stop: (graceMs?: number) => Promise<ExitInfo>;
}

const running = new Set<ChildProcess>();
// A test run that dies or times out must not leave servers behind.
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

// What an error message quotes of the output.
const MESSAGE_TAIL_CHARS = 20_000;

/**
 * Runs `node <args>` with this Node binary (not through a package manager, so the pid is the program's own: its RSS
 * is the server's, and SIGTERM reaches it). Both pipes are always read to the end: a child blocked on a full pipe
 * would look hung.
 *
 * @example
 * ```ts
 * const server = startProcess({ args: ['--import', 'tsx', 'src/main.ts'], env: { ...process.env, PORT: '0' } });
 * const [, url] = await server.waitForOutput(/^ready: (http:\S+)$/m, 60_000);
 * await server.stop();
 * ```
 */
export function startProcess(options: ProcessOptions): ChildHandle {
  const child = spawn(process.execPath, [...options.args], {
    cwd: options.cwd ?? process.cwd(),
    env: options.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  const tail = options.stderrTailChars ?? Number.POSITIVE_INFINITY;
  let output = '';
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
    stdout += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
    stderr += chunk;
    if (stderr.length > tail) stderr = stderr.slice(-tail);
  });
  const jsonLines: unknown[] = [];
  const jsonWaiters: Array<{ accept: (value: unknown) => boolean; resolve: (value: unknown) => void }> = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      return; // not a protocol line (a library's log output)
    }
    jsonLines.push(value);
    const index = jsonWaiters.findIndex((waiter) => waiter.accept(value));
    if (index >= 0) jsonWaiters.splice(index, 1)[0]?.resolve(value);
  });
  let exit: ExitInfo | undefined;
  const exited = new Promise<ExitInfo>((resolve) => {
    child.once('exit', (code, signal) => {
      running.delete(child);
      exit = { code, signal };
      resolve(exit);
    });
  });
  const describeExit = (): string => `exited (${JSON.stringify(exit)})`;

  /** Waits (bounded) for `found()` to give a value, re-checking on every stdout chunk. */
  function waitUntil<T>(
    what: string,
    found: () => T | undefined,
    timeoutMs: number,
    subscribe?: (check: () => void) => () => void,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const cleanups: Array<() => void> = [];
      const finish = (settle: () => void): void => {
        for (const cleanup of cleanups) cleanup();
        settle();
      };
      const check = (): void => {
        const value = found();
        if (value !== undefined) finish(() => resolve(value));
      };
      const timer = setTimeout(
        () =>
          finish(() => reject(new Error(`No ${what} within ${timeoutMs} ms:\n${output.slice(-MESSAGE_TAIL_CHARS)}`))),
        timeoutMs,
      );
      cleanups.push(() => clearTimeout(timer));
      const onExit = (): void =>
        finish(() =>
          reject(new Error(`The process ${describeExit()} before ${what}:\n${output.slice(-MESSAGE_TAIL_CHARS)}`)),
        );
      child.once('exit', onExit);
      cleanups.push(() => child.off('exit', onExit));
      if (subscribe === undefined) {
        child.stdout?.on('data', check);
        cleanups.push(() => child.stdout?.off('data', check));
      } else {
        cleanups.push(subscribe(check));
      }
      check();
      if (exit !== undefined) onExit();
    });
  }

  return {
    child,
    pid: child.pid as number,
    output: () => output,
    stderr: () => stderr,
    jsonLines: () => jsonLines,
    exitInfo: () => exit,
    exited,
    waitForOutput: (pattern, timeoutMs) => {
      // A global or sticky pattern would remember `lastIndex` between checks.
      const once = new RegExp(pattern.source, pattern.flags.replace(/[gy]/g, ''));
      return waitUntil(`output matching ${pattern}`, () => once.exec(stdout) ?? undefined, timeoutMs);
    },
    nextJson: <T>(accept: (value: unknown) => boolean, timeoutMs: number) => {
      let value: { found: unknown } | undefined;
      return waitUntil<T>(
        'an expected JSON line',
        () => (value === undefined ? undefined : (value.found as T)),
        timeoutMs,
        (check) => {
          const waiter = {
            accept,
            resolve: (found: unknown) => {
              value = { found };
              check();
            },
          };
          jsonWaiters.push(waiter);
          return () => {
            const index = jsonWaiters.indexOf(waiter);
            if (index >= 0) jsonWaiters.splice(index, 1);
          };
        },
      );
    },
    stop: async (graceMs = 15_000) => {
      if (exit !== undefined) return exit;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** A server started as a child process, once it printed its URL. */
export interface ServerProcess extends ChildHandle {
  /** The URL of its ready line. */
  readonly url: string;
}

/** What {@link startServerProcess} runs and waits for. */
export interface ServerProcessOptions extends ProcessOptions {
  /**
   * The line that says the server is ready; its first group is the URL.
   * @default /^ready: (http:\S+)$/m
   */
  readonly ready?: RegExp;
  /**
   * The longest wait for that line; the process is killed if it does not come.
   * @default 90_000
   */
  readonly readyTimeoutMs?: number;
}

/**
 * Starts a server as a child process and waits (bounded) for its ready line; a server that exits or stays silent
 * is reported with what it printed.
 *
 * @example
 * ```ts
 * const server = await startServerProcess({ args: ['--import', 'tsx', 'src/main.ts'], env: { ...process.env, PORT: '0' } });
 * await fetch(`${server.url}/healthz`);
 * await server.stop();
 * ```
 */
export async function startServerProcess(options: ServerProcessOptions): Promise<ServerProcess> {
  const handle = startProcess(options);
  try {
    const match = await handle.waitForOutput(options.ready ?? /^ready: (http:\S+)$/m, options.readyTimeoutMs ?? 90_000);
    const url = match[1];
    if (url === undefined) throw new Error(`The ready pattern ${String(options.ready)} has no group for the URL`);
    return { ...handle, url };
  } catch (error) {
    handle.child.kill('SIGKILL');
    throw error;
  }
}
