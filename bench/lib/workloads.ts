// The two benchmarked workloads, shared by the bench servers (request → runner input → response), the offline
// runner (the same inputs, straight into the worker pool) and the driver (the request bodies it sends).
import { createTextGenerationParser, createWorkerPool, textGenerationBatchKey } from '@microbatch/inference';
import type {
  OnnxInput,
  OnnxOutput,
  RunnerSpec,
  TextGenerationInput,
  TextGenerationOutput,
  WorkerPool,
} from '@microbatch/inference';
import { EMBEDDER_SHAPE } from './embedder-model.js';
import { EMBEDDER_MODEL_PATH, TEXT_MODEL_DIR } from './paths.js';

export type WorkloadName = 'text' | 'embed';
export const WORKLOAD_NAMES: readonly WorkloadName[] = ['text', 'embed'];

/** Tokens generated per text-completion request: fixed, so every request costs the same number of decode steps. */
export const MAX_TOKENS = 32;

/** One workload: what the load generator sends, and how a server or the offline runner turns it into model work. */
export interface Workload<I, O> {
  readonly name: WorkloadName;
  /** For tables and charts. */
  readonly title: string;
  /** The route the bench servers expose it on (POST, JSON body). */
  readonly path: string;
  readonly runner: RunnerSpec;
  readonly batchKey?: (input: I) => unknown;
  /** Distinct request bodies; the driver sends them round-robin across all connections. */
  readonly bodies: readonly object[];
  /** Request body → runner input. Throws on a bad body (the adapters answer 400). */
  parse(body: unknown): I;
  /** Runner result → response JSON. */
  respond(result: O): unknown;
  /** Why a response body is wrong, or `undefined` when it is right (the driver's smoke check). */
  check(json: unknown): string | undefined;
  /** Sequence length of one input, for padding accounting; absent where the main thread cannot know it cheaply. */
  readonly tokens?: (input: I) => number;
}

// TinyStories-style openings of 2 to 12 words: the bundled model was trained on such stories.
const PROMPTS = [
  'Once upon a time, ',
  'One day, a little girl named Lily ',
  'The big brown dog ',
  'Tom and his mom went to the park. ',
  'There was a tiny bird who ',
  'Sam had a red ball. ',
  'In a small house near the woods, ',
  'The sun was shining and ',
  'Mia loved to paint. One day ',
  'A cat named Tim ',
  'The little boy wanted to ',
  'Once there was a happy frog who lived in a pond. ',
  'Ben found a shiny rock. ',
  'It was a cold winter day. ',
  'The teacher said, ',
  'Anna and her friend ',
  'A big truck ',
  'Max was very hungry, so ',
  'The old man had a garden ',
  'Sue saw a butterfly ',
  'Every morning, the farmer ',
  'The toy car was broken. ',
  'Lucy wanted a new dress. ',
  'Far away, in a big forest, ',
  'The duck and the hen ',
  'Jack liked to climb trees. ',
  'A little fish ',
  'Dad made a cake for ',
  'The moon was bright. ',
  'Lily and Ben were playing with blocks when ',
  'The kind princess ',
  'Tim was sad because ',
  'One sunny day, two friends ',
  'The boat ',
  'Grandma gave Sara a ',
  'The puppy ran ',
  'A girl named Amy had a blue kite. ',
  'It started to rain. ',
  'The bear was looking for ',
  'Joe and his sister ',
  'There once was a small red car that ',
  'The bunny hopped ',
  'Mom said, "Be careful!" ',
  'At school, ',
  'The little mouse ',
  'Once upon a time, there was a king who ',
  'Kim had a secret. ',
  'The wind was strong. ',
  'Peter saw a big box. ',
  'The flowers ',
  'Zoe wanted to help her dad. ',
  'A dragon lived ',
  'The children ',
  'Molly lost her shoe. ',
  'One night, ',
  'The monkey ate a banana ',
  'Bob the builder ',
  'The sky was blue and ',
  'Emma liked to sing. ',
  'A little star ',
  'The lion ',
  'Tommy did not want to ',
  'Under the bed, ',
  'The end of the story was near, but ',
];

/** Text completion with the default model: fixed `max_tokens`, greedy, left-padded batches in the worker. */
export const textWorkload: Workload<TextGenerationInput, TextGenerationOutput> = {
  name: 'text',
  title: `text completion (tinystories-656k, ${MAX_TOKENS} tokens, greedy)`,
  path: '/generate',
  runner: { task: 'text-generation', model: TEXT_MODEL_DIR },
  batchKey: textGenerationBatchKey,
  bodies: PROMPTS.map((prompt) => ({ prompt, max_tokens: MAX_TOKENS, temperature: 0 })),
  // The cheap parser: the runner tokenizes in its worker anyway, so nothing tokenizes on the event loop.
  parse: createTextGenerationParser({ maxTokens: 256 }),
  respond: (result) => result,
  check(json) {
    const { text, usage } = (json ?? {}) as Partial<TextGenerationOutput>;
    if (typeof text !== 'string' || text.length === 0) return 'no completion text';
    if (usage?.completion_tokens === undefined || usage.completion_tokens > MAX_TOKENS) return 'bad usage';
    return undefined;
  },
};

// Search-style sentences of 8 to 16 words; lengths vary, so batches carry real padding.
const SENTENCES = [
  'how do I batch requests to a machine learning model in node',
  'the quick brown fox jumps over the lazy dog near the river bank',
  'best practices for serving transformer models on a small cpu machine',
  'what is the difference between latency and throughput in a web server',
  'recipes for a quick vegetarian dinner with rice beans and fresh herbs',
  'why does my express server slow down when many clients connect at once',
  'a short history of the printing press and how it changed europe',
  'tips for training a puppy to walk on a leash without pulling',
  'compare worker threads and child processes for cpu bound work in node',
  'the weather tomorrow will be sunny with a light breeze from the west',
  'how many cups of coffee are safe to drink in one day',
  'explain dynamic batching as used by model servers like ray serve',
  'where can I find a quiet cafe to work near the central station',
  'the committee will meet again next tuesday to review the budget proposal',
  'what are embeddings and why are they useful for semantic search',
  'instructions for replacing the chain on a single speed bicycle at home',
  'the museum opens at nine and closes at five on weekdays',
  'how to measure p99 latency correctly under a closed loop load test',
  'a beginner guide to growing tomatoes on a sunny balcony in pots',
  'the train to the airport leaves every fifteen minutes from platform two',
  'symptoms of a cold compared with the symptoms of seasonal allergies',
  'koa and express both run middleware but they handle errors differently',
  'the library has a large collection of old maps and rare books',
  'what makes sourdough bread rise without any commercial yeast at all',
  'a list of national parks that are open to visitors all year round',
  'nest js modules providers and controllers explained with a small example',
  'the concert was cancelled because of heavy rain and strong winds',
  'how long should I let the paint dry before adding a second coat',
  'the new phone has a better camera and a battery that lasts longer',
  'why is padding wasted compute when sequences in a batch differ in length',
  'our team shipped the release on friday after fixing the last bug',
  'ideas for a birthday party for a seven year old who loves dinosaurs',
  'onnx runtime runs the same model on many different hardware backends',
  'the river flooded the low fields after a week of constant rain',
  'how do vaccines train the immune system to recognise a virus',
  'a simple explanation of how compound interest grows savings over time',
  'the chef added a pinch of salt and tasted the soup again',
  'which programming language should I learn first to build websites',
  'the children built a sandcastle with towers and a deep moat around it',
  'troubleshooting a laptop that will not connect to the wireless network',
  'the author signed copies of her new novel at the bookshop downtown',
  'how to keep a sourdough starter alive while travelling for two weeks',
  'the marathon route passes the old harbour and the city hall',
  'what is the tallest mountain in europe and can beginners climb it',
  'a quick way to convert a json file to csv on the command line',
  'the owl sat silently on the branch watching the field below',
  'steps to file a tax return online before the deadline this year',
  'the orchestra tuned their instruments while the audience found their seats',
  'how do solar panels turn sunlight into electricity for a house',
  'the startup raised money to build faster and cheaper inference servers',
  'a checklist for packing a tent sleeping bag and stove for camping',
  'the painter mixed blue and yellow to get the green of the hills',
  'why do cats sleep so much during the day and hunt at night',
  'the bridge will be closed for repairs during the first week of may',
  'learn to cook a perfect omelette in under five minutes',
  'the scientist repeated the experiment three times to be sure of the result',
  'what questions should I ask in a job interview for an engineering role',
  'the garden was full of bees visiting the lavender and the roses',
  'how to read a nutrition label and understand the serving size',
  'the pilot announced that the plane would land twenty minutes early',
  'a calm evening walk along the beach as the sun goes down',
  'how to back up photos from a phone to an external hard drive',
  'the students presented their robot that sorts recycling by material',
  'what happens to the body during a long period without sleep',
];

/**
 * Word-level hashing tokenizer (FNV-1a, the "hashing trick"): cheap enough for the event loop and deterministic,
 * so each request is one embedding lookup per word. Id 0 is reserved for padding.
 */
export function wordIds(text: string, vocab = EMBEDDER_SHAPE.vocab): number[] {
  const ids: number[] = [];
  for (const word of text.toLowerCase().split(/[^\p{L}\p{N}]+/u)) {
    if (word.length === 0) continue;
    let hash = 0x811c9dc5;
    for (let index = 0; index < word.length; index += 1) hash = Math.imul(hash ^ word.charCodeAt(index), 0x01000193);
    ids.push(1 + ((hash >>> 0) % (vocab - 1)));
  }
  return ids;
}

const MAX_EMBED_CHARS = 2000;

/** Sentence embeddings with the generated ONNX encoder on the ONNX runner (right-padded batches). */
export const embedWorkload: Workload<OnnxInput, OnnxOutput> = {
  name: 'embed',
  title: `embeddings (ONNX encoder: hidden ${EMBEDDER_SHAPE.hidden}, ffn ${EMBEDDER_SHAPE.ffn}, ${EMBEDDER_SHAPE.layers} layers)`,
  path: '/embed',
  runner: { task: 'onnx', model: EMBEDDER_MODEL_PATH, outputs: ['embeddings'] },
  bodies: SENTENCES.map((text) => ({ text })),
  parse(body) {
    const { text } = (body ?? {}) as { text?: unknown };
    if (typeof text !== 'string' || text.length > MAX_EMBED_CHARS)
      throw new Error(`\`text\` must be a string of at most ${MAX_EMBED_CHARS} characters`);
    const ids = wordIds(text);
    if (ids.length === 0) throw new Error('`text` must contain at least one word');
    return { input_ids: ids };
  },
  respond: (result) => {
    const embedding = result.embeddings?.data;
    // Typed arrays would serialize as objects; a plain array is what a client expects.
    return { embedding: embedding === undefined ? null : Array.from(embedding as Float32Array) };
  },
  check(json) {
    const { embedding } = (json ?? {}) as { embedding?: unknown };
    if (!Array.isArray(embedding) || embedding.length !== EMBEDDER_SHAPE.hidden)
      return 'no embedding of the model width';
    return undefined;
  },
  tokens: (input) => (input.input_ids as readonly number[]).length,
};

/** A workload by name. */
export function workloadOf(name: string): Workload<unknown, unknown> {
  const workload = [textWorkload, embedWorkload].find((candidate) => candidate.name === name);
  if (workload === undefined)
    throw new Error(`Unknown workload "${name}"; expected one of ${WORKLOAD_NAMES.join(', ')}`);
  return workload as unknown as Workload<unknown, unknown>;
}

/** The pool every bench process uses: one worker, one intra-op thread (stable figures on a shared 2-core machine). */
export function startPool<I, O>(workload: Workload<I, O>): WorkerPool<I, O> {
  return createWorkerPool({
    runner: workload.runner,
    size: 1,
    threads: 1,
    name: workload.name,
  }) as unknown as WorkerPool<I, O>;
}
