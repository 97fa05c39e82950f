import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BatchContext } from '@microbatch/core';
import { writeJson } from '@microbatch/core/http';
import type { TextGenerationInput } from '@microbatch/inference';
import { Batch } from '@microbatch/nest';
import {
  type NodeHandler,
  createHealth,
  instrumentBatcher,
  metricsHandler,
  toNodeHandler,
} from '@microbatch/prometheus';
import { Body, Controller, Get, Inject, Optional, Post, Query, Req, Res, UseInterceptors } from '@nestjs/common';
import { Registry } from 'prom-client';
import { type CompletionsEndpoint, createCompletionsEndpoint } from '../completions-endpoint.js';
import { type ModelList, modelList } from '../models-endpoint.js';
import type { TextCompletionService } from '../text-completion-model.js';
import { PlainTextInterceptor } from './plain-text.interceptor.js';
import type { TextCompletionAppOptions } from '../app-options.js';
import { TEXT_COMPLETION_APP_OPTIONS, TEXT_COMPLETION_SERVICE } from './text-completion.constants.js';
import { TextQueryPipe } from './text-query.pipe.js';

/**
 * The text-completion routes on NestJS. Every constructor parameter names its token with `@Inject()`: apps run
 * under tsx, which emits no decorator metadata for Nest to read the parameter types from.
 *
 * @example
 * ```ts
 * @Module({ controllers: [TextCompletionController], providers: [...] })
 * ```
 */
@Controller()
export class TextCompletionController {
  readonly #completions: CompletionsEndpoint;
  readonly #liveness: NodeHandler;
  readonly #readiness: NodeHandler;
  readonly #metrics: NodeHandler;
  readonly #models: ModelList;

  constructor(
    @Inject(TEXT_COMPLETION_SERVICE) private readonly service: TextCompletionService,
    @Optional() @Inject(TEXT_COMPLETION_APP_OPTIONS) options: TextCompletionAppOptions = {},
  ) {
    this.#completions = createCompletionsEndpoint(service, options.limits, options.clientKey);
    this.#models = modelList(service.id, new Date());
    // Liveness always 200; readiness 503 while the model loads and once the app drains.
    // The same Node handlers as the Express and Koa apps: the same bytes and headers (`Cache-Control: no-store`).
    const health = createHealth({
      batchers: service.batchers,
      ready: () => service.isReady(),
      ...(options.readiness === undefined ? {} : { mode: options.readiness }),
    });
    this.#liveness = toNodeHandler(() => health.liveness());
    this.#readiness = toNodeHandler(() => health.readiness());
    // Prometheus metrics of the service's batchers, as the Express and Koa apps serve them.
    const registry = new Registry();
    for (const batcher of service.batchers) instrumentBatcher(batcher, { registry });
    this.#metrics = metricsHandler(registry);
  }

  /**
   * The tutorial's route, batched the Nest way: the pipe checks each request's `text`, then this method runs once
   * per batch with every request's input, like Ray Serve's `@serve.batch` handler.
   */
  @Get()
  @UseInterceptors(PlainTextInterceptor)
  @Batch()
  async complete(@Query('text', TextQueryPipe) inputs: TextGenerationInput[], context: BatchContext) {
    const outputs = await this.service.runBatch(inputs, { signal: context.signal });
    return outputs.map((output, i) => (output instanceof Error ? output : `${inputs[i]?.prompt}${output.text}`));
  }

  /** OpenAI's completions API (JSON or `stream: true`); the shared endpoint writes the response itself. */
  @Post('v1/completions')
  completions(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return this.#completions(body, res);
  }

  /** What `client.models.list()` of the official OpenAI clients reads. */
  @Get('v1/models')
  models(@Res() res: ServerResponse): void {
    writeJson(res, 200, this.#models);
  }

  @Get('healthz')
  healthz(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.#liveness(req, res);
  }

  @Get('readyz')
  readyz(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.#readiness(req, res);
  }

  @Get('metrics')
  metrics(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.#metrics(req, res);
  }
}
