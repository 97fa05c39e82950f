import { END, SKIP } from '@microbatch/core';
import { Batch, BatchModule } from '@microbatch/nest';
import { Body, Controller, Module, Post } from '@nestjs/common';
import request from 'supertest';
import type { Server } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { PLATFORMS, startApp } from './nest-helpers/nest-app.js';
import { parseSse } from '@microbatch/test-kit';

const data = (text: string) => parseSse(text).map((event) => [event.event ?? 'message', event.data]);

describe.each(PLATFORMS)('streaming @Batch() routes on %s', (platform) => {
  @Controller()
  class TokensController {
    @Post('tokens')
    @Batch({ maxBatchSize: 2, batchWaitTimeoutMs: 60_000 })
    async *tokens(@Body() bodies: { prompt: string; steps: number }[]) {
      for (let step = 0; step < 3; step += 1) {
        yield bodies.map(({ prompt, steps }) =>
          step < steps ? { token: `${prompt}#${step}` } : step === steps ? END : SKIP,
        );
      }
    }

    @Post('fails-midway')
    @Batch({ maxBatchSize: 2, batchWaitTimeoutMs: 60_000 })
    async *failsMidway(@Body() bodies: { prompt: string }[]) {
      yield bodies.map(({ prompt }) => `${prompt}: first`);
      yield bodies.map(({ prompt }) => (prompt === 'bad' ? new Error('tensor shape mismatch') : `${prompt}: second`));
      throw new Error('GPU fell off the bus');
    }

    @Post('fails-early')
    @Batch()
    async *failsEarly(@Body() bodies: unknown[]): AsyncGenerator<string[]> {
      if (bodies.length > 0) throw new Error('weights not loaded');
      yield [];
    }
  }
  @Module({ imports: [BatchModule.forRoot()], controllers: [TokensController] })
  class AppModule {}

  it('answers an async generator route with Server-Sent Events, each client getting its own values', async () => {
    const app = await startApp(platform, AppModule);
    try {
      const post = (body: object) => request(app.getHttpServer()).post('/tokens').send(body);
      const [long, short] = await Promise.all([post({ prompt: 'a', steps: 3 }), post({ prompt: 'b', steps: 1 })]);
      for (const response of [long, short]) {
        expect(response.status).toBe(200);
        expect(response.headers['content-type']).toBe('text/event-stream; charset=utf-8');
        expect(response.headers['cache-control']).toBe('no-cache, no-transform');
        expect(response.headers['x-batch-size']).toBe('2');
      }
      expect(long.text).toBe(
        'data: {"token":"a#0"}\n\ndata: {"token":"a#1"}\n\ndata: {"token":"a#2"}\n\ndata: [DONE]\n\n',
      );
      expect(data(short.text)).toEqual([
        ['message', '{"token":"b#0"}'],
        ['message', '[DONE]'],
      ]);
    } finally {
      await app.close();
    }
  });

  it('honours `Connection: close`: the stream answers with `Connection: close` and the server closes the socket', async () => {
    const app = await startApp(platform, AppModule);
    try {
      const { port } = (app.getHttpServer() as Server).address() as AddressInfo;
      const body = JSON.stringify({ prompt: 'a', steps: 1 });
      // A second request fills the batch of 2, so neither waits for the 60 s batch window.
      const mate = request(app.getHttpServer()).post('/tokens').send({ prompt: 'b', steps: 1 });
      const raw = new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1');
        let text = '';
        socket.on('data', (chunk) => (text += chunk.toString()));
        socket.on('error', reject);
        // Resolves only when the server closes the connection: a kept-alive socket would hang the test.
        socket.on('close', () => resolve(text));
        socket.write(
          `POST /tokens HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
        );
      });
      const [received, mateResponse] = await Promise.all([raw, mate]);
      expect(mateResponse.status).toBe(200);
      expect(received).toMatch(/^HTTP\/1\.1 200 /);
      expect(received.toLowerCase()).toContain('connection: close');
      expect(received.toLowerCase()).not.toContain('connection: keep-alive');
      expect(received).toContain('data: [DONE]');
    } finally {
      await app.close();
    }
  });

  it('ends a stream that fails after its headers with an `error` event, and one that fails before with JSON', async () => {
    const app = await startApp(platform, AppModule);
    try {
      const post = (path: string, body: object) => request(app.getHttpServer()).post(path).send(body);
      const [good, bad] = await Promise.all([
        post('/fails-midway', { prompt: 'good' }),
        post('/fails-midway', { prompt: 'bad' }),
      ]);
      const errorEvent = [
        'error',
        JSON.stringify({ error: { code: 'HANDLER_ERROR', message: 'Internal Server Error' } }),
      ];
      expect(data(good.text)).toEqual([['message', '"good: first"'], ['message', '"good: second"'], errorEvent]);
      expect(data(bad.text)).toEqual([['message', '"bad: first"'], errorEvent]);
      expect(good.text + bad.text).not.toMatch(/GPU|tensor/);

      const early = await post('/fails-early', {});
      expect(early.status).toBe(500);
      expect(early.headers['content-type']).toMatch(/^application\/json/);
      expect(early.body).toEqual({ error: { code: 'HANDLER_ERROR', message: 'Internal Server Error' } });
    } finally {
      await app.close();
    }
  });
});
