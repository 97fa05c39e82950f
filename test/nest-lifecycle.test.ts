import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BatchContext, BatcherEvents } from '@microbatch/core';
import { Batch, BatchModule, BatchRegistry } from '@microbatch/nest';
import { Body, Controller, type INestApplication, Module, Post } from '@nestjs/common';
import request from 'supertest';
import { describe, expect, it, vi } from 'vitest';
import { deferred } from '@microbatch/test-kit';
import { PLATFORMS, startApp } from './nest-helpers/nest-app.js';

/** Sends a JSON POST with a raw client, so that the test can drop the connection; resolves with the request. */
function rawPost(
  app: INestApplication,
  path: string,
  body: object,
  onData?: (chunk: string) => void,
): http.ClientRequest {
  const { port } = (app.getHttpServer() as http.Server).address() as AddressInfo;
  const client = http.request({
    host: '127.0.0.1',
    port,
    path,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
  });
  client.on('error', () => undefined);
  client.on('response', (response) =>
    response.on('data', (chunk: Buffer) => onData?.(chunk.toString())).on('error', () => undefined),
  );
  client.end(JSON.stringify(body));
  return client;
}

function nextReject(app: INestApplication, controller: Function, key: string): Promise<BatcherEvents['reject']> {
  const batcher = app.get(BatchRegistry).batcherOf(app.get(controller), key);
  return new Promise((resolve) => {
    const off = batcher?.on('reject', (event) => {
      off?.();
      resolve(event);
    });
  });
}

describe.each(PLATFORMS)('client disconnects and shutdown on %s', (platform) => {
  it('removes the queued item of a client that disconnects: it never reaches the method', async () => {
    const seen: string[] = [];
    const held = deferred();
    const entered = deferred();
    @Controller()
    class QueueController {
      @Post('work')
      @Batch({ maxBatchSize: 1 })
      async work(@Body() bodies: { id: string }[]): Promise<string[]> {
        seen.push(...bodies.map((body) => body.id));
        entered.resolve();
        await held.promise;
        return bodies.map((body) => body.id);
      }
    }
    @Module({ imports: [BatchModule.forRoot()], controllers: [QueueController] })
    class AppModule {}
    const app = await startApp(platform, AppModule);
    try {
      const batcher = app.get(BatchRegistry).batcherOf(app.get(QueueController), 'work');
      const first = request(app.getHttpServer())
        .post('/work')
        .send({ id: 'first' })
        .then((response) => response);
      await entered.promise;
      const gone = rawPost(app, '/work', { id: 'gone' });
      await vi.waitFor(() => expect(batcher?.queueLength).toBe(1), { timeout: 5_000 });
      const rejected = nextReject(app, QueueController, 'work');
      gone.destroy();
      expect((await rejected).reason).toBe('CANCELLED');
      expect(batcher?.queueLength).toBe(0);

      held.resolve();
      expect((await first).text).toBe('first');
      const after = await request(app.getHttpServer()).post('/work').send({ id: 'after' });
      expect(after.text).toBe('after');
      expect(seen).toEqual(['first', 'after']);
    } finally {
      held.resolve();
      await app.close();
    }
  });

  it('cancels only the streaming item of a client that leaves mid-stream; its batch goes on for the others', async () => {
    const steps = [deferred(), deferred(), deferred()];
    let batchSignal: AbortSignal | undefined;
    @Controller()
    class StreamController {
      @Post('stream')
      @Batch({ maxBatchSize: 2, batchWaitTimeoutMs: 60_000 })
      async *stream(@Body() bodies: { id: string }[], { signal }: BatchContext) {
        batchSignal = signal;
        for (const [index, step] of steps.entries()) {
          await step.promise;
          yield bodies.map(({ id }) => `${id}${index}`);
        }
      }
    }
    @Module({ imports: [BatchModule.forRoot()], controllers: [StreamController] })
    class AppModule {}
    const app = await startApp(platform, AppModule);
    try {
      const firstEvent = deferred();
      const leaving = rawPost(app, '/stream', { id: 'leaving' }, () => firstEvent.resolve());
      const staying = request(app.getHttpServer())
        .post('/stream')
        .send({ id: 'staying' })
        .then((response) => response);
      steps[0]!.resolve();
      await firstEvent.promise;
      const rejected = nextReject(app, StreamController, 'stream');
      leaving.destroy();
      expect((await rejected).reason).toBe('CANCELLED');
      steps[1]!.resolve();
      steps[2]!.resolve();
      const response = await staying;
      expect(response.text).toBe('data: "staying0"\n\ndata: "staying1"\n\ndata: "staying2"\n\ndata: [DONE]\n\n');
      expect(batchSignal?.aborted).toBe(false);
    } finally {
      for (const step of steps) step.resolve();
      await app.close();
    }
  });

  it('drains on app.close(): running and queued requests still get 200, new ones get 503 CLOSED', async () => {
    const held = deferred();
    const entered = deferred();
    const seen: string[][] = [];
    @Controller()
    class DrainController {
      @Post('drain')
      @Batch({ maxBatchSize: 2, batchWaitTimeoutMs: 60_000 })
      async drain(@Body() bodies: { id: string }[]): Promise<string[]> {
        seen.push(bodies.map((body) => body.id));
        entered.resolve();
        await held.promise;
        return bodies.map((body) => `done ${body.id}`);
      }
    }
    @Module({ imports: [BatchModule.forRoot()], controllers: [DrainController] })
    class AppModule {}
    const app = await startApp(platform, AppModule);
    let closing: Promise<void> | undefined;
    try {
      const batcher = app.get(BatchRegistry).batcherOf(app.get(DrainController), 'drain');
      const post = (id: string) =>
        request(app.getHttpServer())
          .post('/drain')
          .send({ id })
          .then((response) => response);
      const running = [post('a'), post('b')];
      await entered.promise;
      // Queued behind the running batch; without the window it would only go when the batcher closes.
      const queued = post('c');
      await vi.waitFor(() => expect(batcher?.queueLength).toBe(1), { timeout: 5_000 });

      closing = app.close();
      await vi.waitFor(() => expect(batcher?.closed).toBe(true), { timeout: 5_000 });
      const refused = await post('late');
      expect([refused.status, refused.body, refused.headers['retry-after']]).toEqual([
        503,
        {
          error: {
            code: 'CLOSED',
            message: 'The server is shutting down; retry on another instance',
            retryAfterSeconds: 1,
          },
        },
        '1',
      ]);

      held.resolve();
      for (const [response, text] of [
        [await running[0], 'done a'],
        [await running[1], 'done b'],
        [await queued, 'done c'],
      ] as const) {
        expect([response?.status, response?.text]).toEqual([200, text]);
      }
      await closing;
      expect(seen).toEqual([['a', 'b'], ['c']]);
    } finally {
      held.resolve();
      await (closing ?? app.close());
    }
  });
});
