import { fileURLToPath } from 'node:url';
import type { Server } from 'node:http';
import { serverUrl } from '@microbatch/serving';
import { NestFactory } from '@nestjs/core';
import { describeTextCompletionApp } from '../testing/text-completion-contract.js';
import { AppModule } from './src/app.js';

describeTextCompletionApp('Nest', fileURLToPath(new URL('.', import.meta.url)), async (model) => {
  const app = await NestFactory.create(AppModule.forRoot(model), { logger: false });
  await app.listen(0, '127.0.0.1');
  // app.close() drains the batchers and closes the model (ModelLifecycle).
  return { url: serverUrl(app.getHttpServer() as Server), close: () => app.close() };
});
