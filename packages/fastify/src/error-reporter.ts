import type { FastifyRequest } from 'fastify';
import { reporterFromOptions } from '@microbatch/core/http';

/**
 * The `onError` of `caller`'s options, checked, as a reporter of server errors. Without one, errors go to the
 * request's logger (`request.log.error`), Fastify's own channel for them.
 */
export function errorReporter(
  caller: string,
  options: { readonly onError?: unknown } | undefined,
): (error: unknown, request: FastifyRequest) => void {
  // The default needs the request's logger, so the reporter (and its once-per-error memory) is told the request.
  let current: FastifyRequest | undefined;
  const report = reporterFromOptions(caller, options, (error) => current?.log.error({ err: error }, 'batch failed'));
  return (error, request) => {
    current = request;
    try {
      report(error);
    } finally {
      current = undefined;
    }
  };
}
