// `pnpm test:reliability`: every reliability scenario, the long ones included (RELIABILITY_FULL=1), one file at a
// time so the scenarios do not compete for the CPU, and the results merged into bench/results/reliability.json.
// Plain `pnpm test` runs the same files under the root config, with the short overload and storm.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import base from '../../vitest.config.js';

export default defineConfig({
  ...base,
  root: fileURLToPath(new URL('../..', import.meta.url)),
  test: {
    ...base.test,
    include: ['test/reliability/**/*.test.ts'],
    fileParallelism: false,
    globalSetup: ['test/reliability/global-setup.ts'],
    testTimeout: 180_000,
    hookTimeout: 120_000,
  },
});
