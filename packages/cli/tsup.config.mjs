import { rmSync } from 'node:fs';

// Two builds share dist/: cleaned once here, as tsup runs the builds of an array side by side.
rmSync(new URL('./dist', import.meta.url), { recursive: true, force: true });

const common = {
  sourcemap: true,
  target: 'node20',
  // Error classes keep their names in logs and stack traces (`BatchError`, not esbuild's `_BatchError`).
  keepNames: true,
  // Everything the CLI uses is a dependency and stays one (the repository's tsconfig `paths` would otherwise pull
  // the workspace packages' sources in).
  external: [/^@microbatch\//],
};

/** @type {import('tsup').Options[]} */
export default [
  // The library entry (`@microbatch/cli`: lifecycle helpers, createProgram), for `import` and `require`.
  { ...common, entry: { index: 'src/index.ts' }, format: ['esm', 'cjs'] },
  // The `microbatch` executable: ESM only (top-level await), started by npm's bin link.
  { ...common, entry: { microbatch: 'src/main.ts' }, format: ['esm'], banner: { js: '#!/usr/bin/env node' } },
];
