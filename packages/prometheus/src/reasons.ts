import type { RejectReason } from '@microbatch/core';

/**
 * The `reason` label of `microbatch_rejections_total` for each core reject reason. The frequent ones get the short
 * names dashboards use (`deadline`, `too_large`, `error`); the rest are their code in lower snake case. Typed as a
 * full record so a code added to core fails the typecheck here instead of going unlabelled.
 *
 * @example
 * ```ts
 * REASON_LABELS.DEADLINE_EXCEEDED; // 'deadline'
 * ```
 */
export const REASON_LABELS = Object.freeze({
  QUEUE_FULL: 'queue_full',
  OVERLOADED: 'overloaded',
  DEADLINE_EXCEEDED: 'deadline',
  CANCELLED: 'cancelled',
  ITEM_TOO_LARGE: 'too_large',
  HANDLER_ERROR: 'error',
  INVALID_INPUT: 'invalid_input',
  EXECUTION_TIMEOUT: 'execution_timeout',
  BAD_HANDLER_RESULT: 'bad_handler_result',
  CLOSED: 'closed',
  UNAVAILABLE: 'unavailable',
}) satisfies Record<RejectReason, string>;

/**
 * The label for a reason; one unknown to this version (a newer core) still gets a stable label rather than none.
 *
 * @example
 * ```ts
 * reasonLabel('QUEUE_FULL'); // 'queue_full'
 * ```
 */
export function reasonLabel(reason: string): string {
  return Object.hasOwn(REASON_LABELS, reason) ? REASON_LABELS[reason as RejectReason] : reason.toLowerCase();
}
