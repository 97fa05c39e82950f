import type { IncomingMessage, ServerResponse } from 'node:http';
import { writeJson } from '@microbatch/core/http';
import { Get, Req, Res } from '@nestjs/common';
import type { JsonValueRoute, NodeRoute } from '../route-table.js';

/** The handlers of the routes every serving app has (from its table's handlers: `textCompletionHandlers`, ...). */
export interface ServingRouteHandlers {
  /** A fixed answer, or (with API keys) a Node route that checks the key first. */
  readonly models: JsonValueRoute | NodeRoute;
  readonly liveness: NodeRoute;
  readonly readiness: NodeRoute;
  readonly metrics: NodeRoute;
}

/**
 * The routes every serving app's Nest controller has: `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`, each
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
}
