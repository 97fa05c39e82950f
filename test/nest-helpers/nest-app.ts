import 'reflect-metadata';
import type { INestApplication, Type } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';

/** Every e2e test runs on both HTTP platforms. */
export const PLATFORMS = ['express', 'fastify'] as const;
export type Platform = (typeof PLATFORMS)[number];

/** Compiles `module` with `@nestjs/testing` and listens on a free port of 127.0.0.1. */
export async function startApp(
  platform: Platform,
  module: Type,
  configure?: (app: INestApplication) => void,
): Promise<INestApplication> {
  const testing = await Test.createTestingModule({ imports: [module] }).compile();
  const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter();
  const app = testing.createNestApplication(adapter, { logger: false });
  configure?.(app);
  await app.listen(0, '127.0.0.1');
  return app;
}
