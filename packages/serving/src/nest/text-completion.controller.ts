import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BatchContext } from '@microbatch/core';
import { writeJson } from '@microbatch/core/http';
import type { TextGenerationInput } from '@microbatch/inference';
import { Batch } from '@microbatch/nest';
import {
  type Health,
  createGenerationMetrics,
  createHealth,
  dashboardHandler,
  instrumentBatcher,
  type NodeHandler,
  scrapeMetrics,
} from '@microbatch/prometheus';
import { Body, Controller, Get, Inject, Post, Query, Req, Res, UseInterceptors } from '@nestjs/common';
import { Registry } from 'prom-client';
import { type CompletionsEndpoint, createCompletionsEndpoint } from '../completions-endpoint.js';
import { type ModelList, modelList } from '../models-endpoint.js';
import type { TextCompletionService } from '../text-completion-model.js';
import { PlainTextInterceptor } from './plain-text.interceptor.js';
import { TEXT_COMPLETION_SERVICE } from './text-completion.constants.js';
import { TextQueryPipe } from './text-query.pipe.js';

/** The health probes' answer on a Node response. */
function sendProbe(res: ServerResponse, probe: { readonly status: number; readonly body: unknown }): void {
  writeJson(res, probe.status, probe.body);
}

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
  readonly #health: Health;
  readonly #models: ModelList;
  readonly #registry = new Registry();
  readonly #dashboard: NodeHandler;

  constructor(@Inject(TEXT_COMPLETION_SERVICE) private readonly service: TextCompletionService) {
    const generation = createGenerationMetrics({ model: service.id, registry: this.#registry });
    this.#completions = createCompletionsEndpoint(service, {}, generation);
    this.#models = modelList(service.id, new Date());
    // Liveness always 200; readiness 503 while the model loads and once the app drains.
    this.#health = createHealth({ batchers: service.batchers, ready: () => service.isReady() });
    // Prometheus metrics of the service's batchers, as the Express and Koa apps serve them.
    for (const batcher of service.batchers) instrumentBatcher(batcher, { registry: this.#registry });
    this.#dashboard = dashboardHandler({ registry: this.#registry, title: `microbatch · ${service.id}` });
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
  healthz(@Res() res: ServerResponse): void {
    sendProbe(res, this.#health.liveness());
  }

  @Get('readyz')
  async readyz(@Res() res: ServerResponse): Promise<void> {
    sendProbe(res, await this.#health.readiness());
  }

  /** A live page of the metrics: batch sizes, queue, throughput, latency percentiles, refusals. */
  @Get('dashboard')
  dashboard(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.#dashboard(req, res);
  }

  @Get('metrics')
  async metrics(@Res() res: ServerResponse): Promise<void> {
    const { status, contentType, body } = await scrapeMetrics(this.#registry);
    res.statusCode = status;
    res.setHeader('Content-Type', contentType);
    res.end(body);
  }
}
