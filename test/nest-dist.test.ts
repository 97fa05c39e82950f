import { existsSync } from 'node:fs';
import type * as NestPackage from '@microbatch/nest';
import { Body, Controller, Module, Post } from '@nestjs/common';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import { PLATFORMS, startApp } from './nest-helpers/nest-app.js';

// The other tests run the sources through vitest, which emits decorator metadata. The package itself is built by
// esbuild, which cannot: this checks that what ships needs none (CI builds every package before it tests).
const DIST = new URL('../packages/nest/dist/index.js', import.meta.url);

describe.skipIf(!existsSync(DIST))('the built @microbatch/nest', () => {
  it.each(PLATFORMS)('batches a route on %s', async (platform) => {
    const { Batch, BatchModule, BatchRegistry } = (await import(/* @vite-ignore */ DIST.href)) as typeof NestPackage;

    @Controller()
    class EchoController {
      @Post('echo')
      @Batch({ maxBatchSize: 2, batchWaitTimeoutMs: 60_000 })
      echo(@Body() bodies: { n: number }[]): number[] {
        return bodies.map(({ n }) => n * 10);
      }
    }
    @Module({ imports: [BatchModule.forRoot()], controllers: [EchoController] })
    class AppModule {}

    const app = await startApp(platform, AppModule);
    try {
      const responses = await Promise.all([1, 2].map((n) => request(app.getHttpServer()).post('/echo').send({ n })));
      expect(responses.map((response) => [response.status, response.text, response.headers['x-batch-size']])).toEqual([
        [200, '10', '2'],
        [200, '20', '2'],
      ]);
      expect(app.get(BatchRegistry).batcherOf(app.get(EchoController), 'echo')?.stats().batchesProcessed).toBe(1);
    } finally {
      await app.close();
    }
  });
});
