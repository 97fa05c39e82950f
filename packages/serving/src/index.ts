// `@microbatch/serving`: the OpenAI-compatible protocol (`openai/`), its endpoints (`endpoints/`), the services they
// serve (`service/`) and the ready-made apps (`app/`; one subpath entry per framework). Imports go one way:
// app → endpoints → service → openai.
export * from './openai/index.js';
export * from './service/index.js';
export * from './endpoints/index.js';
export * from './app/index.js';
export * from './batch-api/index.js';
export * from './auth/index.js';
export * from './registry/index.js';
