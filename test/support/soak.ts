/**
 * Load-sized tests (many runs over several processes, a log of hundreds of megabytes) run at a
 * small size by default, which checks the same behaviour in seconds, and at their full size when
 * CAIRN_SOAK=1 (README, "Tests and benchmarks").
 */
export const SOAK = process.env.CAIRN_SOAK === '1';

/** The smoke size, or the soak size under CAIRN_SOAK=1. */
export function soakSize(smoke: number, soak: number): number {
  return SOAK ? soak : smoke;
}
