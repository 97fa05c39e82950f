import type { Logger } from '@microbatch/serving';
import { pino } from 'pino';
import pretty from 'pino-pretty';

/**
 * How the CLI logs: `json` (one JSON object a line, for log collectors), `pretty` (colourised lines for a human),
 * or `auto` (pretty on a terminal, JSON otherwise).
 *
 * @example
 * ```ts
 * LOG_FORMATS.includes('json'); // true
 * ```
 */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;

/**
 * The CLI's pino logger on stdout. Writes are synchronous, so nothing logged before `process.exit` is lost.
 *
 * @example
 * ```ts
 * const logger = createLogger('auto');
 * logger.info({ url }, 'ready');
 * ```
 */
export function createLogger(format: (typeof LOG_FORMATS)[number]): Logger {
  const options = { base: { pid: process.pid } };
  const terminal = process.stdout.isTTY === true;
  if (format === 'pretty' || (format === 'auto' && terminal)) {
    return pino(options, pretty({ sync: true, colorize: terminal, destination: 1 }));
  }
  return pino(options, pino.destination({ dest: 1, sync: true }));
}
