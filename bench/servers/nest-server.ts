// Bench server on NestJS (platform-express): POST <workload path> batched with @Batch() over the worker pool.
// Configured by the driver through the environment (see bench-app.ts); prints one ready line with its port.
// tsx emits no decorator metadata, so every constructor parameter names its token with @Inject().
import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type { BatchContext } from '@microbatch/core';
import { Batch, BatchModule, BatchRegistry } from '@microbatch/nest';
import { BadRequestException, Body, Controller, HttpCode, Inject, Module, Post } from '@nestjs/common';
import type { PipeTransform } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { SNAPSHOT_PATH, announce, closeOnSignal, snapshot, startModel } from './bench-app.js';
import type { BenchModel } from './bench-app.js';

const model = await startModel();
const { workload } = model.config;
const MODEL = Symbol('BenchModel');

/** Parses each request's body on its own, before it joins a batch (as a validation pipe would). */
class ParseBody implements PipeTransform {
  transform(body: unknown): unknown {
    try {
      return workload.parse(body);
    } catch (error) {
      throw new BadRequestException(error instanceof Error ? error.message : String(error));
    }
  }
}

// `@Batch()` hands `batchKey` the request's arguments (one per parameter): here just the parsed body.
const { batchKey, ...batchOptions } = model.options;

@Controller()
class BenchController {
  constructor(
    @Inject(MODEL) private readonly model: BenchModel,
    @Inject(BatchRegistry) private readonly registry: BatchRegistry,
  ) {}

  @Post(workload.path)
  @Batch({ ...batchOptions, ...(batchKey === undefined ? {} : { batchKey: ([input]: [unknown]) => batchKey(input) }) })
  async run(@Body(new ParseBody()) inputs: unknown[], context: BatchContext): Promise<unknown[]> {
    const results = await this.model.handler(inputs, context);
    return results.map((result) => (result instanceof Error ? result : workload.respond(result)));
  }

  @Post(SNAPSHOT_PATH)
  @HttpCode(200)
  stats(): unknown {
    const batcher = this.registry.batcherOf(this, 'run');
    if (batcher === undefined) throw new Error('the batched route has no batcher');
    return snapshot(this.model, batcher);
  }
}

@Module({
  imports: [BatchModule.forRoot()],
  controllers: [BenchController],
  providers: [{ provide: MODEL, useValue: model }],
})
class BenchModule {}

const app = await NestFactory.create(BenchModule, { logger: ['error'] });
await app.listen(0, '127.0.0.1');
announce(((app.getHttpServer() as Server).address() as AddressInfo).port);
closeOnSignal(async () => {
  await app.close();
  await model.pool.close();
});
