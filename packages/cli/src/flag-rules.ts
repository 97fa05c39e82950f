// The `microbatch` flags' scheduling rules, read from inference's `SCHEDULING_RULES` (never written here): which flag
// is refused in which mode, and with which reason, and what each flag's help says about where it applies.
import { SCHEDULINGS, SCHEDULING_RULES, decoderScheduling, schedulingRefusal } from '@microbatch/inference';
import type {
  DecoderSchedulingOptions,
  RunMode,
  Scheduling,
  SchedulingChoice,
  SchedulingSetting,
} from '@microbatch/inference';
import type { Command } from 'commander';

/** The flag of a setting the scheduling rules cover, as a refusal names the other settings. */
const flagOf = (setting: SchedulingSetting): string => SCHEDULING_RULES[setting].flag;

/** commander's attribute for a flag: `--batch-wait-ms` is `batchWaitMs`. */
const attributeOf = (flag: string): string =>
  flag.slice(2).replaceAll(/-([a-z])/g, (_match, letter: string) => letter.toUpperCase());

/**
 * The first flag given on the command line that has no effect in `mode`, as an error message naming it. Where each
 * flag has an effect is inference's `SCHEDULING_RULES`; flags it does not cover (`--model`, `--port`,
 * `--framework`, `--log-format` ...) mean the same in every mode.
 */
export function uselessFlag(command: Command, mode: RunMode): string | undefined {
  for (const setting of Object.keys(SCHEDULING_RULES) as SchedulingSetting[]) {
    const { flag } = SCHEDULING_RULES[setting];
    if (command.getOptionValueSource(attributeOf(flag)) !== 'cli') continue;
    const why = schedulingRefusal(setting, mode, flagOf);
    if (why === undefined) continue;
    const where = mode === 'web replica' ? 'a web replica (--queue)' : `with --scheduling ${mode.split(' ')[1]}`;
    return `${flag} has no effect here: ${where} ${why}`;
  }
  return undefined;
}

/**
 * The help of a flag the scheduling rules cover: the scheduling it is for (when only one), what it does, and where
 * it is refused, all but `does` read from `SCHEDULING_RULES`.
 */
export function scheduledHelp(setting: SchedulingSetting, command: 'serve' | 'worker', does: string): string {
  const rule = SCHEDULING_RULES[setting];
  const schedulings = rule[command];
  const [only] = schedulings;
  // A flag only a web replica reads (`serve` has it for `--queue`): refused without --queue, whatever the scheduling.
  const replicaOnly = command === 'serve' && schedulings.length === 0 && rule.replica;
  const refused = replicaOnly
    ? ['without --queue']
    : [
        ...SCHEDULINGS.filter((scheduling) => !schedulings.includes(scheduling)).map(
          (scheduling) => `under ${scheduling} scheduling`,
        ),
        ...(command === 'serve' && !rule.replica ? ['with --queue'] : []),
      ];
  return (
    `${schedulings.length === 1 ? `--scheduling ${only}: ` : ''}${does}` +
    (refused.length === 0 ? '' : `. Refused ${refused.join(' and ')}`)
  );
}

/**
 * The scheduling a text-generation model runs under, from its graph and the flags (inference's `decoderScheduling`:
 * a graph without a KV cache runs under request scheduling where `--scheduling` was left out), with refusals in flag
 * words. Throws an `Error` for `--scheduling continuous` on such a graph, and for a flag the fallback would leave with
 * no effect; `fallback` is the line to log.
 */
export function flagScheduling(
  model: string,
  flags: {
    readonly dtype: DecoderSchedulingOptions['dtype'];
    readonly scheduling: Scheduling;
    readonly schedulingGiven?: boolean;
  },
  place: 'serve' | 'worker',
): SchedulingChoice {
  // A flag nobody gave is undefined (or its default, which has an effect under either scheduling).
  const given = (Object.keys(SCHEDULING_RULES) as SchedulingSetting[]).filter(
    (setting) =>
      (flags as Readonly<Record<string, unknown>>)[attributeOf(SCHEDULING_RULES[setting].flag)] !== undefined,
  );
  return decoderScheduling({
    model,
    dtype: flags.dtype,
    scheduling: flags.schedulingGiven === false ? undefined : flags.scheduling,
    given,
    place,
    name: flagOf,
  });
}
