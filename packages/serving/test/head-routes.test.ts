// `HEAD` of every `GET` route that is not the model's (probes, metrics, dashboard, model list) answers as `GET` does,
// without a body, on all five frameworks, and the server logs no error for it. (On Hono, routes answering on the Node
// response used to log `ERR_HTTP_HEADERS_SENT` for each `HEAD`: Hono answers `HEAD` with a copy of the `GET` route's
// `Response`, whose headers `@hono/node-server` then wrote a second time.)
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { RunningServer } from '../src/index.js';
import { startTextCompletionApp as startExpress } from '../src/app/express/index.js';
import { startTextCompletionApp as startFastify } from '../src/app/fastify/index.js';
import { startTextCompletionApp as startHono } from '../src/app/hono/index.js';
import { startTextCompletionApp as startKoa } from '../src/app/koa/index.js';
import { startTextCompletionApp as startNest } from '../src/app/nest/index.js';
import { gatedService } from './gated-service.js';

const APPS = { express: startExpress, koa: startKoa, fastify: startFastify, hono: startHono, nest: startNest } as const;
const PATHS = ['/healthz', '/readyz', '/metrics', '/dashboard', '/v1/models'];
// Headers that differ between two answers of the same route by design; Content-Length is optional on HEAD (Node
// computes it only from a body it sends) and /metrics' grows between two requests.
const VARYING = new Set(['date', 'keep-alive', 'connection', 'content-length']);
let running: RunningServer | undefined;

afterEach(async () => {
  vi.restoreAllMocks();
  running?.server.closeAllConnections();
  await running?.shutdown();
  running = undefined;
});

const stable = (headers: Headers) => [...headers].filter(([name]) => !VARYING.has(name));

describe.each(Object.keys(APPS) as Array<keyof typeof APPS>)('the %s app', (framework) => {
  it('answers HEAD of the probes, metrics, dashboard and model list as GET, with no body and no error logged', async () => {
    const logged = vi.spyOn(console, 'error');
    const { service } = gatedService({});
    running = await APPS[framework](service, { port: 0, host: '127.0.0.1' });
    for (const path of PATHS) {
      const get = await fetch(`${running.url}${path}`);
      await get.arrayBuffer();
      const head = await fetch(`${running.url}${path}`, { method: 'HEAD' });
      expect({ path, status: head.status, body: await head.text() }).toEqual({ path, status: get.status, body: '' });
      expect({ path, headers: stable(head.headers) }).toEqual({ path, headers: stable(get.headers) });
    }
    expect(logged).not.toHaveBeenCalled();
  });
});
