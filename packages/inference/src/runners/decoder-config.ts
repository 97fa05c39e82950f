// A decoder's attention geometry from its `config.json`: each architecture names the same facts differently
// (GPT-2's `n_head` / `n_embd`, Llama's `num_attention_heads` / `hidden_size`, Gemma's own `head_dim`, multi-query
// models' one KV head), so the names live in one table, and the KV inputs' metadata in the graph checks the result.
import type { InferenceSession } from 'onnxruntime-node';

/** The config.json keys one architecture family uses; `undefined`: the family has no such key. */
export interface ConfigNames {
  readonly heads: string;
  /** Key/value heads (grouped-query attention); absent: one per query head. */
  readonly kvHeads: string | undefined;
  readonly hidden: string;
  /** A head size given outright (Gemma: not `hidden / heads`); absent: `hidden / heads`. */
  readonly headDim: string | undefined;
  readonly positions: string;
  /** A boolean that makes every query head share one KV head (gpt_bigcode, falcon). */
  readonly multiQuery: string | undefined;
}

const LLAMA_NAMES: ConfigNames = {
  heads: 'num_attention_heads',
  kvHeads: 'num_key_value_heads',
  hidden: 'hidden_size',
  headDim: 'head_dim',
  positions: 'max_position_embeddings',
  multiQuery: undefined,
};
const GPT2_NAMES: ConfigNames = {
  heads: 'n_head',
  kvHeads: undefined,
  hidden: 'n_embd',
  headDim: undefined,
  positions: 'n_positions',
  multiQuery: undefined,
};

/**
 * The names of each `model_type`; a type not listed uses Llama's names, which transformers' newer architectures
 * (mistral, qwen2, qwen3, gemma, gemma2, phi3, smollm, olmo, granite ...) all share.
 */
export const CONFIG_NAMES: Readonly<Record<string, ConfigNames>> = {
  llama: LLAMA_NAMES,
  gpt2: GPT2_NAMES,
  gpt_bigcode: { ...GPT2_NAMES, multiQuery: 'multi_query' },
  gptj: GPT2_NAMES,
  gpt_neo: { ...LLAMA_NAMES, heads: 'num_heads', kvHeads: undefined, headDim: undefined },
  falcon: { ...LLAMA_NAMES, kvHeads: 'num_kv_heads', headDim: undefined, multiQuery: 'multi_query' },
};

/** What the decode loop needs to know of a decoder's attention, read once at load. */
export interface DecoderGeometry {
  readonly kvHeads: number;
  readonly headDim: number;
  /** `max_position_embeddings` (or the family's name for it), when given. */
  readonly positions: number | undefined;
}

const positive = (value: unknown): number | undefined =>
  typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : undefined;

/**
 * Reads a decoder's geometry with its `model_type`'s names and checks it against the graph's first KV input (where
 * its dims are fixed numbers), so a config the table reads wrong fails at load instead of corrupting the cache.
 *
 * @example
 * ```ts
 * decoderGeometry({ model_type: 'gpt2', n_head: 12, n_embd: 768 }, session.inputMetadata); // { kvHeads: 12, headDim: 64, ... }
 * ```
 */
export function decoderGeometry(
  config: Readonly<Record<string, unknown>>,
  inputs: readonly InferenceSession.ValueMetadata[],
): DecoderGeometry {
  const type = typeof config.model_type === 'string' ? config.model_type : 'llama';
  const names = CONFIG_NAMES[type] ?? LLAMA_NAMES;
  const heads = positive(config[names.heads]);
  const hidden = positive(config[names.hidden]);
  const givenHeadDim = names.headDim === undefined ? undefined : positive(config[names.headDim]);
  if (heads === undefined || (hidden === undefined && givenHeadDim === undefined)) {
    throw new Error(
      `config.json (model_type '${type}') has no \`${names.heads}\` and \`${names.hidden}\`: the decode loop cannot ` +
        'size its KV cache',
    );
  }
  const multiQuery = names.multiQuery !== undefined && config[names.multiQuery] === true;
  const kvHeads = multiQuery
    ? 1
    : ((names.kvHeads === undefined ? undefined : positive(config[names.kvHeads])) ?? heads);
  const headDim = givenHeadDim ?? (hidden as number) / heads;
  const past = inputs.find((input) => input.name.startsWith('past_key_values.'));
  if (past?.isTensor === true) {
    // gpt_bigcode's multi-query exports fuse key and value in one 3-D input ([batch, past, 2 x head size]).
    if (past.shape.length !== 4) {
      throw new Error(
        `the decode loop drives 4-D KV inputs [batch, KV heads, past, head size]; the graph's \`${past.name}\` has ` +
          `${past.shape.length} dims: use \`scheduling: 'request'\` for this model`,
      );
    }
    const [, graphKvHeads, , graphHeadDim] = past.shape;
    for (const [name, fromConfig, inGraph] of [
      ['KV heads', kvHeads, graphKvHeads],
      ['head size', headDim, graphHeadDim],
    ] as const) {
      if (typeof inGraph === 'number' && inGraph !== fromConfig) {
        throw new Error(
          `config.json (model_type '${type}') gives ${name} ${fromConfig}, but the graph's \`${past.name}\` has ${inGraph}`,
        );
      }
    }
  }
  return { kvHeads, headDim, positions: positive(config[names.positions]) };
}
