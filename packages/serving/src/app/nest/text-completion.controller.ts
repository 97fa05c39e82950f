import type { IncomingMessage, ServerResponse } from 'node:http';
import { Body, Controller, Get, Inject, Optional, Post, Query, Req, Res } from '@nestjs/common';
import type { TextCompletionAppOptions } from '../app-options.js';
import { textCompletionHandlers } from '../text-completion-routes.js';
import type { TextCompletionService } from '../../service/text-completion-service.js';
import { ServingController } from './serving.controller.js';
import { TEXT_COMPLETION_APP_OPTIONS, TEXT_COMPLETION_SERVICE } from './text-completion.constants.js';

/**
 * The text-completion routes on NestJS: the shared table's handlers (`textCompletionHandlers`, the same as the other
 * frameworks' apps), each under its Nest decorator; the model list, probes and metrics inherited from
 * `ServingController`. Every constructor parameter names its token with `@Inject()`:
 * apps run under tsx, which emits no decorator metadata for Nest to read the parameter types from.
 *
 * @example
 * ```ts
 * @Module({ controllers: [TextCompletionController], providers: [...] })
 * ```
 */
@Controller()
export class TextCompletionController extends ServingController {
  protected readonly routes: ReturnType<typeof textCompletionHandlers>;

  constructor(
    @Inject(TEXT_COMPLETION_SERVICE) service: TextCompletionService,
    @Optional() @Inject(TEXT_COMPLETION_APP_OPTIONS) options: TextCompletionAppOptions = {},
  ) {
    super();
    this.routes = textCompletionHandlers(service, options);
  }

  /**
   * The tutorial's route, through the service's own batcher (as on the other frameworks): every batcher option the
   * service was made with (`maxLatencyMs`, `maxQueueSize`, the pool's scheduling) applies here too, and the answer
   * carries the `X-Batch-*` headers of the batch that ran it. `HEAD` answers at once, without running the model.
   */
  @Get()
  complete(@Query('text') text: unknown, @Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.routes.textQuery.handler(text, req, res);
  }

  /** OpenAI's completions API (JSON or `stream: true`); the shared endpoint writes the response itself. */
  @Post('v1/completions')
  completions(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return this.routes.completions.handler(body, res);
  }

  /** OpenAI's chat completions API (JSON or `stream: true`), through the same batchers. */
  @Post('v1/chat/completions')
  chatCompletions(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return this.routes.chatCompletions.handler(body, res);
  }

  /** A live page of the metrics: batch sizes, queue, throughput, latency percentiles, refusals. */
  @Get('dashboard')
  dashboard(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.routes.dashboard.handler(req, res);
  }
}
