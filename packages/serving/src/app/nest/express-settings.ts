// What every serving app's Nest module sets on Nest's Express instance, as the other frameworks' apps have it.
import { Inject, Injectable } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';

/**
 * No `X-Powered-By` on any answer, 404s included: nothing to tell a client about the stack. Set when Nest creates
 * its providers, before any request (Express reads the setting per answer).
 *
 * @example
 * ```ts
 * providers: [HideServerStack]
 * ```
 */
@Injectable()
export class HideServerStack {
  constructor(@Inject(HttpAdapterHost) adapterHost: HttpAdapterHost) {
    const instance = adapterHost.httpAdapter?.getInstance<{ disable?: (setting: string) => unknown }>();
    instance?.disable?.('x-powered-by');
  }
}
