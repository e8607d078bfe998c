import { createMasker, MASK, type Masker } from '../../core/masker';
import { StreamMasker } from '../../core/stream-masker';

const M = MASK;
const KiB = 1024;
const BOUND = 64 * KiB;

// Fixtures are shaped like the real thing but are not live credentials.
const KEY_BODY = [
  'MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun',
  'VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK',
];
const RSA_KEY = ['-----BEGIN RSA PRIVATE KEY-----', ...KEY_BODY, '-----END RSA PRIVATE KEY-----'].join('\n');

/** Feeds the parts in order, with a pause (release) after each when asked, and returns everything passed on. */
function streamed(masker: Masker, parts: string[], pauses: boolean): string {
  const stream = new StreamMasker(masker);
  let out = '';
  for (const part of parts) {
    out += stream.push(part);
    if (pauses) out += stream.release();
  }
  return out + stream.end();
}

/** Every 4-character piece of the secrets that shows in the output but not in the whole-text masking. */
function leaked(output: string, secrets: string[], whole: string): string[] {
  const pieces = secrets.flatMap((secret) => [...Array(secret.length - 3).keys()].map((at) => secret.slice(at, at + 4)));
  return [...new Set(pieces)].filter((piece) => output.includes(piece) && !whole.includes(piece));
}

interface Case {
  text: string;
  secrets: string[];
  known?: string[];
}

const SECRET_OUTPUTS: Array<[string, Case]> = [
  ['a private key block', { text: `key:\n${RSA_KEY}\ndone\n`, secrets: KEY_BODY }],
  ['an AWS access key id', { text: 'Using access key AKIAIOSFODNN7EXAMPLE for us-east-1\n', secrets: ['AKIAIOSFODNN7EXAMPLE'] }],
  ['a GitHub token', { text: 'GITHUB_TOKEN is ghp_R8kT2mVq9XwLp4ZsN7bYc1HdF6gJe3Ua0iOy.\n', secrets: ['ghp_R8kT2mVq9XwLp4ZsN7bYc1HdF6gJe3Ua0iOy'] }],
  ['a Bearer header', { text: 'curl -H "Authorization: Bearer 7f3a9c2e4b1d8f6a0e5c3b9d2a7f4e1c" https://api.acme.io\n', secrets: ['7f3a9c2e4b1d8f6a0e5c3b9d2a7f4e1c'] }],
  ['a password= assignment', { text: 'db login password=hunter2 user=app\n', secrets: ['hunter2'] }],
  ['a quoted password with a space in it', { text: '{"username": "app", "password": "hunter two", "port": 5432}\n', secrets: ['hunter two'] }],
  ['an ini-style password = value', { text: '[db]\npassword = hunter2\nport = 5432\n', secrets: ['hunter2'] }],
  ['a password flag', { text: 'mysql --user app --password hunter2 cairn\n', secrets: ['hunter2'] }],
  ['a password prompt and its echo', { text: 'Password: hunter2\nok\n', secrets: ['hunter2'] }],
  ['a URL with a password', { text: 'pip install -i https://deploy:s3cretpw@pypi.acme.io/simple pkg\n', secrets: ['s3cretpw'] }],
  [
    'a known secret value containing spaces',
    { text: 'unlock with correct horse battery staple then go\n', secrets: ['correct horse battery staple'], known: ['correct horse battery staple'] },
  ],
];

describe.each(SECRET_OUTPUTS)('%s', (_name, { text, secrets, known }) => {
  const masker = createMasker(known);
  const whole = masker.mask(text);
  const offsets = [...Array(text.length + 1).keys()];

  test('the whole-text masking hides it (the reference)', () => {
    for (const secret of secrets) expect(whole).not.toContain(secret);
  });

  test.each([false, true])('split at every offset (pause between: %s), the output is the whole-text masking', (pause) => {
    for (const at of offsets) {
      const output = streamed(masker, [text.slice(0, at), text.slice(at)], pause);
      expect({ at, leaked: leaked(output, secrets, whole) }).toEqual({ at, leaked: [] });
      expect({ at, output }).toEqual({ at, output: whole });
    }
  });

  test('arriving one character at a time with a pause after each, the output is the whole-text masking', () => {
    const output = streamed(masker, [...text], true);
    expect(leaked(output, secrets, whole)).toEqual([]);
    expect(output).toBe(whole);
  });
});

describe('text without secrets passes through unchanged', () => {
  const masker = createMasker(['Vault-Token-9931']);
  const log =
    'TASK [app : render config] ****\nok: [web-01] => {"changed": false}\nbypass=1 compass: north\n' +
    'The Bearer scheme is required. git clone https://deploy@git.acme.io/infra.git\nContinue? ';

  test.each([false, true])('split at every offset (pause between: %s)', (pause) => {
    for (let at = 0; at <= log.length; at++) {
      expect({ at, output: streamed(masker, [log.slice(0, at), log.slice(at)], pause) }).toEqual({ at, output: log });
    }
  });
});

describe('a pause shows what cannot become a secret', () => {
  const masker = createMasker(['correct horse battery staple']);
  const afterPause = (text: string) => {
    const stream = new StreamMasker(masker);
    return stream.push(text) + stream.release();
  };

  test.each<[string, string, string]>([
    ['a question prompt', 'Continue? [y/N] ', 'Continue? [y/N] '],
    ['a password prompt, whose answer would still be masked', 'Password: ', 'Password: '],
    ['the name of an Authorization header', 'Authorization: Bearer ', 'Authorization: Bearer '],
    ['a line up to a word that could still become a token', 'Using access key AKIA', 'Using access key '],
    ['a line up to the start of a known secret value', 'unlock with correct horse ', 'unlock with '],
    ['a line up to a private key block still arriving', 'key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1', `key:\n${M}`],
    ['a line up to a quoted value not yet closed', 'login "password": "hunter ', 'login "password": "'],
  ])('%s', (_name, text, shown) => {
    expect(afterPause(text)).toBe(shown);
  });
});

describe('long lines and the held-text bound', () => {
  /** Pushes the first part at once, then the 300 characters around the bound in 7-character chunks, then the rest. */
  function chunkedAroundBound(masker: Masker, text: string): string {
    const stream = new StreamMasker(masker);
    let out = stream.push(text.slice(0, BOUND - 100));
    for (let at = BOUND - 100; at < BOUND + 200; at += 7) out += stream.push(text.slice(at, Math.min(at + 7, BOUND + 200)));
    return out + stream.push(text.slice(BOUND + 200)) + stream.end();
  }
  const fill = (unit: string, length: number) => unit.repeat(Math.ceil(length / unit.length)).slice(0, length);

  const ACROSS_THE_CUT: Array<[string, string, string, string, string[]]> = [
    ['an AWS key id among words', 'lorem ipsum dolor ', ' AKIAIOSFODNN7EXAMPLE ', 'AKIAIOSFODNN7EXAMPLE', []],
    ['a known value with spaces among words', 'lorem ipsum dolor ', ' correct horse battery staple ', 'correct horse battery staple', ['correct horse battery staple']],
    ['a quoted password among words', 'lorem ipsum dolor ', ' "password": "hunter two" ', 'hunter two', []],
    ['an AWS key id in a line without whitespace', 'ab1,cd2;', ',AKIAIOSFODNN7EXAMPLE,', 'AKIAIOSFODNN7EXAMPLE', []],
    ['a password= in a line without whitespace', 'ab1,cd2;', ',password=hunter2,', 'hunter2', []],
  ];

  test.each(ACROSS_THE_CUT)('%s across the 64 KiB cut, at every offset near it', (_name, unit, inserted, secret, known) => {
    const masker = createMasker(known);
    for (let start = BOUND - 60; start <= BOUND + 20; start++) {
      const text = `${fill(unit, start)}${inserted}${fill(unit, 2000)}\n`;
      const whole = masker.mask(text);
      const output = chunkedAroundBound(masker, text);
      expect({ start, leaked: leaked(output, [secret], whole) }).toEqual({ start, leaked: [] });
      expect({ start, same: output === whole }).toEqual({ start, same: true });
    }
  });

  test('a 1 MiB line without whitespace is passed on as it arrives, and unchanged', () => {
    const masker = createMasker();
    const line = fill('ab1,cd2;ef3', 1024 * KiB);
    const stream = new StreamMasker(masker);
    let out = '';
    for (let at = 0; at < line.length; at += 16 * KiB) {
      out += stream.push(line.slice(at, at + 16 * KiB));
      expect(Math.min(at + 16 * KiB, line.length) - out.length).toBeLessThan(BOUND + 16 * KiB);
    }
    out += stream.push('\n') + stream.end();
    expect(out === `${line}\n`).toBe(true);
  });

  test('a token longer than the bound is masked whole', () => {
    const masker = createMasker();
    const text = `token ghp_${'a'.repeat(200 * KiB)} done\n`;
    let out = '';
    const stream = new StreamMasker(masker);
    for (let at = 0; at < text.length; at += 4 * KiB) out += stream.push(text.slice(at, at + 4 * KiB));
    out += stream.end();
    expect(out).toBe(`token ${M} done\n`);
  });

  test('a quoted value longer than the bound in a line without whitespace is never passed on', () => {
    const masker = createMasker();
    const text = `x,password="${'s3cr3t'.repeat(20 * KiB)}",next\nafter\n`;
    let out = '';
    const stream = new StreamMasker(masker);
    for (let at = 0; at < text.length; at += 4 * KiB) out += stream.push(text.slice(at, at + 4 * KiB));
    out += stream.end();
    expect(out.includes('s3cr3t')).toBe(false);
    expect(out).toMatch(/^x,password="\[masked\].*\nafter\n$/s);
  });

  test('a private key block longer than the bound is masked to its END line', () => {
    const masker = createMasker();
    const body = Array.from({ length: 2000 }, (_, i) => `${i.toString(36).padStart(4, 'Q')}${'MIIEowIBAAKCAQEAu1SU1LfVLPHC'.repeat(2)}`);
    const text = ['before', '-----BEGIN RSA PRIVATE KEY-----', ...body, '-----END RSA PRIVATE KEY-----', 'after', ''].join('\n');
    const stream = new StreamMasker(masker);
    let out = '';
    for (let at = 0; at < text.length; at += 4 * KiB) out += stream.push(text.slice(at, at + 4 * KiB));
    out += stream.end();
    expect(out).not.toContain('MIIEowIBAAK');
    expect(out).toBe(`before\n${M}\nafter\n`);
  });
});
