import { monotonicFactory } from 'ulidx';

const nextUlid = monotonicFactory();

/** What an id names: run, user, token, audit entry (and the decision it records), install, policy, template, worker. */
export type IdPrefix = 'run' | 'usr' | 'tok' | 'aud' | 'ins' | 'pol' | 'tpl' | 'wrk';

/** Prefixed, time-sortable ids (`run_01J…`): newest-first order is id order. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${nextUlid().toLowerCase()}`;
}
