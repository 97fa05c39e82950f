import base from '../core/tsup.config.mjs';

/** @type {import('tsup').Options} */
export default {
  ...base,
  // One entry per framework, so `@microbatch/serving` never loads a framework its user did not pick.
  entry: {
    index: 'src/index.ts',
    'app/express/index': 'src/app/express/index.ts',
    'app/koa/index': 'src/app/koa/index.ts',
    'app/fastify/index': 'src/app/fastify/index.ts',
    'app/hono/index': 'src/app/hono/index.ts',
    'app/nest/index': 'src/app/nest/index.ts',
  },
  // `import.meta.url` locates the repository's models/ folder (`bundledModelDir`); the shim provides it in CommonJS.
  shims: true,
};
