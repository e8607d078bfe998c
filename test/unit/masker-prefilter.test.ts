import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createMasker } from '../../core/masker';
import { StreamMasker } from '../../core/stream-masker';

// The masker's prefilters (a rule skipping a text without its trigger, `name=value` heads found
// from their separators) must never change what is masked: every answer equals the reference's,
// which runs every rule's RegExp over every text.
const SECRETS = ['hunter2-secret', 'multi\nline secret'];
const fast = createMasker(SECRETS);
const reference = createMasker(SECRETS, { prefilter: false });

/** Every single-quoted string in the masker's own tests: the shapes its rules are known for. */
function testCorpus(): string[] {
  const source = readFileSync(path.join(__dirname, 'masker.test.ts'), 'utf8');
  const found: string[] = [];
  for (const literal of source.match(/'(?:[^'\\\n]|\\.)*'/g) ?? []) {
    try {
      found.push(JSON.parse(`"${literal.slice(1, -1).replace(/\\'/g, "'").replace(/"/g, '\\"')}"`) as string);
    } catch {
      /* an escape JSON does not know: skip */
    }
  }
  return found.filter((text) => text.length > 0);
}

const FRAGMENTS = [
  'password', 'Password', 'db_password', 'API_KEY', 'token', 'auth', 'pass', 'bypass', 'secret', 'name', 'x.y-z',
  '=', ':', ':=', '=>', ' = ', ' : ', '\t', ' ', '  ', '"', "'", '\\"', '\\', '/', '//', '://', '@', ',', ';', '&',
  '\n', '\r\n', 'hunter2', 's3cr3t!', '[masked]', '${VAR}', '{{ x }}', 'null', '***', 'https', 'postgres', 'user',
  'host.example', '--password', '--no-password', '-', 'Bearer ', 'Authorization: ', 'AKIAABCDEFGHIJKLMNOP', '12',
  'a'.repeat(101), 'hunter2-secret', 'multi\nline secret', '-----BEGIN RSA PRIVATE KEY-----', '-----END RSA PRIVATE KEY-----',
];

/** A seeded generator, so a failure names a text that can be replayed. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

function randomTexts(count: number): string[] {
  const next = random(14);
  const texts: string[] = [];
  for (let i = 0; i < count; i++) {
    const parts: string[] = [];
    const length = 1 + Math.floor(next() * 14);
    for (let j = 0; j < length; j++) parts.push(FRAGMENTS[Math.floor(next() * FRAGMENTS.length)]);
    texts.push(parts.join(''));
  }
  return texts;
}

function sameAnswers(text: string): void {
  expect({ text, masked: fast.mask(text) }).toEqual({ text, masked: reference.mask(text) });
  expect({ text, settled: fast.settled(text, 'line') }).toEqual({ text, settled: reference.settled(text, 'line') });
  expect({ text, settled: fast.settled(text, 'word') }).toEqual({ text, settled: reference.settled(text, 'word') });
  expect({ text, showable: fast.showable(text) }).toEqual({ text, showable: reference.showable(text) });
  expect({ text, unfinished: fast.unfinished(text) }).toEqual({ text, unfinished: reference.unfinished(text) });
  const target = Math.floor(text.length / 2);
  expect({ text, cut: fast.forcedCut(text, target) }).toEqual({ text, cut: reference.forcedCut(text, target) });
}

describe('the masker prefilters', () => {
  test('answer as the reference does over the masker test corpus', () => {
    const corpus = testCorpus();
    expect(corpus.length).toBeGreaterThan(100);
    for (const text of corpus) sameAnswers(text);
    // Joined, so each shape meets the others' separators, quotes and line ends.
    for (let i = 1; i < corpus.length; i++) sameAnswers(`${corpus[i - 1]} ${corpus[i]}\n${corpus[i]}=${corpus[i - 1]}`);
  });

  test('answer as the reference does over random mixes of names, separators, quotes and values', () => {
    for (const text of randomTexts(6_000)) sameAnswers(text);
  });

  test('stream the same output as the reference, piece by piece', () => {
    const next = random(7);
    const texts = randomTexts(3_000);
    const fastStream = new StreamMasker(fast);
    const referenceStream = new StreamMasker(reference);
    let fastOut = '';
    let referenceOut = '';
    for (const text of texts) {
      const cut = Math.floor(next() * text.length);
      for (const piece of [text.slice(0, cut), text.slice(cut)]) {
        fastOut += fastStream.push(piece);
        referenceOut += referenceStream.push(piece);
      }
      if (next() < 0.1) {
        fastOut += fastStream.release();
        referenceOut += referenceStream.release();
      }
    }
    fastOut += fastStream.end();
    referenceOut += referenceStream.end();
    expect(fastOut).toEqual(referenceOut);
  });

  test('mask ordinary log lines several times faster than the reference', () => {
    const log = 'cairn firehose 0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 abcdefgh\n'.repeat(2000);
    const time = (masker: typeof fast) => {
      const start = process.hrtime.bigint();
      for (let i = 0; i < 5; i++) expect(masker.mask(log)).toBe(log);
      return Number(process.hrtime.bigint() - start);
    };
    // The best of seven each, taken in turns, so a busy machine's pauses (or a burst of load during
    // one masker's rounds only) do not decide it.
    let bestFast = Infinity;
    let bestReference = Infinity;
    for (let round = 0; round < 7; round++) {
      bestFast = Math.min(bestFast, time(fast));
      bestReference = Math.min(bestReference, time(reference));
    }
    expect(bestFast * 2).toBeLessThan(bestReference);
  });
});
