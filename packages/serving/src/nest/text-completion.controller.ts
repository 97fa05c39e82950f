import type { IncomingMessage, ServerResponse } from 'node:http';
import { serveBatched, writeHttpError, writeJson } from '@microbatch/core/http';
import { type Health, createHealth, scrapeMetrics } from '@microbatch/prometheus';
import { Body, Controller, Get, Inject, Post, Query, Req, Res } from '@nestjs/common';
import { Registry } from 'prom-client';
import { type CompletionsEndpoint, createCompletionsEndpoint } from '../completions-endpoint.js';
import { type ModelList, modelList } from '../models-endpoint.js';
import { instrumentTextCompletionService } from '../service-metrics.js';
import type { TextCompletionService } from '../text-completion-model.js';
import { decodeBatchHeaders } from '../completion-response.js';
import { parseTextQuery, textQueryAnswer } from '../text-query.js';
import type { TextCompletionAppOptions } from '../app-options.js';
import { TEXT_COMPLETION_APP_OPTIONS, TEXT_COMPLETION_SERVICE } from './text-completion.constants.js';

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

  constructor(
    @Inject(TEXT_COMPLETION_SERVICE) private readonly service: TextCompletionService,
    @Inject(TEXT_COMPLETION_APP_OPTIONS) options: TextCompletionAppOptions,
  ) {
    this.#completions = createCompletionsEndpoint(service, options.limits);
    this.#models = modelList(service.id, new Date());
    // Liveness always 200; readiness 503 while the model loads and once the app drains.
    this.#health = createHealth({ batchers: service.batchers, ready: () => service.isReady() });
    // Prometheus metrics of the service's batchers, as the Express and Koa apps serve them.
    instrumentTextCompletionService(service, this.#registry);
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
      // Each client address gets a fair share of admission and of each batch.
      callOptions: () => ({ fairnessKey: req.socket.remoteAddress }),
      setHeaders: (headers) => {
        for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
      },
      send: (result) => {
        // Continuous scheduling: the decode loop's batch, not the batcher's single-request dispatch.
        for (const [name, value] of Object.entries(decodeBatchHeaders([result]))) res.setHeader(name, value);
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

  @Get('metrics')
  async metrics(@Res() res: ServerResponse): Promise<void> {
    const { status, contentType, body } = await scrapeMetrics(this.#registry);
    res.statusCode = status;
    res.setHeader('Content-Type', contentType);
    res.end(body);
  }
}
