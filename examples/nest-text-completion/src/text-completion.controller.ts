import type { ServerResponse } from 'node:http';
import type { BatchContext } from '@microbatch/core';
import type { TextGenerationInput } from '@microbatch/inference';
import { Batch } from '@microbatch/nest';
import { type Health, createHealth } from '@microbatch/prometheus';
import { type CompletionsEndpoint, type TextCompletionModel, createCompletionsEndpoint } from '@microbatch/serving';
import { Body, Controller, Get, Inject, Post, Query, Res, UseInterceptors } from '@nestjs/common';
import type { Response } from 'express';
import { PlainTextInterceptor, TEXT_COMPLETION_MODEL, TextQueryPipe } from './text-query.js';

// Every constructor parameter names its token with @Inject(): the app runs under tsx, which emits no decorator
// metadata for Nest to read the parameter types from.
@Controller()
export class TextCompletionController {
  readonly #completions: CompletionsEndpoint;
  readonly #health: Health;

  constructor(@Inject(TEXT_COMPLETION_MODEL) private readonly model: TextCompletionModel) {
    this.#completions = createCompletionsEndpoint(model);
    // Liveness always 200; readiness 503 while the model loads and once the app drains.
    this.#health = createHealth({ batchers: model.batchers, ready: model.isReady });
  }

  /**
   * The tutorial's route, batched the Nest way: the pipe checks each request's `text`, then this method runs once
   * per batch with every request's input, like Ray Serve's `@serve.batch` handler.
   */
  @Get()
  @UseInterceptors(PlainTextInterceptor)
  @Batch()
  async complete(@Query('text', TextQueryPipe) inputs: TextGenerationInput[], context: BatchContext) {
    const outputs = await this.model.pool.run(inputs, { signal: context.signal });
    return outputs.map((output, i) => (output instanceof Error ? output : `${inputs[i]?.prompt}${output.text}`));
  }

  /** OpenAI's completions API (JSON or `stream: true`); the shared endpoint writes the response itself. */
  @Post('v1/completions')
  completions(@Body() body: unknown, @Res() res: ServerResponse): Promise<void> {
    return this.#completions(body, res);
  }

  @Get('healthz')
  healthz(@Res({ passthrough: true }) res: Response) {
    const { status, body } = this.#health.liveness();
    res.status(status);
    return body;
  }

  @Get('readyz')
  async readyz(@Res({ passthrough: true }) res: Response) {
    const { status, body } = await this.#health.readiness();
    res.status(status);
    return body;
  }
}
