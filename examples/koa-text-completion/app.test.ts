import { fileURLToPath } from 'node:url';
import { serveInProcess } from '../testing/child-server.js';
import { describeTextCompletionApp } from '../testing/text-completion-contract.js';
import { createApp } from './src/app.js';

describeTextCompletionApp('Koa', fileURLToPath(new URL('.', import.meta.url)), (model) =>
  serveInProcess(createApp(model).callback(), () => model.close()),
);
