import { BatchError, exposeError } from '@microbatch/core';
import { Batch, BatchInterceptor, BatchModule, BatchRegistry, batched } from '@microbatch/nest';
import {
  Body,
  Controller,
  ForbiddenException,
  HttpException,
  Get,
  Injectable,
  type LoggerService,
  Module,
  Post,
  Res,
  Scope,
  Sse,
  type Type,
  UseInterceptors,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { describe, expect, it, vi } from 'vitest';
import { deferred } from '@microbatch/test-kit';
import { PLATFORMS, startApp } from './nest-helpers/nest-app.js';

const GENERIC_500 = { error: { code: 'HANDLER_ERROR', message: 'Internal Server Error' } };

describe.each(PLATFORMS)('@Batch() error responses on %s', (platform) => {
  type Post = (path: string, body?: object) => request.Test;

  async function withApp(controller: Type, run: (post: Post, errors: unknown[]) => Promise<void>): Promise<void> {
    @Module({ imports: [BatchModule.forRoot()], controllers: [controller] })
    class AppModule {}
    const errors: unknown[] = [];
    const logger: LoggerService = { log: () => undefined, warn: () => undefined, error: (error) => errors.push(error) };
    const app = await startApp(platform, AppModule, (nest) => nest.useLogger(logger));
    try {
      await run((path, body = {}) => request(app.getHttpServer()).post(path).send(body), errors);
    } finally {
      await app.close();
    }
  }

  it('answers 500 with a generic message for a handler that throws, without leaking its message', async () => {
    @Controller()
    class FailingController {
      @Post('throw')
      @Batch({ maxBatchSize: 2, batchWaitTimeoutMs: 60_000 })
      fail(): never {
        throw new Error('database password is hunter2');
      }
      @Post('exposed')
      @Batch()
      exposed(): never {
        throw exposeError(new Error('the model is warming up'));
      }
    }
    await withApp(FailingController, async (post, errors) => {
      const responses = await Promise.all([post('/throw'), post('/throw')]);
      // Both requests failed with the one error of their batch, which the server logs once.
      expect(errors).toEqual([new Error('database password is hunter2')]);
      for (const response of responses) {
        expect([response.status, response.body]).toEqual([500, GENERIC_500]);
        expect(response.text).not.toContain('hunter2');
        expect(response.headers['content-type']).toMatch(/^application\/json/);
      }
      const exposed = await post('/exposed');
      expect([exposed.status, exposed.body]).toEqual([
        500,
        { error: { code: 'HANDLER_ERROR', message: 'the model is warming up' } },
      ]);
    });
  });

  it('fails only the item whose result is an Error, and maps BatchError codes and details', async () => {
    @Controller()
    class ItemsController {
      @Post('items')
      @Batch({ maxBatchSize: 3, batchWaitTimeoutMs: 60_000 })
      items(@Body() bodies: { kind: string }[]): unknown[] {
        return bodies.map(({ kind }) => {
          if (kind === 'crash') return new Error('segfault in kernel');
          if (kind === 'invalid') {
            return new BatchError('INVALID_INPUT', '`prompt` is longer than 512 tokens', {
              details: { field: 'prompt' },
            });
          }
          return { ok: kind };
        });
      }
      @Post('short')
      @Batch({ maxBatchSize: 2, batchWaitTimeoutMs: 60_000 })
      short(): unknown[] {
        return ['only one result for two requests'];
      }
      @Post('forbidden')
      @Batch()
      forbidden(): never {
        throw new ForbiddenException('no quota left');
      }
    }
    await withApp(ItemsController, async (post) => {
      const [ok, crash, invalid] = await Promise.all([
        post('/items', { kind: 'fine' }),
        post('/items', { kind: 'crash' }),
        post('/items', { kind: 'invalid' }),
      ]);
      expect([ok.status, ok.body, ok.headers['x-batch-size']]).toEqual([200, { ok: 'fine' }, '3']);
      expect([crash.status, crash.body]).toEqual([500, GENERIC_500]);
      expect([invalid.status, invalid.body]).toEqual([
        400,
        {
          error: { code: 'INVALID_INPUT', message: '`prompt` is longer than 512 tokens', details: { field: 'prompt' } },
        },
      ]);

      const short = await Promise.all([post('/short'), post('/short')]);
      for (const response of short) {
        expect([response.status, response.body]).toEqual([
          500,
          { error: { code: 'BAD_HANDLER_RESULT', message: 'Internal Server Error' } },
        ]);
      }
      // A Nest HttpException thrown on purpose keeps its own status and body.
      const forbidden = await post('/forbidden');
      expect([forbidden.status, forbidden.body]).toEqual([
        403,
        { statusCode: 403, message: 'no quota left', error: 'Forbidden' },
      ]);
    });
  });

  it('reports each 500 once to BatchModule.forRoot({ onError }) instead of the Logger, and never a 4xx or 503', async () => {
    const failure = new Error('secret: weights not loaded');
    @Controller()
    class ReportedController {
      @Post('fail')
      @Batch({ maxBatchSize: 2, batchWaitTimeoutMs: 60_000 })
      fail(): never {
        throw failure;
      }
      @Post('invalid')
      @Batch()
      invalid(): unknown[] {
        return [new BatchError('INVALID_INPUT', 'no')];
      }
      @Post('full')
      @Batch()
      full(): unknown[] {
        return [new BatchError('QUEUE_FULL', 'busy')];
      }
    }
    const reported: unknown[] = [];
    @Module({
      imports: [BatchModule.forRoot({ onError: (error) => reported.push(error) })],
      controllers: [ReportedController],
    })
    class AppModule {}
    const logged: unknown[] = [];
    const logger: LoggerService = { log: () => undefined, warn: () => undefined, error: (error) => logged.push(error) };
    const app = await startApp(platform, AppModule, (nest) => nest.useLogger(logger));
    try {
      const post = (path: string) => request(app.getHttpServer()).post(path).send({});
      const failed = await Promise.all([post('/fail'), post('/fail')]);
      const invalid = await post('/invalid');
      const full = await post('/full');
      expect(failed.map((response) => response.status)).toEqual([500, 500]);
      expect([invalid.status, full.status]).toEqual([400, 503]);
      expect(reported).toEqual([failure]);
      expect(logged).toEqual([]);
    } finally {
      await app.close();
    }
  });

  it('lets a subclass of BatchInterceptor change how errors become exceptions through its protected methods', async () => {
    @Injectable()
    class TeapotInterceptor extends BatchInterceptor {
      protected override toException(error: unknown, response: unknown): HttpException {
        const exception = super.toException(error, response);
        return exception.getStatus() === 500
          ? new HttpException({ error: { code: 'TEAPOT', message: 'short and stout' } }, 418)
          : exception;
      }
    }
    // Applied on the class, the subclass runs outside the BatchInterceptor that @Batch() adds, which steps aside.
    @Controller()
    @UseInterceptors(TeapotInterceptor)
    class TeapotController {
      @Post('brew')
      @Batch()
      brew(): never {
        throw new Error('no water');
      }
      @Post('full')
      @Batch()
      full(): unknown[] {
        return [new BatchError('QUEUE_FULL', 'busy')];
      }
    }
    @Module({ imports: [BatchModule.forRoot({ onError: () => undefined })], controllers: [TeapotController] })
    class AppModule {}
    const app = await startApp(platform, AppModule);
    try {
      const brew = await request(app.getHttpServer()).post('/brew').send({});
      expect([brew.status, brew.body]).toEqual([418, { error: { code: 'TEAPOT', message: 'short and stout' } }]);
      const full = await request(app.getHttpServer()).post('/full').send({});
      expect([full.status, full.body.error.code, full.headers['retry-after']]).toEqual([503, 'QUEUE_FULL', '1']);
    } finally {
      await app.close();
    }
  });

  it('answers 503 QUEUE_FULL with Retry-After, and 504 DEADLINE_EXCEEDED for an item that waited too long', async () => {
    const held = deferred();
    const entered = deferred();
    const seen: string[] = [];
    @Controller()
    class BusyController {
      @Post('busy')
      @Batch({ maxBatchSize: 1, maxQueueSize: 1, retryAfterSeconds: 7 })
      async busy(@Body() bodies: { id: string }[]): Promise<string[]> {
        seen.push(...bodies.map((body) => body.id));
        entered.resolve();
        await held.promise;
        return bodies.map((body) => body.id);
      }
      @Post('deadline')
      @Batch({ maxBatchSize: 1, timeoutMs: 50 })
      async deadline(@Body() bodies: { id: string }[]): Promise<string[]> {
        seen.push(...bodies.map((body) => body.id));
        await held.promise;
        return bodies.map((body) => body.id);
      }
    }
    @Module({ imports: [BatchModule.forRoot()], controllers: [BusyController] })
    class AppModule {}
    const app = await startApp(platform, AppModule);
    try {
      const registry = app.get(BatchRegistry);
      const busy = registry.batcherOf(app.get(BusyController), 'busy');
      const post = (path: string, id: string) => request(app.getHttpServer()).post(path).send({ id });
      const running = post('/busy', 'running').then((response) => response);
      await entered.promise;
      const queued = post('/busy', 'queued').then((response) => response);
      await vi.waitFor(() => expect(busy?.queueLength).toBe(1), { timeout: 5_000 });
      const refused = await post('/busy', 'refused');
      expect([refused.status, refused.body, refused.headers['retry-after']]).toEqual([
        503,
        {
          error: {
            code: 'QUEUE_FULL',
            message: 'The server is at capacity: its queue is full; retry later',
            retryAfterSeconds: 7,
          },
        },
        '7',
      ]);

      // `late` runs (held) past its deadline; `later`, sent once `late` runs, expires in the queue behind it.
      const late = post('/deadline', 'late').then((response) => response);
      await vi.waitFor(() => expect(seen).toContain('late'), { timeout: 5_000 });
      const later = await post('/deadline', 'later');
      expect(seen).not.toContain('later');
      expect([(await late).status, (await late).body]).toEqual([
        504,
        { error: { code: 'DEADLINE_EXCEEDED', message: 'Deadline of 50 ms exceeded while running' } },
      ]);
      expect([later.status, later.body]).toEqual([
        504,
        { error: { code: 'DEADLINE_EXCEEDED', message: 'Deadline of 50 ms exceeded while queued' } },
      ]);

      held.resolve();
      expect((await running).text).toBe('running');
      expect((await queued).text).toBe('queued');
      expect(seen).toEqual(['running', 'late', 'queued']);
    } finally {
      held.resolve();
      await app.close();
    }
  });
});

describe('misuse', () => {
  it('rejects bad options where they are written, naming the decorator, the option and the value', () => {
    expect(() => {
      class CompletionController {
        @Batch({ maxBatchSize: 0 })
        generate(): void {}
      }
      return CompletionController;
    }).toThrow(
      new TypeError(
        '@Batch(): Expected `maxBatchSize` to be an integer >= 1, got `0` (number) (in CompletionController.generate)',
      ),
    );
    expect(() => Batch({ maxBatchsize: 4 } as object)(class Typo {})).toThrow(
      new TypeError('@Batch(): Unknown option `maxBatchsize` (in Typo)'),
    );
    expect(() => Batch({ name: 'shared' })(class Named {})).toThrow(
      new TypeError('@Batch(): Option `name` is not accepted here; set it on a method-level @Batch() (in Named)'),
    );
    expect(() =>
      Batch({ paramTypes: ['GenerateDto'] } as object)(class {}.prototype, 'generate', { value: () => [] }),
    ).toThrow(/^@Batch\(\): Expected `paramTypes` to be an array of classes, got `\["GenerateDto"\]` \(array\)/);
    expect(() => BatchModule.forRoot({ maxQueueSize: -1 })).toThrow(
      new TypeError('BatchModule.forRoot(): Expected `maxQueueSize` to be an integer >= 1, got `-1` (number)'),
    );
    expect(() => BatchModule.forRoot({ batchKey: () => 1 } as object)).toThrow(
      new TypeError('BatchModule.forRoot(): Option `batchKey` is not accepted here; set it on @Batch() or batched()'),
    );
    expect(() => BatchModule.forRoot({ onError: 'log' } as never)).toThrow(
      new TypeError(
        'BatchModule.forRoot(): Expected `onError` of `BatchModule` to be a function, got `"log"` (string)',
      ),
    );
    expect(() => Batch({ onError: () => undefined } as object)(class Reporting {})).toThrow(
      new TypeError('@Batch(): Option `onError` is not accepted here; set it on BatchModule.forRoot() (in Reporting)'),
    );
    expect(() => BatchModule.forRootAsync({} as never)).toThrow(
      new TypeError('BatchModule.forRootAsync(): Expected `useFactory` to be a function, got `undefined` (undefined)'),
    );
    expect(() => batched({}, (xs: number[]) => xs, { onBatchError: 'retry' as never })).toThrow(
      new TypeError(
        "batched(): Expected `onBatchError` to be one of 'fail-batch', 'isolate', got `\"retry\"` (string) (in Object)",
      ),
    );
  });

  it('rejects @Batch() twice on one method', () => {
    expect(() => {
      class Twice {
        @Batch()
        @Batch()
        run(): void {}
      }
      return Twice;
    }).toThrow(new TypeError('@Batch(): Twice.run is decorated with @Batch() twice; keep one'));
  });

  it('fails the bootstrap for BatchInterceptor on a route without @Batch(), bad async options, or no BatchModule', async () => {
    @Controller()
    class PlainController {
      @Post('plain')
      @UseInterceptors(BatchInterceptor)
      plain(): string {
        return 'plain';
      }
    }
    @Module({ imports: [BatchModule.forRoot()], controllers: [PlainController] })
    class InterceptorOnlyModule {}
    await expect(
      Test.createTestingModule({ imports: [InterceptorOnlyModule] })
        .compile()
        .then((m) => m.init()),
    ).rejects.toThrow(
      new TypeError(
        '@Batch(): BatchInterceptor is applied to PlainController.plain, which has no @Batch(); ' +
          'decorate the method or its class with @Batch()',
      ),
    );

    @Module({ imports: [BatchModule.forRootAsync({ useFactory: async () => ({ maxConcurrentBatches: 1.5 }) })] })
    class AsyncModule {}
    await expect(Test.createTestingModule({ imports: [AsyncModule] }).compile()).rejects.toThrow(
      new TypeError(
        'BatchModule.forRootAsync(): Expected `maxConcurrentBatches` to be an integer >= 1, got `1.5` (number)',
      ),
    );

    @Controller()
    class LonelyController {
      @Post('lonely')
      @Batch()
      lonely(bodies: unknown[]): unknown[] {
        return bodies;
      }
    }
    @Module({ controllers: [LonelyController] })
    class NoBatchModule {}
    await expect(Test.createTestingModule({ imports: [NoBatchModule] }).compile()).rejects.toThrow(
      new TypeError(
        '@Batch(): BatchModule is not imported; add BatchModule.forRoot() to the imports of the root module',
      ),
    );
  });

  it('answers 500 and logs the misuse when BatchInterceptor is applied globally to a route without @Batch()', async () => {
    @Controller()
    class HealthController {
      @Get('health')
      health(): string {
        return 'ok';
      }
    }
    @Module({ imports: [BatchModule.forRoot()], controllers: [HealthController] })
    class AppModule {}
    const errors: unknown[] = [];
    const logger: LoggerService = { log: () => undefined, warn: () => undefined, error: (error) => errors.push(error) };
    const app = await startApp('express', AppModule, (nest) => {
      nest.useLogger(logger);
      nest.useGlobalInterceptors(nest.get(BatchInterceptor));
    });
    try {
      const response = await request(app.getHttpServer()).get('/health');
      expect(response.status).toBe(500);
      expect(errors).toContainEqual(
        new TypeError(
          '@Batch(): BatchInterceptor is applied to HealthController.health, which has no @Batch(); ' +
            'decorate the method or its class with @Batch()',
        ),
      );
    } finally {
      await app.close();
    }
  });

  it('fails the bootstrap for batched routes Nest would not answer: @Sse() and @Res() without passthrough', async () => {
    const init = (controller: Type) => {
      @Module({ imports: [BatchModule.forRoot()], controllers: [controller] })
      class AppModule {}
      return Test.createTestingModule({ imports: [AppModule] })
        .compile()
        .then((testing) => testing.init());
    };
    @Controller()
    class SseController {
      @Sse('events')
      @Batch()
      events(): unknown[] {
        return [];
      }
    }
    await expect(init(SseController)).rejects.toThrow(/^@Batch\(\): SseController\.events is an @Sse\(\) route;/);

    @Controller()
    class ResController {
      @Post('raw')
      @Batch()
      raw(@Res() responses: unknown[]): void {
        void responses;
      }
    }
    await expect(init(ResController)).rejects.toThrow(/^@Batch\(\): ResController\.raw injects @Res\(\) or @Next\(\)/);

    @Controller()
    class PassthroughController {
      @Post('passthrough')
      @Batch()
      passthrough(@Res({ passthrough: true }) responses: unknown[]): string[] {
        return responses.map(() => 'ok');
      }
    }
    const context = await init(PassthroughController);
    await context.close();
  });

  it('fails the bootstrap for a request-scoped batched class, and a batched() call on an instance Nest does not manage', async () => {
    @Controller({ path: 'scoped', scope: Scope.REQUEST })
    class ScopedController {
      @Post()
      @Batch()
      run(bodies: unknown[]): unknown[] {
        return bodies;
      }
    }
    @Module({ imports: [BatchModule.forRoot()], controllers: [ScopedController] })
    class ScopedModule {}
    await expect(
      Test.createTestingModule({ imports: [ScopedModule] })
        .compile()
        .then((m) => m.init()),
    ).rejects.toThrow(/^@Batch\(\): ScopedController is request-scoped/);

    @Injectable()
    class Embedder {
      readonly embed = batched(this, (texts: string[]) => texts.map((text) => text.length));
    }
    expect(() => new Embedder().embed('x')).toThrow(/^batched\(\): Embedder\.batched method has no batcher yet/);
    class Unmanaged {
      @Batch()
      run(bodies: unknown[]): unknown[] {
        return bodies;
      }
    }
    expect(() => new Unmanaged().run([])).toThrow(
      /^@Batch\(\): Unmanaged\.run was called on an instance that BatchModule does not manage/,
    );
  });
});
