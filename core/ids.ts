import { monotonicFactory } from 'ulidx';

const nextUlid = monotonicFactory();

/** What an id names: run, user, token, audit entry (and the decision it records), install, policy, template, worker, trigger, team, organization, grant, schedule; `hkd` a webhook delivery that came without an id of its own. */
export type IdPrefix = 'run' | 'usr' | 'tok' | 'aud' | 'ins' | 'pol' | 'tpl' | 'wrk' | 'trg' | 'ntf' | 'nta' | 'team' | 'org' | 'grt' | 'sch' | 'inv' | 'prj' | 'cred' | 'ctype' | 'att' | 'isrc' | 'job' | 'jpl' | 'fkey' | 'flk' | 'hkd';

/** Prefixed, time-sortable ids (`run_01J…`): newest-first order is id order. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${nextUlid().toLowerCase()}`;
}
