import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const packages = ['core', 'express', 'koa', 'nest', 'inference', 'prometheus', 'serving'];

export default defineConfig({
  // Nest's dependency injection reads constructor parameter types from decorator metadata.
  oxc: { decorator: { legacy: true, emitDecoratorMetadata: true } },
  resolve: {
    // Tests run against the sources, so a change is tested without a rebuild.
    alias: packages.map((name) => ({
      find: new RegExp(`^@microbatch/${name}$`),
      replacement: fileURLToPath(new URL(`./packages/${name}/src/index.ts`, import.meta.url)),
    })),
  },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts', 'examples/**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/dist/**'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
  },
});
