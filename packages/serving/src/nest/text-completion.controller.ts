import type { IncomingMessage, ServerResponse } from 'node:http';
import { serveBatched, writeHttpError, writeJson } from '@microbatch/core/http';
import {
  type NodeHandler,
  createGenerationMetrics,
  createHealth,
  dashboardHandler,
  metricsHandler,
  toNodeHandler,
} from '@microbatch/prometheus';
import { Body, Controller, Get, Inject, Optional, Post, Query, Req, Res } from '@nestjs/common';
import { Registry } from 'prom-client';
import type { TextCompletionAppOptions } from '../app-options.js';
import { type ClientKey, fairnessKeyOf } from '../client-key.js';
import { setDecodeBatchHeaders } from '../completion-response.js';
import { type ChatCompletionsEndpoint, createChatCompletionsEndpoint } from '../chat-endpoint.js';
import { type CompletionsEndpoint, createCompletionsEndpoint } from '../completions-endpoint.js';
import { type ModelList, modelList } from '../models-endpoint.js';
import { instrumentTextCompletionService } from '../service-metrics.js';
import type { TextCompletionService } from '../text-completion-model.js';
import { parseTextQuery, textQueryAnswer } from '../text-query.js';
import { TEXT_COMPLETION_APP_OPTIONS, TEXT_COMPLETION_SERVICE } from './text-completion.constants.js';

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
  readonly #chat: ChatCompletionsEndpoint;
  readonly #models: ModelList;
  readonly #clientKey: ClientKey | undefined;
  readonly #dashboard: NodeHandler;

  constructor(
    @Inject(TEXT_COMPLETION_SERVICE) private readonly service: TextCompletionService,
    @Optional() @Inject(TEXT_COMPLETION_APP_OPTIONS) options: TextCompletionAppOptions = {},
  ) {
    this.#clientKey = options.clientKey;
    const registry = new Registry();
    const generation = createGenerationMetrics({ model: service.id, registry });
    this.#completions = createCompletionsEndpoint(service, options.limits, options.clientKey, generation);
    this.#chat = createChatCompletionsEndpoint(service, undefined, options.clientKey);
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
    // Prometheus metrics of the service's batchers (and decode loop), as the Express and Koa apps serve them.
    instrumentTextCompletionService(service, registry);
    this.#metrics = metricsHandler(registry);
    this.#dashboard = dashboardHandler({ registry, title: `microbatch · ${service.id}` });
  }

  /**
   * The tutorial's route, through the service's own batcher (as the Express and Koa apps do): every batcher option
   * the service was made with (`maxLatencyMs`, `maxQueueSize`, the pool's scheduling) applies here too, and the
   * answer carries the `X-Batch-*` headers of the batch that ran it.
   */
  @Get()
  complete(@Query('text') text: unknown, @Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    const { service } = this;
    return serveBatched(service.generate, {
      res,
      readInput: () => parseTextQuery(text, (body) => service.validate(body)),
      // Each client (its address, or the app's `clientKey`) gets a fair share of admission and of each batch.
      callOptions: () => ({ fairnessKey: fairnessKeyOf(req, this.#clientKey) }),
      setHeaders: (headers) => {
        for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
      },
      send: (result) => {
        // Continuous scheduling: the decode loop's batch, not the batcher's single-request dispatch.
        setDecodeBatchHeaders(res, [result]);
        res.statusCode = 200;
        res.setHeader('Content-Type', 'text/plain; charset=utf-8');
        res.end(textQueryAnswer(text, result));
      },
      sendError: (error) => writeHttpError(res, error),
    });
  }

  /** OpenAI's completions API (JSON or `stream: true`); the shared endpoint writes the response itself. */
  @Post('v1/completions')
  completions(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return this.#completions(body, res);
  }

  /** OpenAI's chat completions API (JSON or `stream: true`), through the same batchers. */
  @Post('v1/chat/completions')
  chatCompletions(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return this.#chat(body, res);
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

  /** A live page of the metrics: batch sizes, queue, throughput, latency percentiles, refusals. */
  @Get('dashboard')
  dashboard(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.#dashboard(req, res);
  }

  @Get('metrics')
  metrics(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.#metrics(req, res);
  }
}
