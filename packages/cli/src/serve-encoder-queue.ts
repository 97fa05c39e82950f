// `microbatch serve --task feature-extraction|rerank|text-classification --queue URL`: an encoder's web replica. It
// loads no graph, only the folder's tokenizer and `config.json` (so requests are tokenized, bounded and costed here,
// before anything is queued), and sends each request's texts or pairs, as one group, to the queue named after the
// model, where `microbatch worker --task <same>` pulls them. The endpoints are the local server's.
import { basename } from 'node:path';
import { DEFAULTS } from '@microbatch/core';
import type {
  ClassifierService,
  EmbeddingService,
  EmbeddingsAppOptions,
  EncoderAppOptions,
  EncoderTask,
  ListenOptions,
  RunningServer,
} from '@microbatch/serving';
import { createQueuedEmbeddingService, createQueuedSequenceClassifier, readEncoderFolder } from '@microbatch/serving';
import { loadAccess } from './access-flags.js';
import { failOnThrow, modelDirOrFail } from './command-steps.js';
import { serveUntilSignal } from './lifecycle.js';
import { loadFramework } from './load-framework.js';
import { createLogger } from './logger.js';
import { queueName } from './model-dir.js';
import { loadTransport, openReplicaQueue, redact } from './queue-transport.js';
import type { ServeFlags } from './program.js';

interface EncoderApps {
  startEmbeddingsApp(
    service: EmbeddingService,
    where: ListenOptions,
    options?: EmbeddingsAppOptions,
  ): Promise<RunningServer>;
  startEncoderApp(
    service: ClassifierService,
    where: ListenOptions,
    options?: EncoderAppOptions,
  ): Promise<RunningServer>;
}

// Loaded on demand: `--framework express` never loads NestJS.
const APPS: Record<ServeFlags['framework'], () => Promise<EncoderApps>> = {
  express: () => import('@microbatch/serving/express'),
  fastify: () => import('@microbatch/serving/fastify'),
  hono: () => import('@microbatch/serving/hono'),
  koa: () => import('@microbatch/serving/koa'),
  nest: () => import('@microbatch/serving/nest'),
};

/**
 * Serves an encoder as a web replica of the workers behind `url` until SIGTERM / SIGINT. `--model` must be the folder
 * (or a hub id under `--models-dir`'s default): its tokenizer is what bounds requests here.
 *
 * @example
 * ```ts
 * await serveEncoderFromQueue({ ...flags, model: 'models/ms-marco-MiniLM-L-6-v2' }, 'rerank', 'redis://127.0.0.1:6379', fail);
 * ```
 */
export async function serveEncoderFromQueue(
  flags: ServeFlags,
  task: EncoderTask,
  url: string,
  fail: (message: string) => never,
): Promise<void> {
  const model = await modelDirOrFail(flags, fail);
  // A folder that cannot serve the task fails now, before the queue is opened.
  failOnThrow(() => readEncoderFolder(model, task), fail);
  const queue = queueName(model);
  await loadTransport(url, queue, fail);
  const apps = await loadFramework(flags.framework, APPS[flags.framework], fail);
  const logger = createLogger(flags.logFormat);
  const access = loadAccess(flags, process.env, logger, fail);
  const maxQueueSize = flags.maxQueueSize ?? DEFAULTS.maxQueueSize;
  logger.info(
    {
      model: basename(model),
      task,
      framework: flags.framework,
      queue: redact(url),
      maxQueueSize,
      maxLatencyMs: flags.maxLatencyMs ?? null,
      apiKeys: access.keyNames,
      fairnessKey: access.fairnessKey,
    },
    'microbatch serve (web replica)',
  );
  await serveUntilSignal(
    async (where) => {
      const opened = await openReplicaQueue(url, queue, flags, logger, fail);
      const common = { model, maxLatencyMs: flags.maxLatencyMs };
      if (task === 'feature-extraction') {
        const service = createQueuedEmbeddingService(opened, {
          ...common,
          pooling: flags.pooling,
          normalize: flags.normalize === undefined ? undefined : flags.normalize === 'on',
          truncatableDimensions: flags.truncatableDimensions,
        });
        logger.info(
          { pooling: service.pooling, normalize: service.normalize, dimensions: service.dimensions },
          'embeddings',
        );
        return apps.startEmbeddingsApp(service, where, access.options);
      }
      const service = createQueuedSequenceClassifier(opened, { ...common, task, maxQueueSize });
      logger.info({ labels: service.labels }, task);
      return apps.startEncoderApp(service, where, access.options);
    },
    { port: flags.port, host: flags.host },
    logger,
  );
}
