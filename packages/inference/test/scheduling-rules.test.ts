// The one table of scheduling rules: where each text-generation setting has an effect, why it has none elsewhere
// (in the caller's words), and the runner spec's own checks read from it.
import { describe, expect, it } from 'vitest';
import { resolveRunnerSpec } from '../src/spec/runner-spec.js';
import {
  NO_KV_CACHE_FALLBACK,
  SCHEDULING_RULES,
  type SchedulingSetting,
  appliesIn,
  schedulingForGraph,
  schedulingRefusal,
  settingsWhere,
} from '../src/spec/scheduling-rules.js';

const asFlag = (setting: SchedulingSetting) => SCHEDULING_RULES[setting].flag;
const asOption = (setting: SchedulingSetting) => `\`${setting}\``;

describe('SCHEDULING_RULES', () => {
  it('says which settings each scheduling reads', () => {
    expect(settingsWhere((rule) => !rule.serve.includes('request'))).toEqual([
      'maxSequences',
      'maxStepTokens',
      'prefixCacheMb',
      'workerGraceMs',
    ]);
    expect(settingsWhere((rule) => !rule.serve.includes('continuous'))).toEqual([
      'maxBatchSize',
      'batchWaitTimeoutMs',
      'workerGraceMs',
    ]);
    // Only a web replica waits for workers: a server that runs its model reads it under neither scheduling.
    expect(settingsWhere((rule) => rule.replica)).toEqual(['maxLatencyMs', 'maxQueueSize', 'workerGraceMs']);
    // A worker pulls batches whatever its scheduling: the batcher settings are per pull there.
    expect(appliesIn('maxBatchSize', 'worker continuous')).toBe(true);
    expect(appliesIn('maxBatchSize', 'serve continuous')).toBe(false);
    expect(appliesIn('maxLatencyMs', 'worker request')).toBe(false);
  });

  it('gives a reason wherever a setting has no effect, and fixes a value for what continuous scheduling sets', () => {
    const modes = ['serve continuous', 'serve request', 'web replica', 'worker continuous', 'worker request'] as const;
    for (const setting of Object.keys(SCHEDULING_RULES) as SchedulingSetting[]) {
      for (const mode of modes) {
        const rule = SCHEDULING_RULES[setting];
        // A worker without the setting never reads a reason: the CLI has no such flag on `microbatch worker`.
        if (mode.startsWith('worker') && rule.worker.length === 0) continue;
        const refusal = schedulingRefusal(setting, mode, asFlag);
        expect(refusal === undefined, `${setting} in ${mode}`).toBe(appliesIn(setting, mode));
      }
    }
    expect(SCHEDULING_RULES.maxBatchSize.continuousValue).toBe(1);
    expect(SCHEDULING_RULES.batchWaitTimeoutMs.continuousValue).toBe(0);
  });

  it("names the other settings the caller's way: CLI flags or library options", () => {
    expect(schedulingRefusal('maxSequences', 'serve request', asFlag)).toBe(
      'there is no decode loop; a batch holds up to --max-batch-size requests',
    );
    expect(schedulingRefusal('maxSequences', 'serve request', asOption)).toBe(
      'there is no decode loop; a batch holds up to `maxBatchSize` requests',
    );
    expect(schedulingRefusal('maxBatchSize', 'serve continuous', asOption)).toBe(
      'the batcher hands the decode loop one request at a time (a batch of 1); bound the loop with `maxSequences`',
    );
    expect(schedulingRefusal('workers', 'web replica', asFlag)).toBe(
      'runs no model, its workers do: set it on `microbatch worker` (a replica honours --max-latency-ms, ' +
        '--max-queue-size and --worker-grace-ms)',
    );
    expect(() => schedulingRefusal('maxLatencyMs', 'worker request', asFlag)).toThrow(
      new TypeError('No scheduling rule says why `maxLatencyMs` has no effect in worker request'),
    );
  });

  it('is what the runner spec refuses under request scheduling, every loop setting (maxSequences too)', () => {
    for (const setting of ['maxSequences', 'maxStepTokens', 'prefixCacheMb'] as const) {
      expect(() =>
        resolveRunnerSpec({ task: 'text-generation', model: 'models/x', scheduling: 'request', [setting]: 80 }),
      ).toThrow(
        new TypeError(
          `\`runner.${setting}\` (80) bounds the decode loop of 'continuous' scheduling; with ` +
            "`scheduling: 'request'` no loop runs: remove it",
        ),
      );
      expect(
        resolveRunnerSpec({ task: 'text-generation', model: 'models/x', scheduling: 'continuous', [setting]: 80 }),
      ).toMatchObject({ [setting]: 80 });
    }
  });
});

describe('schedulingForGraph: the fallback for a decoder graph without a KV cache', () => {
  const noKv = { file: 'onnx/model.onnx', kvCache: false };
  const why =
    "onnx/model.onnx has no KV cache (no past_key_values.* inputs): the continuous decode loop feeds each step's " +
    'keys and values back into the graph';

  it('keeps what was asked (continuous by default) where the graph has a KV cache', () => {
    const withKv = { file: 'onnx/model.onnx', kvCache: true };
    expect(schedulingForGraph(undefined, withKv, ['maxSequences'], 'serve', asFlag)).toEqual({
      scheduling: 'continuous',
    });
    expect(schedulingForGraph('request', withKv, [], 'serve', asFlag)).toEqual({ scheduling: 'request' });
  });

  it('falls back to request where nothing was asked, saying why, and keeps request asked for', () => {
    expect(schedulingForGraph(undefined, noKv, ['dtype', 'workers'], 'worker', asFlag)).toEqual({
      scheduling: NO_KV_CACHE_FALLBACK.to,
      fallback: `${why}; serving it with request scheduling`,
    });
    expect(schedulingForGraph('request', noKv, [], 'serve', asFlag)).toEqual({ scheduling: 'request' });
  });

  it('refuses continuous asked for, and a setting the fallback leaves with no effect, in the caller’s words', () => {
    expect(() => schedulingForGraph('continuous', noKv, [], 'serve', asFlag)).toThrow(
      new Error(
        `continuous scheduling cannot run this model: ${why}. Use request scheduling (--scheduling request, or ` +
          'leave --scheduling out)',
      ),
    );
    expect(() => schedulingForGraph(undefined, noKv, ['maxStepTokens'], 'serve', asOption)).toThrow(
      new Error(
        `\`maxStepTokens\` has no effect for this model: ${why}, so it runs under request scheduling, where there ` +
          'is no decode loop (each batch is one generate call over whole prompts)',
      ),
    );
  });
});
