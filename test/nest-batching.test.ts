import { Batch, BatchModule, BatchRegistry, batched } from '@microbatch/nest';
import type { BatchContext } from '@microbatch/core';
import {
  Body,
  type CanActivate,
  Controller,
  type ExecutionContext,
  Get,
  Injectable,
  Module,
  Post,
  Query,
  UseGuards,
  ValidationPipe,
} from '@nestjs/common';
import { IsNotEmpty, IsString } from 'class-validator';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { describe, expect, expectTypeOf, it, vi } from 'vitest';
import { deferred } from '@microbatch/test-kit';
import { PLATFORMS, startApp } from './nest-helpers/nest-app.js';

class GenerateDto {
  @IsString()
  @IsNotEmpty()
  prompt!: string;
}

describe.each(PLATFORMS)('@Batch() routes on %s', (platform) => {
  it('coalesces 9 concurrent requests into batches of at most 4, each request getting its own result', async () => {
    const batches: string[][] = [];
    const firstBatchHeld = deferred();

    @Controller()
    class CompletionController {
      @Post('generate')
      @Batch({ maxBatchSize: 4 })
      async generate(@Body() bodies: GenerateDto[]): Promise<{ text: string }[]> {
        batches.push(bodies.map((body) => body.prompt));
        if (batches.length === 1) await firstBatchHeld.promise;
        return bodies.map((body) => ({ text: body.prompt.toUpperCase() }));
      }
    }
    @Module({ imports: [BatchModule.forRoot({ batchWaitTimeoutMs: 5 })], controllers: [CompletionController] })
    class AppModule {}

    const app = await startApp(platform, AppModule);
    try {
      const batcher = app.get(BatchRegistry).batcherOf(app.get(CompletionController), 'generate');
      expect(batcher?.maxBatchSize).toBe(4);
      const prompts = Array.from({ length: 9 }, (_, index) => `prompt ${index}`);
      const pending = Promise.all(
        prompts.map((prompt) => request(app.getHttpServer()).post('/generate').send({ prompt })),
      );
      // The first batch is held until every other request waits in the queue, so the rest batch by 4.
      await vi.waitFor(
        () => expect(batches.length === 1 && batcher?.queueLength === 9 - batches[0]!.length).toBe(true),
        {
          timeout: 5_000,
        },
      );
      firstBatchHeld.resolve();
      const responses = await pending;

      const first = batches[0]!.length;
      expect(batches.map((batch) => batch.length)).toEqual([first, 4, 9 - first - 4]);
      expect(batches.flat().sort()).toEqual([...prompts].sort());
      const sizeById = new Map(batches.map((batch, index) => [String(index + 1), batch]));
      responses.forEach((response, index) => {
        expect(response.status).toBe(200);
        expect(response.body).toEqual({ text: prompts[index]!.toUpperCase() });
        const batch = sizeById.get(response.headers['x-batch-id'] as string);
        expect(batch).toContain(prompts[index]);
        expect(response.headers['x-batch-size']).toBe(String(batch?.length));
        expect(Number(response.headers['x-queue-time-ms'])).toBeGreaterThanOrEqual(0);
      });
    } finally {
      await app.close();
    }
  });

  it('runs guards and ValidationPipe per request before batching: a rejected request never joins a batch', async () => {
    const seen: unknown[][] = [];

    @Injectable()
    class DenyGuard implements CanActivate {
      canActivate(context: ExecutionContext): boolean {
        return context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-deny'] === undefined;
      }
    }
    @Controller()
    class CompletionController {
      @Post('generate')
      @UseGuards(DenyGuard)
      // The long window makes the batch wait for exactly the three valid requests.
      @Batch({ maxBatchSize: 3, batchWaitTimeoutMs: 60_000, paramTypes: [GenerateDto] })
      async generate(@Body() bodies: GenerateDto[]): Promise<string[]> {
        seen.push(bodies);
        return bodies.map((body) => `${body.prompt}!`);
      }
    }
    @Module({ imports: [BatchModule.forRoot()], controllers: [CompletionController], providers: [DenyGuard] })
    class AppModule {}

    const app = await startApp(platform, AppModule, (nest) =>
      nest.useGlobalPipes(new ValidationPipe({ transform: true })),
    );
    try {
      const post = () => request(app.getHttpServer()).post('/generate');
      const [a, invalid, b, denied, c] = await Promise.all([
        post().send({ prompt: 'a' }),
        post().send({ prompt: 42 }),
        post().send({ prompt: 'b' }),
        post().set('x-deny', '1').send({ prompt: 'denied' }),
        post().send({ prompt: 'c' }),
      ]);

      expect(invalid.status).toBe(400);
      expect(invalid.body).toMatchObject({ statusCode: 400, message: ['prompt must be a string'] });
      expect(denied.status).toBe(403);
      for (const [response, text] of [
        [a, 'a!'],
        [b, 'b!'],
        [c, 'c!'],
      ] as const) {
        expect(response.status).toBe(200);
        expect(response.text).toBe(text);
        expect(response.headers['x-batch-size']).toBe('3');
      }
      expect(seen).toHaveLength(1);
      expect(seen[0]!.map((body) => (body as GenerateDto).prompt).sort()).toEqual(['a', 'b', 'c']);
      // `paramTypes` gave ValidationPipe the DTO, so with `transform` each body is an instance of it.
      expect(seen[0]!.every((body) => body instanceof GenerateDto)).toBe(true);
    } finally {
      await app.close();
    }
  });

  it('passes one array per parameter, then the BatchContext', async () => {
    const calls: unknown[][] = [];

    @Controller()
    class EchoController {
      @Post('echo')
      @Batch({ maxBatchSize: 2, batchWaitTimeoutMs: 60_000 })
      echo(@Body('text') texts: string[], @Query('times') times: string[], context: BatchContext): string[] {
        calls.push([texts, times, context.batchId, context.signal instanceof AbortSignal]);
        return texts.map((text, index) => text.repeat(Number(times[index])));
      }
    }
    @Module({ imports: [BatchModule.forRoot()], controllers: [EchoController] })
    class AppModule {}

    const app = await startApp(platform, AppModule);
    try {
      const [ab, cd] = await Promise.all([
        request(app.getHttpServer()).post('/echo?times=2').send({ text: 'ab' }),
        request(app.getHttpServer()).post('/echo?times=3').send({ text: 'cd' }),
      ]);
      expect([ab.text, cd.text]).toEqual(['abab', 'cdcdcd']);
      expect(calls).toHaveLength(1);
      const [texts, times, batchId, hasSignal] = calls[0]!;
      expect([texts, times]).toSatisfy(
        ([t, n]: [string[], string[]]) =>
          JSON.stringify([t, n]) ===
            JSON.stringify([
              ['ab', 'cd'],
              ['2', '3'],
            ]) ||
          JSON.stringify([t, n]) ===
            JSON.stringify([
              ['cd', 'ab'],
              ['3', '2'],
            ]),
      );
      expect([batchId, hasSignal]).toEqual([1, true]);
    } finally {
      await app.close();
    }
  });

  it("partitions batches with `batchKey`, which receives each request's arguments", async () => {
    const batches: string[][] = [];
    @Controller()
    class ModelController {
      @Post('complete')
      @Batch({ maxBatchSize: 2, batchWaitTimeoutMs: 60_000, batchKey: ([body]: [{ model: string }]) => body.model })
      complete(@Body() bodies: { model: string; prompt: string }[]): string[] {
        batches.push(bodies.map((body) => `${body.model}:${body.prompt}`));
        return bodies.map((body) => body.prompt);
      }
    }
    @Module({ imports: [BatchModule.forRoot()], controllers: [ModelController] })
    class AppModule {}
    const app = await startApp(platform, AppModule);
    try {
      const bodies = [
        { model: 'small', prompt: 's1' },
        { model: 'large', prompt: 'l1' },
        { model: 'small', prompt: 's2' },
        { model: 'large', prompt: 'l2' },
      ];
      const responses = await Promise.all(
        bodies.map((body) => request(app.getHttpServer()).post('/complete').send(body)),
      );
      expect(responses.map((response) => response.text)).toEqual(['s1', 'l1', 's2', 'l2']);
      expect(batches.map((batch) => [...batch].sort()).sort((a, b) => a.join().localeCompare(b.join()))).toEqual([
        ['large:l1', 'large:l2'],
        ['small:s1', 'small:s2'],
      ]);
    } finally {
      await app.close();
    }
  });

  it('keeps batching under a decorator applied above @Batch() that wraps the method again and copies its metadata', async () => {
    const traced: number[] = [];
    const Traced = (): MethodDecorator => (_target, _key, descriptor) => {
      const inner = descriptor.value as unknown as (...args: unknown[]) => unknown;
      const outer = function (this: unknown, ...args: unknown[]) {
        traced.push(args.length);
        return inner.apply(this, args);
      };
      for (const key of Reflect.getOwnMetadataKeys(inner))
        Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, inner), outer);
      return { ...descriptor, value: outer as never };
    };
    @Controller()
    class TracedController {
      @Post('traced')
      @Traced()
      @Batch({ maxBatchSize: 2, batchWaitTimeoutMs: 60_000 })
      traced(@Body() bodies: { n: number }[]): number[] {
        return bodies.map(({ n }) => -n);
      }
    }
    @Module({ imports: [BatchModule.forRoot()], controllers: [TracedController] })
    class AppModule {}
    const app = await startApp(platform, AppModule);
    try {
      const responses = await Promise.all([1, 2].map((n) => request(app.getHttpServer()).post('/traced').send({ n })));
      expect(responses.map((response) => [response.status, response.text, response.headers['x-batch-size']])).toEqual([
        [200, '-1', '2'],
        [200, '-2', '2'],
      ]);
      expect(traced).toEqual([1, 1]);
    } finally {
      await app.close();
    }
  });

  it('layers options: library defaults, BatchModule.forRoot(), class-level @Batch(), method-level @Batch()', async () => {
    @Injectable()
    @Batch({ maxBatchSize: 3 })
    class Scorer {
      readonly score = batched(this, (texts: string[]) => texts.map((text) => text.length));
      readonly rank = batched(this, (texts: string[]) => texts.map(() => 0), { maxBatchSize: 9 });
    }
    @Controller()
    @Batch({ maxBatchSize: 3 })
    class LayeredController {
      @Post('a')
      @Batch({ maxBatchSize: 5, name: 'custom' })
      a(@Body() bodies: unknown[]): unknown[] {
        return bodies;
      }
      @Post('b')
      b(@Body() bodies: unknown[]): unknown[] {
        return bodies;
      }
      helper(): string {
        return 'not a route, not batched';
      }
    }
    @Module({
      imports: [BatchModule.forRoot({ batchWaitTimeoutMs: 7 })],
      controllers: [LayeredController],
      providers: [Scorer],
    })
    class AppModule {}

    const app = await startApp(platform, AppModule);
    try {
      const registry = app.get(BatchRegistry);
      const controller = app.get(LayeredController);
      const scorer = app.get(Scorer);
      const summary = (instance: object, key: string) => {
        const batcher = registry.batcherOf(instance, key);
        return (
          batcher && [batcher.name, batcher.maxBatchSize, batcher.batchWaitTimeoutMs, batcher.maxConcurrentBatches]
        );
      };
      expect(summary(controller, 'a')).toEqual(['custom', 5, 7, 1]);
      expect(summary(controller, 'b')).toEqual(['LayeredController.b', 3, 7, 1]);
      expect(summary(scorer, 'score')).toEqual(['Scorer.score', 3, 7, 1]);
      expect(summary(scorer, 'rank')).toEqual(['Scorer.rank', 9, 7, 1]);
      expect(registry.batcherOf(controller, 'helper')).toBeUndefined();
      expect(controller.helper()).toBe('not a route, not batched');
      const response = await request(app.getHttpServer()).post('/b').send({ n: 1 });
      expect([response.status, response.body, response.headers['x-batch-size']]).toEqual([200, { n: 1 }, '1']);
      expect(registry.batchers).toHaveLength(4);
    } finally {
      await app.close();
    }
  });
});

describe('BatchModule.forRootAsync()', () => {
  it('makes the module defaults with a factory and its injected dependencies', async () => {
    const BATCH_SIZE = Symbol('BATCH_SIZE');
    @Module({ providers: [{ provide: BATCH_SIZE, useValue: 6 }], exports: [BATCH_SIZE] })
    class ConfigModule {}
    @Injectable()
    class Ranker {
      readonly rank = batched(this, (texts: string[]) => texts.map((text) => text.length));
    }
    @Module({
      imports: [
        BatchModule.forRootAsync({
          imports: [ConfigModule],
          inject: [BATCH_SIZE],
          useFactory: async (maxBatchSize: number) => ({ maxBatchSize }),
        }),
      ],
      providers: [Ranker],
    })
    class AppModule {}
    const testing = await Test.createTestingModule({ imports: [AppModule] }).compile();
    const context = await testing.init();
    try {
      const ranker = context.get(Ranker);
      expect(context.get(BatchRegistry).batcherOf(ranker, 'rank')?.maxBatchSize).toBe(6);
      expect(await ranker.rank('four')).toBe(4);
    } finally {
      await context.close();
    }
  });
});

describe.each(PLATFORMS)('batched() providers on %s', (platform) => {
  it('lets a service call a batched provider with ONE item and get ONE result; concurrent calls share one batch', async () => {
    @Injectable()
    class Embedder {
      readonly batches: string[][] = [];
      readonly embed = batched(
        this,
        async (texts: string[], { batchId }) => {
          this.batches.push(texts);
          return texts.map((text) => ({ length: text.length, batchId }));
        },
        { maxBatchSize: 3, batchWaitTimeoutMs: 60_000 },
      );
      readonly tokens = batched(this, async function* (prompts: string[]) {
        yield prompts.map((prompt) => `${prompt}!`);
        yield prompts.map((prompt) => `${prompt}?`);
      });
    }
    @Injectable()
    class Pipeline {
      constructor(private readonly embedder: Embedder) {}
      lengths(texts: string[]): Promise<number[]> {
        return Promise.all(texts.map(async (text) => (await this.embedder.embed(text)).length));
      }
    }
    @Controller()
    class LengthsController {
      constructor(private readonly pipeline: Pipeline) {}
      @Get('lengths')
      lengths(@Query('texts') texts: string): Promise<number[]> {
        return this.pipeline.lengths(texts.split(','));
      }
    }
    @Module({ imports: [BatchModule.forRoot()], controllers: [LengthsController], providers: [Embedder, Pipeline] })
    class AppModule {}

    const app = await startApp(platform, AppModule);
    try {
      const embedder = app.get(Embedder);
      expectTypeOf(embedder.embed).parameter(0).toEqualTypeOf<string>();
      expectTypeOf(embedder.embed).returns.toEqualTypeOf<Promise<{ length: number; batchId: number }>>();
      expectTypeOf<typeof embedder.tokens.stream>().returns.toEqualTypeOf<AsyncIterableIterator<string>>();

      const response = await request(app.getHttpServer()).get('/lengths').query({ texts: 'a,bbb,cc' });
      expect([response.status, response.body]).toEqual([200, [1, 3, 2]]);
      expect(embedder.batches).toEqual([['a', 'bbb', 'cc']]);

      const direct = await Promise.all(['xy', 'z', 'uvw'].map((text) => embedder.embed(text)));
      expect(direct).toEqual([
        { length: 2, batchId: 2 },
        { length: 1, batchId: 2 },
        { length: 3, batchId: 2 },
      ]);

      const streamed: string[] = [];
      for await (const token of embedder.tokens.stream('x')) streamed.push(token);
      expect([streamed, await embedder.tokens('y')]).toEqual([
        ['x!', 'x?'],
        ['y!', 'y?'],
      ]);
    } finally {
      await app.close();
    }
  });
});
