// API keys on the serving apps: the key set itself (constant-time lookup, names that never show the key, a key file,
// a replacement that keeps the old keys when bad), and the same answers on all five frameworks: every route but the
// probes and the metrics needs `Authorization: Bearer <key>`, refused 401 in OpenAI's shape with
// `WWW-Authenticate: Bearer`; the key's name becomes the request's principal, its fairness key and a metrics label.
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ApiKeys,
  type RunningServer,
  type TextCompletionAppOptions,
  type TextCompletionService,
  apiKeyClientKey,
  defaultKeyName,
  parseApiKeyFile,
} from '../src/index.js';
import { startTextCompletionApp as startExpress } from '../src/app/express/index.js';
import { startTextCompletionApp as startFastify } from '../src/app/fastify/index.js';
import { startTextCompletionApp as startHono } from '../src/app/hono/index.js';
import { startTextCompletionApp as startKoa } from '../src/app/koa/index.js';
import { startTextCompletionApp as startNest } from '../src/app/nest/index.js';
import { textCompletionHandlers } from '../src/app/text-completion-routes.js';
import { nodeRoute, resolveRoutes } from '../src/app/route-table.js';
import { gatedService } from './gated-service.js';

const APPS = { express: startExpress, koa: startKoa, fastify: startFastify, hono: startHono, nest: startNest } as const;
const KEY = 'sk-team-a-3f9c11';
let running: RunningServer | undefined;

afterEach(async () => {
  running?.server.closeAllConnections();
  await running?.shutdown();
  running = undefined;
});

describe('ApiKeys', () => {
  it('finds the key a token is, by name, and nothing for another token', () => {
    const keys = new ApiKeys(['sk-bare-1', { name: 'team-a', key: KEY }]);
    expect(keys.authenticate(KEY)).toBe('team-a');
    expect(keys.authenticate('sk-bare-1')).toBe(defaultKeyName('sk-bare-1'));
    expect(keys.authenticate(`${KEY}x`)).toBeUndefined();
    expect(keys.authenticate(KEY.slice(0, -1))).toBeUndefined();
    expect(keys.authenticate('')).toBeUndefined();
  });

  it('reads only `Bearer <key>` from an Authorization header', () => {
    const keys = new ApiKeys([{ name: 'team-a', key: KEY }]);
    expect(keys.authenticateHeader(`Bearer ${KEY}`)).toBe('team-a');
    expect(keys.authenticateHeader(`bearer ${KEY}`)).toBe('team-a');
    expect(keys.authenticateHeader(undefined)).toBeUndefined();
    expect(keys.authenticateHeader('')).toBeUndefined();
    expect(keys.authenticateHeader('Bearer')).toBeUndefined();
    expect(keys.authenticateHeader(`Basic ${KEY}`)).toBeUndefined();
    expect(keys.authenticateHeader(KEY)).toBeUndefined();
    expect(keys.authenticateHeader(`Bearer ${KEY} extra`)).toBeUndefined();
    expect(keys.authenticateHeader(`Bearer ${'x'.repeat(10_000)}`)).toBeUndefined();
  });

  it('names a bare key by its digest, never by the key', () => {
    const name = defaultKeyName(KEY);
    expect(name).toMatch(/^key-[0-9a-f]{8}$/);
    expect(name).not.toContain(KEY.slice(3, 11));
    expect(new ApiKeys([KEY]).names).toEqual([name]);
  });

  it('refuses bad sets naming the entry, never quoting a key', () => {
    expect(() => new ApiKeys([])).toThrow(TypeError);
    expect(() => new ApiKeys(['has space'])).toThrow(/apiKeys\[0\]: a key must be/);
    expect(() => new ApiKeys([KEY, KEY])).toThrow(/given twice/);
    expect(
      () =>
        new ApiKeys([
          { name: 'a', key: 'k1' },
          { name: 'a', key: 'k2' },
        ]),
    ).toThrow(/`a` is given twice/);
    expect(() => new ApiKeys([{ name: 'bad name', key: KEY }])).toThrow(/name must be/);
    try {
      new ApiKeys([{ name: 'bad name', key: KEY }]);
    } catch (error) {
      expect((error as Error).message).not.toContain(KEY);
    }
  });

  it('keeps its keys when a replacement is bad', () => {
    const keys = new ApiKeys([{ name: 'team-a', key: KEY }]);
    expect(() => keys.replace(['bad key'])).toThrow(TypeError);
    expect(keys.authenticate(KEY)).toBe('team-a');
    keys.replace([{ name: 'team-b', key: 'sk-b' }]);
    expect(keys.authenticate(KEY)).toBeUndefined();
    expect(keys.authenticate('sk-b')).toBe('team-b');
  });

  it('reads a key file: `name:key` or a bare key a line, comments and blank lines skipped', () => {
    expect(parseApiKeyFile('# ops keys\n\nteam-a:sk-a:with-colon\r\n  sk-bare  \n')).toEqual([
      { name: 'team-a', key: 'sk-a:with-colon' },
      'sk-bare',
    ]);
    expect(() => parseApiKeyFile('# nothing\n')).toThrow(/holds no key/);
    expect(() => parseApiKeyFile('ok:sk-1\nbad name:sk-2\n')).toThrow(/^line 2: /);
    expect(() => parseApiKeyFile('a:sk-1\na:sk-2\n')).toThrow(/given twice/);
  });
});

describe('app options', () => {
  const { service } = gatedService({});
  it('refuses protectMetrics without keys, and a bad apiKeys value without quoting it', () => {
    expect(() => textCompletionHandlers(service, { protectMetrics: true })).toThrow(/protectMetrics has no effect/);
    const options = { apiKeys: KEY } as unknown as TextCompletionAppOptions;
    expect(() => textCompletionHandlers(service, options)).toThrow(TypeError);
    try {
      textCompletionHandlers(service, options);
    } catch (error) {
      expect((error as Error).message).not.toContain(KEY);
    }
  });
});

/** Status, `WWW-Authenticate` and the parsed body of one request. */
async function call(url: string, init: RequestInit = {}) {
  const response = await fetch(url, init);
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // a text body (the tutorial's route, HEAD)
  }
  return { status: response.status, challenge: response.headers.get('www-authenticate'), body };
}

const completion = (authorization?: string): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...(authorization === undefined ? {} : { authorization }) },
  body: JSON.stringify({ prompt: 'hi', max_tokens: 1, stream: true }),
});

describe.each(Object.keys(APPS) as Array<keyof typeof APPS>)('the %s app with API keys', (framework) => {
  async function start(service: TextCompletionService, options: TextCompletionAppOptions): Promise<string> {
    running = await APPS[framework](service, { port: 0, host: '127.0.0.1' }, options);
    return running.url;
  }

  it('answers 401 in OpenAI shape without a known key, serves with one, and leaves probes and metrics open', async () => {
    const { service } = gatedService({});
    const url = await start(service, { apiKeys: [{ name: 'team-a', key: KEY }] });
    const unauthorized = {
      status: 401,
      challenge: 'Bearer',
      body: { error: expect.objectContaining({ type: 'invalid_request_error', code: 'UNAUTHORIZED', param: null }) },
    };
    expect(await call(`${url}/v1/completions`, completion())).toEqual(unauthorized);
    expect(await call(`${url}/v1/completions`, completion('Bearer sk-wrong'))).toEqual(unauthorized);
    expect(await call(`${url}/v1/completions`, completion(`Basic ${KEY}`))).toEqual(unauthorized);
    expect(await call(`${url}/v1/chat/completions`, completion())).toEqual(unauthorized);
    expect(await call(`${url}/v1/models`)).toEqual(unauthorized);
    // The tutorial's route runs the model too: the same check, microbatch's error shape there.
    expect(await call(`${url}/?text=hi`)).toMatchObject({ status: 401, challenge: 'Bearer' });
    expect((await call(`${url}/?text=hi`)).body).toEqual({ error: expect.objectContaining({ code: 'UNAUTHORIZED' }) });
    expect(await call(`${url}/`, { method: 'HEAD' })).toMatchObject({ status: 401, challenge: 'Bearer' });

    const streamed = await call(`${url}/v1/completions`, completion(`Bearer ${KEY}`));
    expect(streamed.status).toBe(200);
    expect(String(streamed.body)).toContain('data: [DONE]');
    expect((await call(`${url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } })).status).toBe(200);
    for (const path of ['/healthz', '/readyz', '/metrics', '/dashboard']) {
      expect({ path, status: (await call(`${url}${path}`)).status }).toEqual({ path, status: 200 });
    }
    const metrics = String((await call(`${url}/metrics`)).body);
    expect(metrics).toContain('microbatch_api_key_requests_total{key="team-a"} 2');
    expect(metrics).toContain('microbatch_api_key_refusals_total 8');
    expect(metrics).not.toContain(KEY);
  });

  it('protects /metrics and /dashboard with protectMetrics, never the probes', async () => {
    const { service } = gatedService({});
    const url = await start(service, { apiKeys: [KEY], protectMetrics: true });
    expect((await call(`${url}/metrics`)).status).toBe(401);
    expect((await call(`${url}/dashboard`)).status).toBe(401);
    expect((await call(`${url}/metrics`, { headers: { authorization: `Bearer ${KEY}` } })).status).toBe(200);
    expect((await call(`${url}/healthz`)).status).toBe(200);
    expect((await call(`${url}/readyz`)).status).toBe(200);
  });
});

describe('the key name as fairness key', () => {
  it('keys an admitted request by its key name, whatever its address', async () => {
    const seen: unknown[] = [];
    const { service } = gatedService({});
    const original = service.streamer;
    const streamer = Object.assign(Object.create(original) as typeof original, {
      streamAll: (
        inputs: Parameters<typeof original.streamAll>[0],
        options?: Parameters<typeof original.streamAll>[1],
      ) => {
        seen.push(options?.fairnessKey);
        return original.streamAll(inputs, options);
      },
    });
    running = await startExpress(
      { ...service, streamer },
      { port: 0, host: '127.0.0.1' },
      {
        apiKeys: [
          { name: 'team-a', key: KEY },
          { name: 'team-b', key: 'sk-b' },
        ],
      },
    );
    await call(`${running.url}/v1/completions`, completion(`Bearer ${KEY}`));
    await call(`${running.url}/v1/completions`, completion('Bearer sk-b'));
    expect(seen).toEqual(['key:team-a', 'key:team-b']);
    expect(apiKeyClientKey({} as never)).toBeUndefined();
  });
});

describe('where the key check is applied', () => {
  it('guards every route of a table as it is resolved, a new one included, the probes and metrics left open', async () => {
    const answered: string[] = [];
    const ok = (name: string) =>
      nodeRoute(async (_req, res) => {
        answered.push(name);
        res.writeHead(200).end();
      });
    const routes = resolveRoutes(
      [
        { method: 'GET', path: '/a-new-route', handler: 'newRoute' },
        { method: 'GET', path: '/healthz', handler: 'liveness' },
        { method: 'GET', path: '/metrics', handler: 'metrics' },
      ],
      {
        handlers: { newRoute: ok('newRoute'), liveness: ok('liveness'), metrics: ok('metrics') },
        access: { apiKeys: new ApiKeys([KEY]), protectMetrics: false },
      },
    );
    const server = createServer((req, res) => {
      const route = routes.find((row) => row.path === req.url);
      if (route?.kind === 'node') void route.handler(req, res);
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const status = async (path: string, authorization?: string) =>
        (await fetch(`${url}${path}`, authorization === undefined ? {} : { headers: { authorization } })).status;
      expect(await status('/a-new-route')).toBe(401);
      expect(await status('/a-new-route', 'Bearer sk-wrong')).toBe(401);
      expect(await status('/a-new-route', `Bearer ${KEY}`)).toBe(200);
      expect(await status('/healthz')).toBe(200);
      expect(await status('/metrics')).toBe(200);
      expect(answered).toEqual(['newRoute', 'liveness', 'metrics']);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
