import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256 } from '../sha256';
import { canonicalJson, findLoneSurrogate } from './canonical';

/**
 * The hiding commitment to a decision's reason (spec part A 2.7 item 3): the chain entry holds
 * `sha256:` + hex SHA-256 of the RFC 8785 canonical JSON of `{event, random, reason}`. The random
 * value keeps a short reason ("ok", "lgtm") from being found by hashing guesses; once a redaction
 * removes the reason and its random value, the commitment can never be opened again.
 */

/** Bytes of randomness stored beside each reason. */
export const REASON_RANDOM_BYTES = 32;

/** What opens a commitment: the decision (chain entry) id, the hex random value, the masked reason. */
export interface ReasonOpening {
  event: string;
  random: string;
  reason: string;
}

/** A precondition broken by the caller; `details` holds the wrong values (never the reason's text). */
export class ReasonCommitmentError extends Error {
  constructor(
    message: string,
    readonly details: Record<string, string | number>,
  ) {
    super(message);
    this.name = 'ReasonCommitmentError';
  }
}

const PREFIX = 'sha256:';
const RANDOM_HEX = /^[0-9a-f]{64}$/;
const COMMITMENT = /^sha256:[0-9a-f]{64}$/;

/** A fresh random value for one reason: 32 bytes from the system CSPRNG, as lowercase hex. */
export function newReasonRandom(): string {
  return randomBytes(REASON_RANDOM_BYTES).toString('hex');
}

/**
 * `sha256:<hex>` committing to the reason. The reason is committed exactly as given, with no
 * Unicode normalization, so a holder recomputes it from the stored text alone.
 * Preconditions: `event` is a non-empty string; `random` is 64 lowercase hex characters (upper
 * case would commit to different bytes of JSON than a holder would recompute); `reason` is a
 * string of well-formed Unicode.
 */
export function reasonCommitment(opening: ReasonOpening): string {
  checkOpening(opening);
  return PREFIX + digest(opening).toString('hex');
}

/**
 * True when `opening` opens `commitment`. Never throws: a receipt or dossier read from anywhere
 * may hold anything, and anything malformed simply does not open it. The digests are compared in
 * constant time.
 */
export function opensCommitment(commitment: unknown, opening: unknown): boolean {
  if (typeof commitment !== 'string' || !COMMITMENT.test(commitment)) return false;
  try {
    checkOpening(opening);
  } catch {
    return false;
  }
  const expected = Buffer.from(commitment.slice(PREFIX.length), 'hex');
  return timingSafeEqual(expected, digest(opening));
}

function digest({ event, random, reason }: ReasonOpening): Buffer {
  // Only the three named keys: extra properties on the opening object must not change the hash.
  return sha256(canonicalJson({ event, random, reason }));
}

function checkOpening(opening: unknown): asserts opening is ReasonOpening {
  if (typeof opening !== 'object' || opening === null) {
    throw new ReasonCommitmentError('the opening must be an object with event, random and reason', {
      type: opening === null ? 'null' : typeof opening,
    });
  }
  const { event, random, reason } = opening as Record<string, unknown>;
  if (typeof event !== 'string' || event.length === 0) {
    throw new ReasonCommitmentError(`event must be the decision id, a non-empty string, not ${describe(event)}`, {
      event: describe(event),
    });
  }
  if (typeof random !== 'string' || !RANDOM_HEX.test(random)) {
    throw new ReasonCommitmentError(
      `random must be ${REASON_RANDOM_BYTES * 2} lowercase hex characters, not ${describe(random)}`,
      { random: describe(random) },
    );
  }
  if (typeof reason !== 'string') {
    throw new ReasonCommitmentError(`reason must be a string, not ${describe(reason)}`, { reason: typeof reason });
  }
  const at = findLoneSurrogate(reason);
  if (at !== -1) {
    throw new ReasonCommitmentError(`reason holds a lone surrogate at index ${at}, which has no canonical JSON form`, {
      index: at,
      length: reason.length,
    });
  }
}

function describe(value: unknown): string {
  if (typeof value === 'string') return value.length > 80 ? `a ${value.length}-character string` : JSON.stringify(value);
  return value === null ? 'null' : typeof value;
}
