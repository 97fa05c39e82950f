// The config file's checks, on its text: every problem names the file, the line and the key, in YAML and in JSON.
import { planThreads } from '@microbatch/serving';
import { describe, expect, it } from 'vitest';
import { parseServeConfig } from '../src/config/config-file.js';

const parse = (text: string) => () => parseServeConfig(text, 'm.yaml');

describe('parseServeConfig', () => {
  it('reads YAML and JSON alike', () => {
    const yaml = 'maxLoadedModels: 1\nmodels:\n  - { name: a, path: x, task: text-generation, load: eager }\n';
    const json = JSON.stringify({
      maxLoadedModels: 1,
      models: [{ name: 'a', path: 'x', task: 'text-generation', load: 'eager' }],
    });
    expect(parseServeConfig(yaml, 'm.yaml')).toEqual(JSON.parse(json));
    expect(parseServeConfig(json, 'm.json')).toEqual(JSON.parse(json));
  });

  it('names the line of a bad key in a JSON file', () => {
    const json =
      '{\n  "models": [\n    {\n      "name": "a",\n      "path": "x",\n      "task": "text-generation",\n      "workers": 0\n    }\n  ]\n}\n';
    expect(() => parseServeConfig(json, 'm.json')).toThrow(
      'm.json:7: models[0].workers: must be an integer >= 1, got 0',
    );
  });

  it.each([
    ['a top-level typo', 'model:\n  - { name: a }\n', 'm.yaml:1: model: unknown top-level key `model`'],
    ['no models', 'maxThreads: 2\n', 'm.yaml:1: the top-level key `models` is missing'],
    ['an empty list', 'models: []\n', 'm.yaml:1: models: must be a non-empty list of models, got []'],
    ['a model that is a string', 'models:\n  - chat\n', 'm.yaml:2: models[0]: each model must be a mapping'],
    [
      'a bad name',
      'models:\n  - { name: "a b", path: x, task: text-generation }\n',
      'm.yaml:2: models[0].name: must be 1 to 128',
    ],
    [
      'a scheduling refusal',
      'models:\n  - name: a\n    path: x\n    task: text-generation\n    maxBatchSize: 4\n',
      'm.yaml:5: models[0].maxBatchSize: has no effect with continuous scheduling',
    ],
    [
      'a step budget under the rows',
      'models:\n  - { name: a, path: x, task: text-generation, maxSequences: 8, maxStepTokens: 8 }\n',
      'models[0].maxStepTokens: must exceed maxSequences (8)',
    ],
    [
      'more eager models than may be loaded',
      'maxLoadedModels: 1\nmodels:\n  - { name: a, path: x, task: text-generation, load: eager }\n  - { name: b, path: x, task: text-generation, load: eager }\n',
      'm.yaml:1: maxLoadedModels: 2 models load eagerly (a, b) but at most 1 may be loaded',
    ],
    ['a duplicate key', 'models: []\nmodels: []\n', 'm.yaml:2: not valid YAML or JSON: Map keys must be unique'],
  ])('refuses %s', (_name, text, message) => {
    expect(parse(text)).toThrow(message);
  });

  it('takes maxBatchSize under request scheduling and for embeddings', () => {
    const text =
      'models:\n  - { name: a, path: x, task: text-generation, scheduling: request, maxBatchSize: 4 }\n' +
      '  - { name: e, path: y, task: feature-extraction, maxBatchSize: 64, normalize: false }\n';
    expect(parseServeConfig(text, 'm.yaml').models.map((model) => model.maxBatchSize)).toEqual([4, 64]);
  });

  it('takes rerank and text-classification models with the encoder batching keys (a RAG config)', () => {
    const text =
      'models:\n  - { name: chat, path: x, task: text-generation }\n' +
      '  - { name: embed, path: y, task: feature-extraction }\n' +
      '  - { name: rerank, path: z, task: rerank, maxBatchSize: 32, maxBatchCost: 4096, load: lazy }\n' +
      '  - { name: mod, path: w, task: text-classification, maxQueueSize: 256, workers: 2 }\n';
    const { models } = parseServeConfig(text, 'm.yaml');
    expect(models.map((model) => model.task)).toEqual([
      'text-generation',
      'feature-extraction',
      'rerank',
      'text-classification',
    ]);
    expect(models[2]).toMatchObject({ maxBatchSize: 32, maxBatchCost: 4096, load: 'lazy' });
    expect(models[3]).toMatchObject({ maxQueueSize: 256, workers: 2 });
  });

  it.each([
    ['pooling', 'rerank', 'pooling: cls', '`pooling` does not apply to task rerank (only to feature-extraction)'],
    [
      'maxSequences',
      'text-classification',
      'maxSequences: 4',
      '`maxSequences` does not apply to task text-classification (only to text-generation)',
    ],
    ['a scheduling', 'rerank', 'scheduling: continuous', '`scheduling` does not apply to task rerank'],
  ])('refuses %s on a %s model, naming the line', (_key, task, setting, message) => {
    const text = `models:\n  - name: a\n    path: x\n    task: ${task}\n    ${setting}\n`;
    expect(parse(text)).toThrow(`m.yaml:5: models[0].${setting.split(':')[0]}: ${message}`);
  });

  it('names the encoder tasks when a task is unknown', () => {
    expect(parse('models:\n  - { name: a, path: x, task: reranker }\n')).toThrow(
      'm.yaml:2: models[0].task: must be one of text-generation, feature-extraction, rerank, text-classification',
    );
  });
});

describe('planThreads', () => {
  const models = [
    { name: 'a', workers: 2, threads: 2 },
    { name: 'b', workers: 1, threads: 1 },
    { name: 'c', workers: 1, threads: 3 },
  ];
  it('counts every model without a cap, the largest N with one', () => {
    expect(planThreads(models, 8)).toMatchObject({ peak: 8, fits: true, models: { a: 4, b: 1, c: 3 } });
    expect(planThreads(models, 7)).toMatchObject({ peak: 8, fits: false });
    const one = planThreads(models, 4, 1);
    expect(one).toMatchObject({ peak: 4, fits: true });
    expect(one.summary).toBe(
      '4 of 4 threads (1 loaded at once: the largest a): a 2x2=4, b 1x1=1, c 1x3=3 (workers x threads)',
    );
  });
});
