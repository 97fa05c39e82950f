// Helpers of the adapter tests beyond the shared test kit: deterministic handler gates, response and process error
// recorders, README examples as modules.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { inspect } from 'node:util';
import { type Deferred, deferred } from '@microbatch/test-kit';

/**
 * A batch handler the test drives: it records every batch it receives and holds each one until the test calls
 * `release()`, so "handler busy" windows are exact, not timed.
 */
export class GatedHandler<I, O> {
  readonly batches: I[][] = [];
  readonly signals: AbortSignal[] = [];
  readonly #compute: (input: I) => O | Error;
  readonly #gates: Deferred<void>[] = [];
  #released = 0;

  constructor(compute: (input: I) => O | Error) {
    this.#compute = compute;
  }

  readonly handler = async (inputs: I[], { signal }: { signal: AbortSignal }): Promise<Array<O | Error>> => {
    const gate = deferred();
    this.batches.push(inputs);
    this.signals.push(signal);
    this.#gates.push(gate);
    if (this.#released >= this.#gates.length) gate.resolve();
    await gate.promise;
    return inputs.map((input) => this.#compute(input));
  };

  /** Lets the next held batch (or, with `all`, every present and future batch) return. */
  release(all = false): void {
    if (all) this.#released = Number.POSITIVE_INFINITY;
    else this.#released += 1;
    this.#gates.forEach((gate, index) => {
      if (index < this.#released) gate.resolve();
    });
  }

  get sizes(): number[] {
    return this.batches.map((batch) => batch.length);
  }

  get inputs(): I[] {
    return this.batches.flat();
  }
}

/**
 * Records every response a server sends: its `close` listener count before the adapter ran (to find leaked
 * listeners), and every attempt to write body data after the response ended or its connection closed.
 */
export class ResponseRecorder {
  readonly entries: Array<{ res: ServerResponse; closeListeners: number }> = [];
  readonly writesAfterEnd: string[] = [];

  record(res: ServerResponse): void {
    this.entries.push({ res, closeListeners: res.listenerCount('close') });
    const write = res.write.bind(res) as (...args: unknown[]) => boolean;
    const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
    const check = (method: string, chunk: unknown) => {
      const hasData = chunk !== undefined && typeof chunk !== 'function';
      if (hasData && (res.writableEnded || res.destroyed)) this.writesAfterEnd.push(`${method}(${inspect(chunk)})`);
    };
    res.write = ((...args: unknown[]) => {
      check('write', args[0]);
      return write(...args);
    }) as ServerResponse['write'];
    res.end = ((...args: unknown[]) => {
      check('end', args[0]);
      return end(...args);
    }) as ServerResponse['end'];
  }

  /** Responses holding more `close` listeners now than before the adapter ran. */
  leaked(): number {
    return this.entries.filter(({ res, closeListeners }) => res.listenerCount('close') > closeListeners).length;
  }
}

/** Collects `unhandledRejection` and `uncaughtException` events while installed. */
export class ProcessErrorSpy {
  readonly errors: unknown[] = [];
  readonly #onError = (error: unknown): void => {
    this.errors.push(error);
  };

  install(): void {
    process.on('unhandledRejection', this.#onError);
    process.on('uncaughtException', this.#onError);
  }

  uninstall(): void {
    process.off('unhandledRejection', this.#onError);
    process.off('uncaughtException', this.#onError);
  }
}

const testRoot = fileURLToPath(new URL('..', import.meta.url));
const repoRoot = join(testRoot, '..');

/** The first ```ts code block of a Markdown file. */
export async function readmeCodeBlock(readmePath: string): Promise<string> {
  const markdown = await readFile(readmePath, 'utf8');
  const match = /```ts\n([\s\S]*?)```/.exec(markdown);
  if (match?.[1] === undefined) throw new Error(`${readmePath} has no \`\`\`ts code block`);
  return match[1];
}

/** A README example written out as a module file in its own temporary folder. */
export interface ExampleModule {
  readonly file: string;
  /** Imports the file (bare imports resolve like a user's would, `@microbatch/*` through vitest's aliases). */
  load<M>(): Promise<M>;
  /** Type-checks the file with the repository's compiler options; resolves to tsc's diagnostics ('' when clean). */
  typecheck(): Promise<string>;
  cleanup(): Promise<void>;
}

/**
 * Writes `code`, exactly as given, to a temporary folder whose `node_modules` links to the test package's, so it
 * can be imported and type-checked without leaving files in the repository.
 */
export async function writeExampleModule(code: string, name: string): Promise<ExampleModule> {
  const folder = await mkdtemp(join(tmpdir(), 'microbatch-readme-'));
  await symlink(join(testRoot, 'node_modules'), join(folder, 'node_modules'), 'dir');
  const file = join(folder, name);
  await writeFile(file, code);
  return {
    file,
    load: async <M>() => (await import(/* @vite-ignore */ pathToFileURL(file).href)) as M,
    typecheck: async () => {
      const config = {
        extends: join(repoRoot, 'tsconfig.json'),
        compilerOptions: { typeRoots: [join(repoRoot, 'node_modules', '@types')] },
        include: [file],
      };
      await writeFile(join(folder, 'tsconfig.json'), JSON.stringify(config));
      const tsc = join(repoRoot, 'node_modules', '.bin', 'tsc');
      return new Promise<string>((resolve) => {
        execFile(tsc, ['-p', join(folder, 'tsconfig.json'), '--noEmit'], (_error, stdout, stderr) =>
          resolve(`${stdout}${stderr}`),
        );
      });
    },
    cleanup: () => rm(folder, { recursive: true, force: true }),
  };
}

/** The message `JSON.parse` gives for `text` (what body parsers report for malformed JSON on this Node version). */
export function jsonParseMessage(text: string): string {
  try {
    JSON.parse(text);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error(`${text} is valid JSON`);
}
