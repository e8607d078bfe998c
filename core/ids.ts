import { monotonicFactory } from 'ulidx';

const nextUlid = monotonicFactory();

/** Prefixed, time-sortable ids (`run_01J…`): newest-first order is id order. */
export function newId(prefix: 'run' | 'usr' | 'tok'): string {
  return `${prefix}_${nextUlid().toLowerCase()}`;
}
