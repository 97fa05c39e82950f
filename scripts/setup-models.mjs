// Places the bundled default model in ./models (gitignored): copied from ../shared/models when present,
// otherwise downloaded once from the Hugging Face hub. Serving never touches the network. The real tokenizers that
// tests and benchmarks build generated models on (GPT-2's 50,257-token vocabulary, MiniLM's WordPiece) are copied
// beside it from ../shared/models when present (models/gpt2-tokenizer, models/minilm-tokenizer).
import { cp, mkdir, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const name = 'tinystories-656k';
const target = join(root, 'models', name);
const shared = join(root, '..', 'shared', 'models', name);
const hubRepo = 'onnx-community/TinyStories-656K-ONNX';
const files = [
  'config.json',
  'generation_config.json',
  'special_tokens_map.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'onnx/model.onnx',
];

const exists = (path) =>
  stat(path).then(
    () => true,
    () => false,
  );

async function main() {
  if (await exists(join(target, 'onnx', 'model.onnx'))) return;
  await mkdir(join(target, 'onnx'), { recursive: true });
  if (await exists(shared)) {
    await cp(shared, target, { recursive: true });
    console.log(`[setup-models] copied ${name} from ${shared}`);
    return;
  }
  if (process.env.MICROBATCH_OFFLINE === '1') {
    throw new Error(`[setup-models] ${shared} not found and MICROBATCH_OFFLINE=1: cannot fetch ${hubRepo}`);
  }
  for (const file of files) {
    const url = `https://huggingface.co/${hubRepo}/resolve/main/${file}`;
    const response = await fetch(url);
    if (!response.ok) throw new Error(`[setup-models] GET ${url} -> HTTP ${response.status}`);
    await writeFile(join(target, file), Buffer.from(await response.arrayBuffer()));
  }
  console.log(`[setup-models] downloaded ${name} from ${hubRepo}`);
}

/** Copies the tokenizer folders `../shared/models` holds; their absence only skips the tests that need them. */
async function copyTokenizers() {
  for (const tokenizer of ['gpt2-tokenizer', 'minilm-tokenizer']) {
    const from = join(root, '..', 'shared', 'models', tokenizer);
    const to = join(root, 'models', tokenizer);
    if ((await exists(join(to, 'tokenizer.json'))) || !(await exists(from))) continue;
    await cp(from, to, { recursive: true });
    console.log(`[setup-models] copied ${tokenizer} from ${from}`);
  }
}

Promise.all([main(), copyTokenizers()]).catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
