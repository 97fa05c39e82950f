// The Express settings every serving app's Nest module makes on Nest's Express instance, as the other frameworks'
// apps have them: no `X-Powered-By`, routing strict and case-sensitive (`/healthz/` and `/HEALTHZ` are 404s).
import { Inject, Injectable } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';

/** The Express instance's settings this provider uses. */
interface ExpressSettings {
  disable?(setting: string): unknown;
  enable?(setting: string): unknown;
}

/**
 * Makes the settings when Nest creates its providers: before `app.init()` registers any middleware or route, so
 * before Express makes its router, which reads the routing settings once (an `onModuleInit` would be too late).
 *
 * @example
 * ```ts
 * providers: [ServingExpressSettings]
 * ```
 */
@Injectable()
export class ServingExpressSettings {
  constructor(@Inject(HttpAdapterHost) adapterHost: HttpAdapterHost) {
    const instance = adapterHost.httpAdapter?.getInstance<ExpressSettings>();
    // No `X-Powered-By` on any answer, 404s included: nothing to tell a client about the stack.
    instance?.disable?.('x-powered-by');
    instance?.enable?.('strict routing');
    instance?.enable?.('case sensitive routing');
  }
}
