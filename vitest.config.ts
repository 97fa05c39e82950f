import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const packages = [
  'core',
  'express',
  'koa',
  'fastify',
  'hono',
  'nest',
  'inference',
  'prometheus',
  'serving',
  'redis',
  'nats',
  'transport',
  'test-kit',
];

export default defineConfig({
  // Nest's dependency injection reads constructor parameter types from decorator metadata.
  oxc: { decorator: { legacy: true, emitDecoratorMetadata: true } },
  resolve: {
    // Tests run against the sources, so a change is tested without a rebuild.
    alias: [
      ...['http', 'util', 'otel', 'diagnostics'].map((subpath) => ({
        find: new RegExp(`^@microbatch/core/${subpath}$`),
        replacement: fileURLToPath(new URL(`./packages/core/src/${subpath}/index.ts`, import.meta.url)),
      })),
      {
        find: /^@microbatch\/core\/web$/,
        replacement: fileURLToPath(new URL('./packages/core/src/web/index.ts', import.meta.url)),
      },
      ...['express', 'koa', 'fastify', 'hono', 'nest'].map((subpath) => ({
        find: new RegExp(`^@microbatch/serving/${subpath}$`),
        replacement: fileURLToPath(new URL(`./packages/serving/src/app/${subpath}/index.ts`, import.meta.url)),
      })),
      ...packages.map((name) => ({
        find: new RegExp(`^@microbatch/${name}$`),
        replacement: fileURLToPath(new URL(`./packages/${name}/src/index.ts`, import.meta.url)),
      })),
    ],
  },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts', 'examples/**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/dist/**'],
    // Hang guards only, far above any test's own work on a machine 2-3x slower than a developer's with the other
    // core busy: no test may pass or fail by its speed (durations are derived from what a test measures).
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
