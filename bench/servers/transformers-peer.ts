// The servers a user would write without microbatch, for `bench:embeddings` and `bench:rerank` to compare with:
// Express and transformers.js on the main thread, on the same model folder. `--mode per-request` calls the
// pipeline inside the route (one model call per request); `--mode dataloader` puts the same call behind a
// DataLoader (the requests of one tick in one batched call, at most 64). `--task feature-extraction` answers
// `POST /v1/embeddings` (`pipeline('feature-extraction')`, mean pooled, normalised); `--task rerank` answers
// `POST /v1/rerank` (the tokenizer with `text_pair` and `AutoModelForSequenceClassification`, sigmoid of the
// logit). `GET /healthz` answers at once: its latency under load is the event loop's freedom. onnxruntime runs with
// one intra-op thread, as the microbatch servers' workers do. Prints one JSON ready line with its URL.
import type { AddressInfo } from 'node:net';
import { basename, dirname, sep } from 'node:path';
import { parseArgs } from 'node:util';
import { AutoModelForSequenceClassification, AutoTokenizer, env, pipeline } from '@huggingface/transformers';
import type { Tensor } from '@huggingface/transformers';
import DataLoader from 'dataloader';
import express from 'express';

const { values } = parseArgs({
  options: {
    model: { type: 'string' },
    mode: { type: 'string', default: 'per-request' },
    task: { type: 'string', default: 'feature-extraction' },
  },
});
const dir = values.model;
if (dir === undefined) throw new TypeError('Expected `--model <dir>`');
if (values.mode !== 'per-request' && values.mode !== 'dataloader') {
  throw new TypeError(`Expected \`--mode\` per-request or dataloader, got ${values.mode}`);
}
env.allowRemoteModels = false;
env.localModelPath = dirname(dir) + sep;
const id = basename(dir);
const options = { dtype: 'fp32', session_options: { intraOpNumThreads: 1, interOpNumThreads: 1 } } as const;
const batched = values.mode === 'dataloader';

const app = express();
app.use(express.json({ limit: '1mb' }));
app.get('/healthz', (_req, res) => {
  res.json({ status: 'ok' });
});

if (values.task === 'feature-extraction') {
  const extractor = await pipeline('feature-extraction', id, options);
  const embed = async (texts: readonly string[]): Promise<number[][]> =>
    (await extractor([...texts], { pooling: 'mean', normalize: true })).tolist() as number[][];
  const loader = new DataLoader<string, number[]>(embed, { cache: false, maxBatchSize: 64 });
  app.post('/v1/embeddings', async (req, res) => {
    const input = (req.body as { input: string }).input;
    const embedding = batched ? await loader.load(input) : ((await embed([input]))[0] as number[]);
    res.json({ object: 'list', data: [{ object: 'embedding', index: 0, embedding }], model: id });
  });
} else if (values.task === 'rerank') {
  const tokenizer = await AutoTokenizer.from_pretrained(id);
  const model = await AutoModelForSequenceClassification.from_pretrained(id, options);
  const score = async (pairs: readonly (readonly [string, string])[]): Promise<number[]> => {
    const inputs = tokenizer(
      pairs.map(([query]) => query),
      { text_pair: pairs.map(([, document]) => document), padding: true, truncation: true },
    );
    const { logits } = (await model(inputs)) as { logits: Tensor };
    return Array.from(logits.data as Float32Array, (logit) => 1 / (1 + Math.exp(-logit)));
  };
  const loader = new DataLoader<readonly [string, string], number>(score, { cache: false, maxBatchSize: 64 });
  app.post('/v1/rerank', async (req, res) => {
    const { query, documents } = req.body as { query: string; documents: string[] };
    const pairs = documents.map((document) => [query, document] as const);
    const scores = batched ? await loader.loadMany(pairs) : await score(pairs);
    const results = (scores as number[])
      .map((relevance_score, index) => ({ index, relevance_score }))
      .sort((a, b) => b.relevance_score - a.relevance_score);
    res.json({ model: id, results });
  });
} else {
  throw new TypeError(`Expected \`--task\` feature-extraction or rerank, got ${values.task}`);
}

const server = app.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  console.log(JSON.stringify({ url: `http://127.0.0.1:${port}`, msg: 'ready' }));
});
process.once('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  process.exit(0);
});
