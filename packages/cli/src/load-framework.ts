import type { ServeFlags } from './program.js';

/** What each framework's app needs installed (optional peer dependencies of this package). */
const FRAMEWORK_PACKAGES: Record<ServeFlags['framework'], readonly string[]> = {
  express: ['express'],
  koa: ['koa', '@koa/router', '@koa/bodyparser'],
  fastify: ['@microbatch/fastify', 'fastify'],
  hono: ['@microbatch/hono', 'hono', '@hono/node-server'],
  nest: ['@microbatch/nest', '@nestjs/common', '@nestjs/core', '@nestjs/platform-express', 'reflect-metadata', 'rxjs'],
};

/**
 * Imports a framework's serving module with `load`; a missing framework package fails naming what to install.
 *
 * @example
 * ```ts
 * const { startEmbeddingsApp } = await loadFramework('hono', () => import('@microbatch/serving/hono'), fail);
 * ```
 */
export async function loadFramework<T>(
  framework: ServeFlags['framework'],
  load: () => Promise<T>,
  fail: (message: string) => never,
): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') throw error;
    return fail(
      `--framework ${framework} needs ${FRAMEWORK_PACKAGES[framework].join(' ')} installed beside @microbatch/cli ` +
        `(${error instanceof Error ? error.message.split('\n')[0] : String(error)})`,
    );
  }
}
