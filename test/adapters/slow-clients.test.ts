// Issue 16, slow and idle clients: the same server limits (core's `serverOptions` + `applyServerLimits`, as
// @microbatch/serving uses them) on Express, Koa and Nest, through real servers. The limits are set small here so
// the test is quick; nothing is timed: each case waits (under the hang guard) for the server to act.
import 'reflect-metadata';
import type { RequestListener, Server } from 'node:http';
import { type Socket, connect } from 'node:net';
import type { BatchContext } from '@microbatch/core';
import { applyServerLimits, serverOptions } from '@microbatch/core/http';
import * as expressAdapter from '@microbatch/express';
import * as koaAdapter from '@microbatch/koa';
import { Batch, BatchModule, jsonBody as nestJsonBody } from '@microbatch/nest';
import { deferred, listen } from '@microbatch/test-kit';
import { Router } from '@koa/router';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import { Test } from '@nestjs/testing';
import express from 'express';
import Koa from 'koa';
import { afterEach, describe, expect, it } from 'vitest';
import { type Echo, FRAMEWORKS } from './echo-apps.js';

const LIMITS = {
  headersTimeoutMs: 300,
  requestTimeoutMs: 600,
  idleTimeoutMs: 600,
  keepAliveTimeoutMs: 300,
  maxConnections: 3,
};

let running: Echo | undefined;
let stopStreaming: (() => Promise<void>) | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
  await stopStreaming?.();
  stopStreaming = undefined;
});

/** A streaming app whose one route yields 256 KiB values until its signal aborts. */
interface FloodApp {
  readonly url: string;
  readonly server: Server;
  /** Resolves once the batch's signal aborted (the only client is gone). */
  readonly aborted: Promise<void>;
  readonly chunksProduced: () => number;
  readonly close: () => Promise<void>;
}

function flood() {
  const aborted = deferred();
  let produced = 0;
  async function* handler(prompts: unknown[], { signal }: BatchContext) {
    signal.addEventListener('abort', () => aborted.resolve(), { once: true });
    const chunk = 'x'.repeat(256 * 1024);
    while (!signal.aborted) {
      produced += 1;
      yield prompts.map(() => chunk);
      // Lets the abort (and the socket's timers) in between steps.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  return { handler, aborted: aborted.promise, produced: () => produced };
}

const STREAMING: ReadonlyArray<readonly [string, () => Promise<FloodApp>]> = [
  [
    'Express',
    async () => {
      const model = flood();
      const app = express();
      app.post(
        '/flood',
        expressAdapter.jsonBody(),
        expressAdapter.batchRoute({ handler: model.handler, onError: () => undefined }),
      );
      const server = await listen(app, serverOptions(LIMITS));
      return { ...server, aborted: model.aborted, chunksProduced: model.produced };
    },
  ],
  [
    'Koa',
    async () => {
      const model = flood();
      const app = new Koa();
      const router = new Router();
      router.post(
        '/flood',
        koaAdapter.jsonBody(),
        koaAdapter.batchRoute({ handler: model.handler, onError: () => undefined }),
      );
      app.use(router.routes());
      const callback = app.callback();
      const server = await listen((req, res) => void callback(req, res), serverOptions(LIMITS));
      return { ...server, aborted: model.aborted, chunksProduced: model.produced };
    },
  ],
  [
    'Nest',
    async () => {
      const model = flood();
      @Controller()
      class FloodController {
        @Post('flood')
        @Batch()
        async *flood(@Body() bodies: unknown[], context: BatchContext) {
          yield* model.handler(bodies, context);
        }
      }
      @Module({ imports: [BatchModule.forRoot({ onError: () => undefined })], controllers: [FloodController] })
      class AppModule {}
      const testing = await Test.createTestingModule({ imports: [AppModule] }).compile();
      const nest = testing.createNestApplication(new ExpressAdapter(), { logger: false, bodyParser: false });
      nest.use(nestJsonBody());
      await nest.init();
      const server = await listen(nest.getHttpAdapter().getInstance() as RequestListener, serverOptions(LIMITS));
      return {
        ...server,
        aborted: model.aborted,
        chunksProduced: model.produced,
        close: async () => {
          await server.close();
          await nest.close();
        },
      };
    },
  ],
];

/** A connection that records what the server sends, and resolves `closed` once the server closed it. */
function open(url: string): { socket: Socket; received: () => string; closed: Promise<void> } {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let received = '';
  socket.on('data', (chunk) => (received += chunk.toString('latin1')));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  return { socket, received: () => received, closed };
}

describe.each(FRAMEWORKS)('slow and idle clients on %s', (_name, start) => {
  async function serve(): Promise<Echo> {
    running = await start(serverOptions(LIMITS));
    applyServerLimits(running.server, LIMITS);
    return running;
  }

  it('answers 408 and closes a connection whose headers never finish', async () => {
    const { url } = await serve();
    const slow = open(url);
    slow.socket.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: appl');
    await slow.closed;
    expect(slow.received()).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('cuts an upload that stalls (requestTimeout), without the body reaching the route', async () => {
    const echo = await serve();
    const slow = open(echo.url);
    slow.socket.write(
      'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"prompt": ',
    );
    await slow.closed;
    // Node destroys the socket of a request already being handled; it writes 408 only before that.
    expect(slow.received()).toMatch(/^(HTTP\/1\.1 408 [\s\S]*)?$/);
    expect(echo.bodies).toEqual([]);
  });

  it('closes an idle keep-alive connection, and refuses connections beyond maxConnections', async () => {
    const { url } = await serve();
    const idle = open(url);
    const body = '{"prompt": "hi"}';
    idle.socket.write(
      `POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    await idle.closed;
    expect(idle.received()).toMatch(/^HTTP\/1\.1 200 /);

    const held = [open(url), open(url), open(url)];
    await Promise.all(held.map(({ socket }) => new Promise((resolve) => socket.once('connect', resolve))));
    const refused = open(url);
    await refused.closed;
    expect(refused.received()).toBe('');
    for (const { socket } of held) socket.destroy();
  });
});

// A client that opens a stream and never reads it: once the socket buffers are full nothing moves, the idle timeout
// drops the connection, and the item is cancelled, which frees its slot (the generator sees its signal abort).
describe.each(STREAMING)('a stream reader that stops reading, on %s', (_name, start) => {
  it('is dropped by the idle timeout and its item cancelled, freeing the batch slot', async () => {
    const app = await start();
    stopStreaming = app.close;
    applyServerLimits(app.server, LIMITS);
    const reader = open(app.url);
    reader.socket.pause(); // never reads: the kernel buffers fill, then nothing moves
    const body = '{"prompt": "flood"}';
    reader.socket.write(
      `POST /flood HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    // The server drops the connection (a paused client does not notice): the item is cancelled, its signal aborts.
    await app.aborted;
    expect(app.chunksProduced()).toBeGreaterThan(0);
    reader.socket.destroy();
  });
});
