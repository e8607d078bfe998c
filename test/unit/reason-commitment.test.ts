import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import path from 'node:path';
import {
  REASON_RANDOM_BYTES,
  ReasonCommitmentError,
  newReasonRandom,
  opensCommitment,
  reasonCommitment,
  type ReasonOpening,
} from '../../core/audit/reason-commitment';

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

/** The commitment as a holder computes it with the `canonicalize` package, in a child Node (the package is ESM-only). */
function commitmentWithPackage(openings: ReasonOpening[]): string[] {
  const script = [
    "import canonicalize from 'canonicalize';",
    "import { createHash } from 'node:crypto';",
    "let input = '';",
    "process.stdin.on('data', (d) => { input += d; });",
    "process.stdin.on('end', () => process.stdout.write(JSON.stringify(JSON.parse(input).map(({ event, random, reason }) =>",
    "  'sha256:' + createHash('sha256').update(canonicalize({ event, random, reason })).digest('hex')))));",
  ].join('\n');
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: path.resolve(__dirname, '../..'),
    input: JSON.stringify(openings),
  });
  return JSON.parse(out.toString('utf8')) as string[];
}

const zeros = '0'.repeat(64);
const opening: ReasonOpening = {
  event: 'aud_01jq7x2m3n4p5q6r7s8t9v0w1x',
  random: 'a3'.repeat(32),
  reason: 'Change window approved by CAB-1142; rollback plan attached.',
};

describe('reason commitment', () => {
  test('commits sha256: plus the hex SHA-256 of the canonical JSON {event, random, reason}', () => {
    const text = `{"event":"aud_1","random":"${zeros}","reason":"ok"}`;
    expect(reasonCommitment({ reason: 'ok', random: zeros, event: 'aud_1' })).toBe(`sha256:${sha256(text)}`);
  });

  test('commits non-ASCII text as raw UTF-8 and escapes quotes and line breaks the RFC 8785 way', () => {
    const reason = 'déployé ✓ 😀\n"quoted" \\ tab\t';
    const text = `{"event":"aud_2","random":"${zeros}","reason":"déployé ✓ 😀\\n\\"quoted\\" \\\\ tab\\t"}`;
    expect(reasonCommitment({ event: 'aud_2', random: zeros, reason })).toBe(`sha256:${sha256(text)}`);
  });

  test('matches what a holder computes with the canonicalize package', () => {
    const openings: ReasonOpening[] = [
      opening,
      { event: 'aud_x', random: newReasonRandom(), reason: '' },
      { event: 'aud_\u20ac', random: newReasonRandom(), reason: 'line\u2028sep \u0000 nul \u007f del \ud83d\ude00 emoji' },
    ];
    expect(openings.map(reasonCommitment)).toEqual(commitmentWithPackage(openings));
  });

  test('opens with the exact opening', () => {
    expect(opensCommitment(reasonCommitment(opening), opening)).toBe(true);
  });

  test('does not open with any one character of the reason changed, added or removed', () => {
    const commitment = reasonCommitment(opening);
    const opened: string[] = [];
    const { reason } = opening;
    for (let i = 0; i < reason.length; i++) {
      const changed = reason.slice(0, i) + (reason[i] === 'x' ? 'y' : 'x') + reason.slice(i + 1);
      if (opensCommitment(commitment, { ...opening, reason: changed })) opened.push(changed);
    }
    for (const variant of [reason + ' ', reason.slice(0, -1), ` ${reason}`, reason.toUpperCase(), reason.normalize('NFD')]) {
      if (variant !== reason && opensCommitment(commitment, { ...opening, reason: variant })) opened.push(variant);
    }
    expect(opened).toEqual([]);
  });

  test('does not open with a different random value or a different decision', () => {
    const commitment = reasonCommitment(opening);
    for (let i = 0; i < 64; i++) {
      const random = opening.random.slice(0, i) + (opening.random[i] === '0' ? '1' : '0') + opening.random.slice(i + 1);
      expect(opensCommitment(commitment, { ...opening, random })).toBe(false);
    }
    expect(opensCommitment(commitment, { ...opening, random: newReasonRandom() })).toBe(false);
    expect(opensCommitment(commitment, { ...opening, event: 'aud_01jq7x2m3n4p5q6r7s8t9v0w1y' })).toBe(false);
  });

  test('the same reason under two decisions gives unrelated commitments', () => {
    const first = reasonCommitment({ ...opening, event: 'aud_a', random: newReasonRandom() });
    const second = reasonCommitment({ ...opening, event: 'aud_b', random: newReasonRandom() });
    expect(first).not.toBe(second);
  });

  test('extra properties on the opening do not change the commitment', () => {
    const withExtra = { ...opening, decided_by: 'usr_1', corrected: true };
    expect(reasonCommitment(withExtra)).toBe(reasonCommitment(opening));
    expect(opensCommitment(reasonCommitment(opening), withExtra)).toBe(true);
  });

  test('a fresh random value is 32 bytes of lowercase hex, new every time', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      const random = newReasonRandom();
      expect(random).toMatch(/^[0-9a-f]{64}$/);
      seen.add(random);
    }
    expect(REASON_RANDOM_BYTES).toBe(32);
    expect(seen.size).toBe(1000);
  });

  test.each<[string, unknown, unknown]>([
    ['a commitment without the sha256: prefix', reasonCommitment(opening).slice('sha256:'.length), opening],
    ['an upper-case commitment', `sha256:${reasonCommitment(opening).slice(7).toUpperCase()}`, opening],
    ['a truncated commitment', reasonCommitment(opening).slice(0, -2), opening],
    ['a commitment that is not a string', 42, opening],
    ['an opening that is null', reasonCommitment(opening), null],
    ['an opening without a reason (redacted)', reasonCommitment(opening), { event: opening.event, random: opening.random }],
    ['an opening with the random value removed (redacted)', reasonCommitment(opening), { event: opening.event, reason: opening.reason }],
    ['an upper-case random value', reasonCommitment(opening), { ...opening, random: opening.random.toUpperCase() }],
    ['a reason with a lone surrogate', reasonCommitment(opening), { ...opening, reason: 'ok\ud800' }],
  ])('never opens, and never throws, for %s', (_name, commitment, candidate) => {
    expect(opensCommitment(commitment, candidate)).toBe(false);
  });

  test.each<[string, Partial<ReasonOpening>, RegExp]>([
    ['a short random value', { random: 'ab' }, /random must be 64 lowercase hex characters, not "ab"/],
    ['an upper-case random value', { random: 'AB'.repeat(32) }, /random must be 64 lowercase hex characters/],
    ['an empty event', { event: '' }, /event must be the decision id, a non-empty string, not ""/],
    ['a reason that is not a string', { reason: 5 as unknown as string }, /reason must be a string, not number/],
    ['a reason with a lone surrogate', { reason: 'ab\udc00' }, /reason holds a lone surrogate at index 2/],
  ])('reasonCommitment refuses %s, naming the value', (_name, change, message) => {
    expect(() => reasonCommitment({ ...opening, ...change })).toThrow(ReasonCommitmentError);
    expect(() => reasonCommitment({ ...opening, ...change })).toThrow(message);
  });

  test('a refusal never carries the reason text', () => {
    let thrown: unknown;
    try {
      reasonCommitment({ ...opening, reason: 'secret-ish text\ud800' });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ReasonCommitmentError);
    expect(JSON.stringify({ message: (thrown as Error).message, ...(thrown as ReasonCommitmentError).details })).not.toContain('secret-ish');
  });
});
