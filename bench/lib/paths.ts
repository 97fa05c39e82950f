import { fileURLToPath } from 'node:url';
import { embedderFileName } from './embedder-model.js';

/** The repository root (bench/ lives directly below it). */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The bundled default model, placed by `pnpm install`. */
export const TEXT_MODEL_DIR = fileURLToPath(new URL('../../models/tinystories-656k', import.meta.url));
/** The generated ONNX embeddings model (see setup-models.ts). */
export const EMBEDDER_MODEL_PATH = fileURLToPath(new URL(`../.models/${embedderFileName()}`, import.meta.url));
export const RESULTS_DIR = fileURLToPath(new URL('../results/', import.meta.url));
export const BENCHMARKS_MD = fileURLToPath(new URL('../../BENCHMARKS.md', import.meta.url));
