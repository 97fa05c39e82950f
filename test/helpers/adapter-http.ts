// Helpers shared by the Express and Koa adapter tests: real servers, deterministic handler gates, SSE reading.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { type RequestListener, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createParser } from 'eventsource-parser';

/** A promise with its resolve/reject exposed. */
export interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Polls `condition` until it holds; fails with `what` if it never does (a hang, not a timing assertion). */
export async function waitFor(what: string, condition: () => boolean, limitMs = 5_000): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > limitMs) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** A server listening on 127.0.0.1 on a free port. */
export interface TestServer {
  readonly url: string;
  readonly server: Server;
  close(): Promise<void>;
}

export async function listen(listener: RequestListener): Promise<TestServer> {
  const server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, server, close: () => closeServer(server) };
}

export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.closeAllConnections();
    server.close((error) => (error === undefined ? resolve() : reject(error)));
  });
}

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

/** One parsed Server-Sent Event. */
export interface SseMessage {
  readonly event: string | undefined;
  readonly data: string;
}

/**
 * Reads a `fetch` response as Server-Sent Events (parsed by `eventsource-parser`) until it ends; `onMessage` sees
 * each event as it arrives, and returning `false` stops reading (the caller then aborts the request).
 */
export async function readSse(
  response: Response,
  onMessage: (message: SseMessage, index: number) => boolean | void | Promise<boolean | void> = () => undefined,
): Promise<SseMessage[]> {
  const messages: SseMessage[] = [];
  const parser = createParser({ onEvent: (event) => messages.push({ event: event.event, data: event.data }) });
  const body = response.body;
  if (body === null) throw new Error('The response has no body');
  const decoder = new TextDecoder();
  let seen = 0;
  for await (const chunk of body) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    while (seen < messages.length) {
      const keepReading = await onMessage(messages[seen] as SseMessage, seen);
      seen += 1;
      if (keepReading === false) return messages;
    }
  }
  return messages;
}

/** The values of `data:` events, JSON-decoded, and whether the stream ended with `[DONE]`. */
export function sseValues(messages: readonly SseMessage[]): { values: unknown[]; done: boolean } {
  const last = messages.at(-1);
  const done = last?.event === undefined && last?.data === '[DONE]';
  const payload = done ? messages.slice(0, -1) : messages;
  return { values: payload.map((message) => JSON.parse(message.data) as unknown), done };
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
      if (hasData && (res.writableEnded || res.destroyed)) this.writesAfterEnd.push(`${method}(${String(chunk)})`);
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
        execFile(tsc, ['-p', join(folder, 'tsconfig.json'), '--noEmit'], (_error, stdout, stderr) => resolve(`${stdout}${stderr}`));
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
