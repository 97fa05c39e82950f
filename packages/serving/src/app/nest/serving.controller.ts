import type { IncomingMessage, ServerResponse } from 'node:http';
import { BatchError } from '@microbatch/core';
import { writeJson } from '@microbatch/core/http';
import { Delete, Get, Post, Req, Res } from '@nestjs/common';
import { writeOpenAiError } from '../../openai/openai-error.js';
import type { JsonValueRoute, NodeRoute, RawHandler, RawRoute } from '../route-table.js';

/** A raw route's handler, or a 404 for an app without the Files and Batch APIs (the encoder apps). */
function raw(route: RawRoute | undefined): RawHandler {
  return (
    route?.handler ??
    ((req, res) => {
      req.resume();
      writeOpenAiError(res, new BatchError('NOT_FOUND', 'This server has no Files and Batch APIs'));
      return Promise.resolve();
    })
  );
}

/** The handlers of the routes every serving app has (from its table's handlers: `textCompletionHandlers`, ...). */
export interface ServingRouteHandlers {
  /** A fixed answer, or (with API keys) a Node route that checks the key first. */
  readonly models: JsonValueRoute | NodeRoute;
  readonly liveness: NodeRoute;
  readonly readiness: NodeRoute;
  readonly metrics: NodeRoute;
  readonly uploadFile?: RawRoute;
  readonly listFiles?: RawRoute;
  readonly getFile?: RawRoute;
  readonly deleteFile?: RawRoute;
  readonly fileContent?: RawRoute;
  readonly createBatch?: RawRoute;
  readonly listBatches?: RawRoute;
  readonly getBatch?: RawRoute;
  readonly cancelBatch?: RawRoute;
}

/**
 * The routes every serving app's Nest controller has: `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`, the
 * Files and Batch APIs (`/v1/files…`, `/v1/batches…`), each
 * answered by its table's handler (the same bytes and headers as on the other frameworks). A controller extends it
 * and sets `routes`; Nest serves the routes a controller inherits.
 *
 * @example
 * ```ts
 * @Controller() class EmbeddingsController extends ServingController { protected readonly routes = ...; }
 * ```
 */
export abstract class ServingController {
  protected abstract readonly routes: ServingRouteHandlers;

  /** What `client.models.list()` of the official OpenAI clients reads. */
  @Get('v1/models')
  models(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    const route = this.routes.models;
    if (route.kind === 'node') return route.handler(req, res);
    writeJson(res, 200, route.body);
    return Promise.resolve();
  }

  @Get('healthz')
  healthz(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.routes.liveness.handler(req, res);
  }

  @Get('readyz')
  readyz(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.routes.readiness.handler(req, res);
  }

  @Get('metrics')
  metrics(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return this.routes.metrics.handler(req, res);
  }

  // OpenAI's Files and Batch APIs: raw handlers reading the request themselves (the app has no body parser).
  @Post('v1/files')
  uploadFile(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return raw(this.routes.uploadFile)(req, res);
  }

  @Get('v1/files')
  listFiles(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return raw(this.routes.listFiles)(req, res);
  }

  @Get('v1/files/:file_id')
  getFile(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return raw(this.routes.getFile)(req, res);
  }

  @Delete('v1/files/:file_id')
  deleteFile(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return raw(this.routes.deleteFile)(req, res);
  }

  @Get('v1/files/:file_id/content')
  fileContent(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return raw(this.routes.fileContent)(req, res);
  }

  @Post('v1/batches')
  createBatch(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return raw(this.routes.createBatch)(req, res);
  }

  @Get('v1/batches')
  listBatches(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return raw(this.routes.listBatches)(req, res);
  }

  @Get('v1/batches/:batch_id')
  getBatch(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return raw(this.routes.getBatch)(req, res);
  }

  @Post('v1/batches/:batch_id/cancel')
  cancelBatch(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    return raw(this.routes.cancelBatch)(req, res);
  }
}
