// Test helpers for the examples: a server started as a child process (as `pnpm start` would), and HTTP requests
// over pre-opened keep-alive connections, so that stopping the listener cannot refuse them.
import type { ChildProcess } from 'node:child_process';
import { Agent, type RequestListener, request } from 'node:http';
import { listen, serverUrl } from '@microbatch/serving';
import { startServerProcess } from '@microbatch/test-kit';

/** A server process started with `node <args>`, and what it printed. */
export interface ChildServer {
  readonly child: ChildProcess;
  /** The URL from its `ready: ...` line. */
  readonly url: string;
  /** Everything printed on stdout and stderr so far. */
  output(): string;
  /** Resolves with the exit code (a signal name if it was killed). */
  readonly exited: Promise<number | string>;
}

/** Runs `node <args>` in `cwd` (PORT=0) and waits for its `ready: <url>` line (the test kit's process starter). */
export async function startChild(
  cwd: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): Promise<ChildServer> {
  const server = await startServerProcess({ args, cwd, env: { ...process.env, PORT: '0', ...env } });
  const exited = server.exited.then(({ code, signal }) => code ?? signal ?? 'unknown');
  return { child: server.child, url: server.url, output: server.output, exited };
}

/** A response read to its end. */
export interface TextResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** An HTTP client whose connections are opened (and accepted by the server) before the requests that matter. */
export interface WarmClient {
  send(method: string, path: string, body?: unknown, onData?: (chunk: string) => void): Promise<TextResponse>;
  close(): void;
}

/** Opens `connections` keep-alive connections to `url` (with `GET /healthz`) and returns a client that reuses them. */
export async function warmClient(url: string, connections: number): Promise<WarmClient> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const send: WarmClient['send'] = (method, path, body, onData) =>
    new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const req = request(new URL(path, url), {
        method,
        agent,
        headers: payload === undefined ? {} : { 'content-type': 'application/json' },
      });
      req.on('error', reject);
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
          onData?.(chunk);
        });
        res.on('error', reject);
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      });
      req.end(payload);
    });
  await Promise.all(Array.from({ length: connections }, () => send('GET', '/healthz')));
  return { send, close: () => agent.destroy() };
}

/** An app listening in this process on a free port of 127.0.0.1. */
export interface InProcessServer {
  readonly url: string;
  /** Cuts the connections, closes the server, then runs `release` (closing the models). */
  close(): Promise<void>;
}

/** Listens with `listener` (an Express app, a Koa callback) on a free port; `release` runs after the server closed. */
export async function serveInProcess(
  listener: RequestListener,
  release: () => Promise<unknown>,
): Promise<InProcessServer> {
  const server = await listen(listener, { port: 0, host: '127.0.0.1' });
  return {
    url: serverUrl(server),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await release();
    },
  };
}
