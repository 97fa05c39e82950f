import { InferenceSession, Tensor } from 'onnxruntime-node';
import { serializeError } from '../contract/errors.js';
import type { ItemResult, WorkerInit } from '../contract/messages.js';
import type { OnnxRunnerSpec } from '../contract/runner-specs.js';
import type { OnnxTensorData } from '../contract/onnx-types.js';
import { collate, isSupportedType, sequenceAxis, split } from './onnx-collate.js';
import type { ValueMeta } from './onnx-collate.js';
import type { Runner } from './runner.js';

type Spec = Required<OnnxRunnerSpec>;

function tensorMeta(values: readonly InferenceSession.ValueMetadata[], kind: string): ValueMeta[] {
  return values.map((meta) => {
    if (!meta.isTensor)
      throw new Error(`Model ${kind} \`${meta.name}\` is not a tensor; only tensor models are supported`);
    return { name: meta.name, type: meta.type, shape: meta.shape };
  });
}

/**
 * Decides which outputs are cut back to each item's length: with `'auto'`, those whose axis 1 carries the same
 * symbolic dimension as a padded input (`sequence_length` in and out); otherwise the listed ones, along the
 * attention mask's axis.
 */
function trimAxes(spec: Spec, inputs: readonly ValueMeta[], outputs: readonly ValueMeta[], wanted: readonly string[]) {
  const inputAxes = new Set(inputs.map(sequenceAxis).filter((axis) => axis !== undefined));
  const axes = new Map<string, string | undefined>();
  for (const meta of outputs) {
    if (!wanted.includes(meta.name)) continue;
    if (spec.trimOutputs === 'auto') {
      const axis = sequenceAxis(meta);
      if (axis !== undefined && inputAxes.has(axis)) axes.set(meta.name, axis);
    } else if (spec.trimOutputs.includes(meta.name)) {
      axes.set(meta.name, undefined);
    }
  }
  return axes;
}

/** Loads any ONNX model with onnxruntime-node; each batch is collated, run once, and split back per item. */
export async function loadOnnxRunner(spec: Spec, init: WorkerInit): Promise<Runner> {
  const session = await InferenceSession.create(spec.model, {
    executionProviders: [init.executionProvider],
    intraOpNumThreads: init.threads,
    interOpNumThreads: 1,
  });
  const inputs = tensorMeta(session.inputMetadata, 'input');
  const outputs = tensorMeta(session.outputMetadata, 'output');
  for (const meta of inputs) {
    if (!isSupportedType(meta.type))
      throw new Error(`Model input \`${meta.name}\` has unsupported element type ${meta.type}`);
  }
  const wanted = spec.outputs.length > 0 ? spec.outputs : session.outputNames;
  for (const name of wanted) {
    if (!session.outputNames.includes(name)) {
      throw new Error(`The model has no output \`${name}\`; its outputs are ${session.outputNames.join(', ')}`);
    }
  }
  const axes = trimAxes(spec, inputs, outputs, wanted);
  return {
    async run(items) {
      const results: ItemResult[] = new Array(items.length);
      const batch = collate(items, inputs, spec, (index, error) => {
        results[index] = { ok: false, error: serializeError(error) };
      });
      if (batch === undefined) return results;
      const { collated, indices } = batch;
      const feeds = Object.fromEntries(
        Object.entries(collated.feeds).map(([name, t]) => [
          name,
          new Tensor(t.type as 'float32', t.data as Float32Array, t.dims),
        ]),
      );
      const fetched = await session.run(feeds, wanted);
      const plain: Record<string, OnnxTensorData> = {};
      for (const name of wanted) {
        const tensor = fetched[name] as Tensor;
        plain[name] = { type: tensor.type, dims: [...tensor.dims], data: tensor.data };
      }
      const trim = new Map<string, readonly number[]>();
      for (const [name, axis] of axes) {
        const lengths = collated.lengths.get(axis ?? collated.primaryAxis ?? '');
        if (lengths !== undefined) trim.set(name, lengths);
      }
      split(plain, indices.length, trim, spec.paddingSide).forEach((value, position) => {
        results[indices[position] as number] = { ok: true, value };
      });
      return results;
    },
    // `split` sliced every item's output into a buffer of its own: they move to the main thread uncopied.
    transferables: (results) => {
      const buffers = new Set<ArrayBuffer>();
      for (const result of results) {
        if (!result.ok) continue;
        for (const tensor of Object.values(result.value as Record<string, OnnxTensorData>)) {
          const { data } = tensor;
          if (ArrayBuffer.isView(data) && data.buffer instanceof ArrayBuffer) buffers.add(data.buffer);
        }
      }
      return [...buffers];
    },
  };
}
