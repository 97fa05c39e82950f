import base from '../core/tsup.config.mjs';

/** @type {import('tsup').Options} */
export default {
  ...base,
  // One entry per framework, so `@microbatch/serving` never loads a framework its user did not pick.
  entry: {
    index: 'src/index.ts',
    'express/index': 'src/express/index.ts',
    'koa/index': 'src/koa/index.ts',
    'fastify/index': 'src/fastify/index.ts',
    'hono/index': 'src/hono/index.ts',
    'nest/index': 'src/nest/index.ts',
  },
  // `import.meta.url` locates the repository's models/ folder (`bundledModelDir`); the shim provides it in CommonJS.
  shims: true,
};
