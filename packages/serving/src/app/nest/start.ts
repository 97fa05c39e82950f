import type { RequestListener, Server } from 'node:http';
import type { DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { TextCompletionAppOptions } from '../app-options.js';
import { shutdownServer } from '../graceful-shutdown.js';
import { type ListenOptions, type RunningServer, listen, serverUrl } from '../serve.js';
import type { TextCompletionService } from '../../service/text-completion-service.js';
import { TextCompletionModule } from './text-completion.module.js';

/**
 * Creates the Nest app of `module` and listens at once (readiness says when `service` can serve); `shutdown` stops
 * accepting, then `app.close()` drains the module's batchers and closes the service (its lifecycle providers).
 */
export async function startNestModule(
  module: DynamicModule,
  where: ListenOptions,
  service: { readonly ready: Promise<void> },
): Promise<RunningServer> {
  // The module's `jsonBody()` reads the bodies (Nest's parser would quote them back in its errors).
  const app = await NestFactory.create(module, { logger: ['error', 'warn'], bodyParser: false });
  let server: Server;
  try {
    await app.init();
    // The same server as the Express and Koa apps' (`listen`): header, request and idle timeouts checked every
    // second, a connection cap, and `Expect: 100-continue` refused for oversize bodies. Nest's own server, whose
    // timeouts are checked every 30 s, is never started.
    server = await listen(app.getHttpAdapter().getInstance() as RequestListener, where);
  } catch (error) {
    await app.close(); // releases the service (worker threads would keep the process alive)
    throw error;
  }
  return {
    server,
    url: serverUrl(server),
    ready: service.ready,
    shutdown: shutdownServer(server, { drain: () => app.close() }),
  };
}

/**
 * Creates the Nest app of {@link TextCompletionModule} and listens at once (readiness says when the service can
 * serve); `shutdown` stops accepting, then `app.close()` drains every batcher and closes the service.
 *
 * @example
 * ```ts
 * const running = await startTextCompletionApp(model, { port: 0, host: '127.0.0.1' });
 * ```
 */
export function startTextCompletionApp(
  service: TextCompletionService,
  where: ListenOptions,
  options: TextCompletionAppOptions = {},
): Promise<RunningServer> {
  return startNestModule(TextCompletionModule.forRoot(service, options), where, service);
}
