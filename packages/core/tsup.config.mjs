/** @type {import('tsup').Options} */
export default {
  // One entry per subpath export: `@microbatch/core`, `@microbatch/core/http`, `@microbatch/core/util`,
  // `@microbatch/core/web`, `@microbatch/core/otel`, `@microbatch/core/diagnostics`.
  entry: {
    index: 'src/index.ts',
    'http/index': 'src/http/index.ts',
    'util/index': 'src/util/index.ts',
    'web/index': 'src/web/index.ts',
    'otel/index': 'src/otel/index.ts',
    'diagnostics/index': 'src/diagnostics/index.ts',
  },
  format: ['esm', 'cjs'],
  // Shared modules go to chunks in the CommonJS build as well (esbuild splits ESM only; tsup converts for CJS):
  // without it each CJS entry carries its own copy of `BatchError`, the batcher and the options checks.
  splitting: true,
  // Declarations come from `tsc -p tsconfig.build.json`, then scripts/cjs-declarations.mjs writes the `.d.cts`
  // twins: TypeScript 7 has no compiler API for tsup's dts step.
  dts: false,
  clean: true,
  sourcemap: true,
  target: 'node20',
  // Error classes keep their names in logs and stack traces (`BatchError`, not esbuild's `_BatchError`).
  keepNames: true,
};
