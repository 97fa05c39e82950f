// HTTP clients for the reliability suite: one request with exact accounting of what came back (an answer, an error,
// or nothing before the deadline), raw bytes over a socket for requests no HTTP client would send, and the checks
// every error body must pass. Only 127.0.0.1 is ever contacted.
import { Agent, type IncomingHttpHeaders, request } from 'node:http';
import { connect } from 'node:net';

/** Refuses any URL that is not on this machine's loopback address: the suite sends no traffic elsewhere. */
export function assertLoopback(url: string | URL): URL {
  const parsed = new URL(url);
  if (parsed.hostname !== '127.0.0.1')
    throw new TypeError(`The reliability suite only talks to 127.0.0.1, got ${parsed.href}`);
  return parsed;
}

/** A complete response: status, headers and the whole body. */
export interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/**
 * What became of one request: answered exactly once (a complete response), failed (the connection broke before a
 * complete response), or no complete response within the deadline.
 */
export type Outcome =
  | { readonly kind: 'answered'; readonly answer: Answer; readonly ms: number }
  | { readonly kind: 'error'; readonly error: string; readonly ms: number }
  | { readonly kind: 'timeout'; readonly ms: number };

export interface SendOptions {
  readonly method?: string;
  readonly headers?: Record<string, string | number>;
  readonly body?: string | Buffer;
  /** Defaults to a fresh connection per request (`Connection: close`). */
  readonly agent?: Agent;
  /** No complete response by then counts as `timeout` (the request is then destroyed). */
  readonly timeoutMs?: number;
  /** Destroys the request after this many ms, or when `abortWhen` says so, as a client that goes away. */
  readonly abortAfterMs?: number;
  /** Called with each body chunk; returning true destroys the request right there (a client gone mid-stream). */
  readonly abortWhen?: (chunk: string) => boolean;
  /** Destroys the request when it aborts, as a client that goes away. */
  readonly signal?: AbortSignal;
  /** Called once the whole request (head and body) has been handed to the connection. */
  readonly onSent?: () => void;
  /** Called once the connection is established (the server's kernel completed the handshake). */
  readonly onConnect?: () => void;
}

/** Sends one request and accounts for exactly what came back; never rejects. */
export function send(base: string, path: string, options: SendOptions = {}): Promise<Outcome> {
  const url = new URL(path, assertLoopback(base));
  const started = performance.now();
  const elapsed = (): number => performance.now() - started;
  return new Promise<Outcome>((resolve) => {
    let settled = false;
    const timers: NodeJS.Timeout[] = [];
    const finish = (outcome: Outcome): void => {
      if (settled) return;
      settled = true;
      for (const timer of timers) clearTimeout(timer);
      resolve(outcome);
    };
    const headers: Record<string, string | number> = { ...options.headers };
    if (options.agent === undefined) headers.connection = 'close';
    const req = request(url, { method: options.method ?? 'GET', headers, agent: options.agent ?? false });
    const abort = (why: string): void => {
      req.destroy();
      finish({ kind: 'error', error: why, ms: elapsed() });
    };
    timers.push(
      setTimeout(() => {
        req.destroy();
        finish({ kind: 'timeout', ms: elapsed() });
      }, options.timeoutMs ?? 30_000),
    );
    if (options.abortAfterMs !== undefined)
      timers.push(setTimeout(() => abort('aborted by the client'), options.abortAfterMs));
    if (options.signal !== undefined) {
      const signal = options.signal;
      const onAbort = (): void => abort('aborted by the client');
      if (signal.aborted) onAbort();
      else {
        signal.addEventListener('abort', onAbort, { once: true });
        req.once('close', () => signal.removeEventListener('abort', onAbort));
      }
    }
    req.on('error', (error: NodeJS.ErrnoException) =>
      finish({ kind: 'error', error: error.code ?? error.message, ms: elapsed() }),
    );
    req.on('response', (res) => {
      const chunks: string[] = [];
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        chunks.push(chunk);
        if (options.abortWhen?.(chunk) === true) abort('aborted by the client mid-body');
      });
      // A body cut short (the server destroyed the socket) emits `aborted`/`error` and never `end`.
      res.on('error', (error: NodeJS.ErrnoException) =>
        finish({ kind: 'error', error: error.code ?? error.message, ms: elapsed() }),
      );
      res.on('aborted', () => finish({ kind: 'error', error: 'response aborted', ms: elapsed() }));
      res.on('end', () => {
        if (!res.complete) {
          finish({ kind: 'error', error: 'incomplete response', ms: elapsed() });
          return;
        }
        finish({
          kind: 'answered',
          answer: { status: res.statusCode ?? 0, headers: res.headers, body: chunks.join('') },
          ms: elapsed(),
        });
      });
    });
    if (options.onSent !== undefined) req.once('finish', options.onSent);
    const { onConnect } = options;
    if (onConnect !== undefined) {
      req.once('socket', (socket) => {
        if (socket.connecting) socket.once('connect', onConnect);
        else onConnect();
      });
    }
    req.end(options.body);
  });
}

/** `send` for a request that must be answered: throws (with what happened) otherwise. */
export async function answer(base: string, path: string, options: SendOptions = {}): Promise<Answer> {
  const outcome = await send(base, path, options);
  if (outcome.kind !== 'answered') {
    throw new Error(
      `${options.method ?? 'GET'} ${path}: no answer (${outcome.kind === 'error' ? outcome.error : 'timeout'})`,
    );
  }
  return outcome.answer;
}

/** POSTs `body` as JSON (already-serialised strings and buffers are sent as they are). */
export function postJson(base: string, path: string, body: unknown, options: SendOptions = {}): Promise<Outcome> {
  const payload = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  return send(base, path, {
    ...options,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...options.headers },
    body: payload,
  });
}

/** A keep-alive agent for many requests on few connections. */
export function keepAliveAgent(maxSockets: number): Agent {
  return new Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets });
}

/** A response read from a raw socket: the status (0 if none), the head as text, and the body. */
export interface RawAnswer {
  readonly status: number;
  readonly head: string;
  readonly body: string;
  /** The connection ended or failed before anything came back. */
  readonly empty: boolean;
}

/**
 * Writes `bytes` to a fresh connection (as a client that speaks broken HTTP would) and reads until the server closes
 * it or `timeoutMs` passes. Handles `Content-Length` and chunked bodies well enough for error responses.
 */
export function sendRaw(base: string, bytes: Buffer | string, timeoutMs = 10_000): Promise<RawAnswer> {
  const { hostname, port } = assertLoopback(base);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(parseRaw(Buffer.concat(chunks)));
    };
    const timer = setTimeout(finish, timeoutMs);
    socket.on('connect', () => socket.end(bytes));
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      // A keep-alive answer does not close the socket: stop once the whole response is in.
      if (responseComplete(Buffer.concat(chunks))) finish();
    });
    socket.on('error', finish);
    socket.on('close', finish);
  });
}

function splitHead(data: Buffer): { head: string; body: Buffer } | undefined {
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  return { head: data.subarray(0, end).toString('latin1'), body: data.subarray(end + 4) };
}

function headerOf(head: string, name: string): string | undefined {
  const match = new RegExp(`^${name}:\\s*(.*)$`, 'im').exec(head);
  return match?.[1]?.trim();
}

function responseComplete(data: Buffer): boolean {
  const parts = splitHead(data);
  if (parts === undefined) return false;
  const length = headerOf(parts.head, 'content-length');
  if (length !== undefined) return parts.body.length >= Number(length);
  if (/chunked/i.test(headerOf(parts.head, 'transfer-encoding') ?? '')) return parts.body.includes('0\r\n\r\n');
  return false;
}

function parseRaw(data: Buffer): RawAnswer {
  const parts = splitHead(data);
  if (parts === undefined) return { status: 0, head: data.toString('latin1'), body: '', empty: data.length === 0 };
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(parts.head)?.[1] ?? 0);
  let body = parts.body;
  if (/chunked/i.test(headerOf(parts.head, 'transfer-encoding') ?? '')) {
    const pieces: Buffer[] = [];
    let rest = body;
    for (;;) {
      const lineEnd = rest.indexOf('\r\n');
      if (lineEnd < 0) break;
      const size = Number.parseInt(rest.subarray(0, lineEnd).toString('latin1'), 16);
      if (!(size > 0)) break;
      pieces.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      rest = rest.subarray(lineEnd + 2 + size + 2);
    }
    body = Buffer.concat(pieces);
  }
  return { status, head: parts.head, body: body.toString('utf8'), empty: false };
}

/** Signs of a leaked stack trace or internals in a body sent to a client. */
const LEAK =
  /\n\s+at\s|\bat [\w$.<>]+ \(|node:internal|node_modules|\/src\/[\w-]+\.ts|\.ts:\d+|\.js:\d+:\d+|"stack"\s*:/;

/** Whether `body` carries something that looks like a stack trace or a source path. */
export function leaksInternals(body: string): boolean {
  return LEAK.test(body);
}

/** The error body every microbatch route sends, if `body` is exactly that shape; `undefined` otherwise. */
export function errorBody(body: string): { code: string; message: string; details?: unknown } | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const keys = Object.keys(parsed);
  if (keys.length !== 1 || keys[0] !== 'error') return undefined;
  const error = (parsed as { error: unknown }).error;
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code !== 'string' || !/^[A-Z_]+$/.test(code) || typeof message !== 'string' || message === '')
    return undefined;
  // The OpenAI endpoints (chat, embeddings) add OpenAI's `type` and `param` beside them.
  const extra = Object.keys(error).filter(
    (key) => !['code', 'message', 'details', 'retryAfterSeconds', 'type', 'param'].includes(key),
  );
  return extra.length === 0 ? (error as { code: string; message: string; details?: unknown }) : undefined;
}

/** `Retry-After` as a whole number of seconds >= 1, or `undefined` when absent or malformed. */
export function retryAfterSeconds(headers: IncomingHttpHeaders): number | undefined {
  const value = headers['retry-after'];
  if (typeof value !== 'string' || !/^\d+$/.test(value)) return undefined;
  const seconds = Number(value);
  return seconds >= 1 ? seconds : undefined;
}
