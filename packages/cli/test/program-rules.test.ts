// `microbatch serve` / `worker` read where each flag has an effect from inference's SCHEDULING_RULES, for their
// checks and their help: every flag the table covers, in every mode, is accepted exactly where the table says and
// refused elsewhere with the table's reason. In process, through `createProgram` (nothing starts: the commands are
// stubs), so the whole table is covered without a process per case.
import { SCHEDULING_RULES, appliesIn, schedulingRefusal } from '@microbatch/inference';
import type { RunMode, SchedulingSetting } from '@microbatch/inference';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { createProgram } from '../src/program.js';

const QUEUE = ['--queue', 'redis://127.0.0.1:1', '--model', 'tinystories-656k'];
const MODES: ReadonlyArray<{ readonly mode: RunMode; readonly args: readonly string[] }> = [
  { mode: 'serve continuous', args: ['serve', '--model', 'models/x', '--scheduling', 'continuous'] },
  { mode: 'serve request', args: ['serve', '--model', 'models/x', '--scheduling', 'request'] },
  { mode: 'web replica', args: ['serve', ...QUEUE] },
  { mode: 'worker continuous', args: ['worker', ...QUEUE, '--scheduling', 'continuous'] },
  { mode: 'worker request', args: ['worker', ...QUEUE, '--scheduling', 'request'] },
];
/** A valid value for each flag (`--max-step-tokens` above the default 32 rows). */
const VALUES: Readonly<Record<SchedulingSetting, string>> = {
  modelsDir: 'elsewhere',
  scheduling: 'continuous',
  maxBatchSize: '4',
  batchWaitTimeoutMs: '5',
  maxSequences: '4',
  maxStepTokens: '64',
  prefixCacheMb: '8',
  maxLatencyMs: '100',
  maxQueueSize: '10',
  workerGraceMs: '1000',
  workers: '2',
  threads: '2',
  executionProvider: 'cpu',
  dtype: 'fp32',
};
const asFlag = (setting: SchedulingSetting) => SCHEDULING_RULES[setting].flag;

/** A program whose commands only record that they ran, and whose errors throw instead of exiting. */
function program(ran: string[]): Command {
  const created = createProgram(
    async () => void ran.push('serve'),
    async () => void ran.push('worker'),
  );
  for (const command of [created, ...created.commands]) {
    command.exitOverride().configureOutput({ writeErr: () => undefined, writeOut: () => undefined });
  }
  return created;
}

/** Parses `args`: the command that ran, or the error commander reported. */
async function parse(args: readonly string[]): Promise<{ ran: string[]; error?: string }> {
  const ran: string[] = [];
  try {
    await program(ran).parseAsync([...args], { from: 'user' });
    return { ran };
  } catch (error) {
    return { ran, error: (error as Error).message };
  }
}

describe('microbatch flags and SCHEDULING_RULES', () => {
  it('accepts each flag where the table says it applies, and refuses it elsewhere with the table’s reason', async () => {
    let refused = 0;
    for (const setting of Object.keys(SCHEDULING_RULES) as SchedulingSetting[]) {
      const rule = SCHEDULING_RULES[setting];
      for (const { mode, args } of MODES) {
        // `microbatch worker` has no such flag: commander refuses it as unknown, no rule is read.
        if (mode.startsWith('worker') && rule.worker.length === 0) continue;
        const value = setting === 'scheduling' && mode !== 'web replica' ? mode.split(' ')[1]! : VALUES[setting];
        const { ran, error } = await parse([...args, rule.flag, value]);
        if (appliesIn(setting, mode)) {
          expect(error, `${rule.flag} in ${mode}`).toBeUndefined();
          expect(ran).toEqual([args[0]]);
        } else {
          refused += 1;
          expect(ran, `${rule.flag} in ${mode}`).toEqual([]);
          expect(error).toContain(`error: ${rule.flag} has no effect here: `);
          expect(error).toContain(schedulingRefusal(setting, mode, asFlag));
        }
      }
    }
    // Every flag but --max-latency-ms, --max-queue-size and --worker-grace-ms is refused on a replica (--dtype too:
    // a replica loads no model); the loop's three under request scheduling (serve and worker), --max-batch-size and
    // --batch-wait-ms under continuous serving, and --worker-grace-ms by a server that is no replica (both schedulings).
    expect(refused).toBe(11 + 3 * 2 + 2 + 2);
  });

  it('says in each flag’s help the scheduling it is for and where it is refused, from the table', () => {
    const commands = program([]).commands;
    for (const name of ['serve', 'worker'] as const) {
      const command = commands.find((candidate) => candidate.name() === name)!;
      for (const setting of Object.keys(SCHEDULING_RULES) as SchedulingSetting[]) {
        const rule = SCHEDULING_RULES[setting];
        const option = command.options.find((candidate) => candidate.long === rule.flag);
        const replicaOnly = name === 'serve' && rule.serve.length === 0 && rule.replica;
        if (rule[name].length === 0 && !replicaOnly) {
          expect(option, `${name} ${rule.flag}`).toBeUndefined();
          continue;
        }
        const help = option!.description;
        if (replicaOnly) {
          expect(help.endsWith('. Refused without --queue'), `${name} ${rule.flag}`).toBe(true);
          continue;
        }
        const [only] = rule[name];
        expect(help.startsWith(`--scheduling ${only}: `), `${name} ${rule.flag}`).toBe(rule[name].length === 1);
        // The help ends with where the flag is refused, if anywhere: ". Refused under request scheduling and with --queue".
        const refusedIn = /\. Refused ([^.]*)$/.exec(help)?.[1] ?? '';
        for (const scheduling of ['continuous', 'request'] as const) {
          expect(refusedIn.includes(`under ${scheduling} scheduling`), `${name} ${rule.flag}`).toBe(
            !rule[name].includes(scheduling),
          );
        }
        expect(refusedIn.includes('with --queue'), `${name} ${rule.flag}`).toBe(name === 'serve' && !rule.replica);
      }
    }
  });
});
