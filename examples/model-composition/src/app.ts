// Ray Serve's model composition: `GET /compose?text=...` calls two batched models at once, the text generator and a
// vectorized length scorer, and combines their answers. Each model batches its own calls, so N concurrent requests
// cost one call of each model, not N; the route waits for the slower of the two, not for both in turn.
import express from 'express';
import { createBatcher } from '@microbatch/core';
import type { Batcher } from '@microbatch/core';
import { batchErrorHandler } from '@microbatch/express';
import { createHealth, toNodeHandler } from '@microbatch/prometheus';
import { createTextCompletionModel, logBatches, parseTextQuery, startServer } from '@microbatch/serving';
import type { LogLine, RunningServer, TextCompletionModel, TextCompletionServerOptions } from '@microbatch/serving';

/** What the length scorer says about one text. */
export interface LengthScore {
  readonly words: number;
  readonly characters: number;
}

/** The second model: scores a batch of texts in one call (a stand-in for a classifier or an embedder). */
export function createScorer(log: LogLine | false = console.log): Batcher<string, LengthScore> {
  const scorer = createBatcher(
    async (texts: string[]) => {
      const characters = Uint32Array.from(texts, (text) => text.length);
      const words = Uint32Array.from(texts, (text) => text.split(/\s+/).filter(Boolean).length);
      return texts.map((_, i) => ({ words: words[i] ?? 0, characters: characters[i] ?? 0 }));
    },
    { name: 'scorer', maxBatchSize: 8, batchWaitTimeoutMs: 5 },
  );
  if (log !== false) logBatches(scorer, log);
  return scorer;
}

/** The composed model, callable without HTTP (Ray's "query through a handle"). */
export async function compose(model: TextCompletionModel, scorer: Batcher<string, LengthScore>, text: unknown) {
  const input = parseTextQuery(text, model.validate);
  // Both calls are queued in this same tick, so each joins its model's next batch; neither waits for the other.
  const [story, score] = await Promise.all([model.generate(input), scorer(input.prompt)]);
  return { prompt: input.prompt, completion: story.text, finish_reason: story.finish_reason, prompt_length: score };
}

/** `GET /compose?text=...` and the health probes. */
export function createApp(model: TextCompletionModel, scorer: Batcher<string, LengthScore>): express.Express {
  const app = express();
  // Express 5 hands a rejected promise to the error handler: a bad `text` is a 400 naming the field.
  app.get('/compose', async (req, res) => {
    res.json(await compose(model, scorer, req.query.text));
  });
  const health = createHealth({ batchers: [...model.batchers, scorer], ready: model.isReady });
  app.get('/healthz', toNodeHandler(health.liveness));
  app.get('/readyz', toNodeHandler(health.readiness));
  app.use(batchErrorHandler());
  return app;
}

/** Loads the model and listens at once; the shutdown drains both models before stopping the workers. */
export function start(options: TextCompletionServerOptions): Promise<RunningServer> {
  const { port, host, ...modelOptions } = options;
  // Request scheduling: the batcher forms each generator batch, as Ray's `@serve.batch` does (continuous
  // scheduling would hand each request to the decode loop on its own).
  const model = createTextCompletionModel({ scheduling: 'request', ...modelOptions });
  const scorer = createScorer(modelOptions.log);
  return startServer(
    createApp(model, scorer),
    { port, host },
    {
      ready: model.ready,
      drain: async () => {
        await Promise.all([model.drain(), scorer.close()]);
      },
      close: model.close,
    },
  );
}
