import { cpuTimed } from '../support/cpu-time';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import {
  AuditChainError,
  ChainVerifier,
  chainLinkSuffix,
  entryCanonicalPrefix,
  entryForBundle,
  entryFromStoredText,
  GENESIS_HASH,
  anchorOf,
  chainEntry,
  checkAnchors,
  entryHash,
  verifyChain,
  type AuditAnchor,
  type AuditEntry,
  type AuditEntryFields,
} from '../../core/audit/audit-chain';
import { CanonicalJsonError, CanonicalText, canonicalJson, findLoneSurrogate, sha256Hex } from '../../core/audit/canonical';
import { EMPTY_ROOT, leafHash, leafOfStoredHash, rootFromLeafHashes } from '../../core/audit/merkle';

const repoRoot = path.resolve(__dirname, '../..');

/**
 * The `canonicalize` package (RFC 8785) run in a child Node process: it is ESM-only and Jest on
 * Node 20 cannot load ES modules, so the package is the oracle from outside. Takes JSON text of an
 * array and returns each element's canonical form.
 */
function canonicalizeWithPackage(jsonArrayText: string): string[] {
  const script = [
    "import canonicalize from 'canonicalize';",
    "let input = '';",
    "process.stdin.on('data', (d) => { input += d; });",
    "process.stdin.on('end', () => process.stdout.write(JSON.stringify(JSON.parse(input).map((v) => canonicalize(v)))));",
  ].join('\n');
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: repoRoot, input: jsonArrayText });
  return JSON.parse(out.toString('utf8')) as string[];
}

/** A small seeded generator (mulberry32), so a failing random case can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

// ---------------------------------------------------------------------------------------------
// Canonical JSON
// ---------------------------------------------------------------------------------------------

describe('canonical JSON (RFC 8785)', () => {
  test('the RFC 8785 section 3.2.2 example canonicalizes to the text the RFC prints', () => {
    // Parsed from the RFC's input text, so its escapes and number spellings are the RFC's own.
    const input = JSON.parse(
      '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],' +
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/", "literals": [null, true, false]}',
    );
    expect(canonicalJson(input)).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],' +
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
  });

  test('keys sort by UTF-16 code units, so an emoji sorts before U+FB33 (RFC 8785 section 3.2.3)', () => {
    const input = {
      '\u20ac': 'Euro Sign',
      '\r': 'Carriage Return',
      '\ufb33': 'Hebrew Letter Dalet With Dagesh',
      '1': 'One',
      '\ud83d\ude00': 'Emoji: Grinning Face',
      '\u0080': 'Control',
      '\u00f6': 'Latin Small Letter O With Diaeresis',
    };
    expect(canonicalJson(input)).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
        '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  // RFC 8785 appendix B: IEEE 754 bit patterns and their canonical spellings.
  test.each([
    ['0000000000000000', '0'],
    ['8000000000000000', '0'],
    ['0000000000000001', '5e-324'],
    ['8000000000000001', '-5e-324'],
    ['7fefffffffffffff', '1.7976931348623157e+308'],
    ['ffefffffffffffff', '-1.7976931348623157e+308'],
    ['4340000000000000', '9007199254740992'],
    ['c340000000000000', '-9007199254740992'],
    ['4430000000000000', '295147905179352830000'],
    ['44b52d02c7e14af5', '9.999999999999997e+22'],
    ['44b52d02c7e14af6', '1e+23'],
    ['44b52d02c7e14af7', '1.0000000000000001e+23'],
    ['444b1ae4d6e2ef4e', '999999999999999700000'],
    ['444b1ae4d6e2ef4f', '999999999999999900000'],
    ['444b1ae4d6e2ef50', '1e+21'],
    ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
    ['3eb0c6f7a0b5ed8d', '0.000001'],
    ['41b3de4355555553', '333333333.3333332'],
    ['41b3de4355555554', '333333333.33333325'],
    ['41b3de4355555555', '333333333.3333333'],
    ['41b3de4355555556', '333333333.3333334'],
    ['41b3de4355555557', '333333333.33333343'],
    ['becbf647612f3696', '-0.0000033333333333333333'],
    ['43143ff3c1cb0959', '1424953923781206.2'],
  ])('the double with bits %s is written %s', (bits, expected) => {
    expect(canonicalJson(Buffer.from(bits, 'hex').readDoubleBE(0))).toBe(expected);
  });

  test('strings escape only quote, backslash and control characters, with lowercase hex', () => {
    expect(canonicalJson('a"b\\c\u0000\u0008\t\n\u000b\f\r\u001f\u007f/<>é')).toBe(
      '"a\\"b\\\\c\\u0000\\b\\t\\n\\u000b\\f\\r\\u001f\u007f/<>é"',
    );
  });

  test('nested objects and arrays sort keys at every level and keep array order', () => {
    expect(canonicalJson({ b: [3, { z: 1, a: [] }, 1], a: { y: null, x: true } })).toBe(
      '{"a":{"x":true,"y":null},"b":[3,{"a":[],"z":1},1]}',
    );
  });

  test('undefined properties are left out and undefined array elements become null, as JSON reads them back', () => {
    expect(canonicalJson({ a: undefined, b: [undefined, 1] })).toBe('{"b":[null,1]}');
    expect(canonicalJson({ at: new Date('2024-05-01T10:00:00Z') })).toBe('{"at":"2024-05-01T10:00:00.000Z"}');
  });

  test.each<[string, unknown, string]>([
    ['undefined at the top', undefined, ''],
    ['NaN', { a: [1, NaN] }, 'a[1]'],
    ['Infinity', { a: Infinity }, 'a'],
    ['-Infinity', -Infinity, ''],
    ['a BigInt', { n: 10n }, 'n'],
    ['a function', { f: () => 1 }, 'f'],
    ['a symbol', [Symbol('s')], '[0]'],
    ['a lone high surrogate', { s: 'ab\ud800' }, 's'],
    // Arrays of strings, numbers, booleans and null are written in one call; these must still be refused, and where.
    ['a lone surrogate among strings', { hashes: ['ab', 'cd', '\udc00'] }, 'hashes[2]'],
    ['Infinity among numbers', [[1, 2, Infinity]], '[0][2]'],
    ['a lone low surrogate in a key', { ['\udc00k']: 1 }, '\udc00k'],
    ['a Map', { m: new Map([[1, 2]]) }, 'm'],
    ['a Set', { s: new Set([1]) }, 's'],
    ['a RegExp', { r: /x/ }, 'r'],
    ['a typed array', { u: new Uint8Array(2) }, 'u'],
  ])('refuses %s, naming where it is', (_name, value, where) => {
    let thrown: unknown;
    try {
      canonicalJson(value);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(CanonicalJsonError);
    expect((thrown as CanonicalJsonError).details.path).toBe(where);
    expect((thrown as CanonicalJsonError).message).toContain('RFC 8785');
  });

  test('refuses a cycle instead of overflowing the stack', () => {
    const a: Record<string, unknown> = { x: 1 };
    a.self = { back: a };
    expect(() => canonicalJson(a)).toThrow(/self\.back is a circular reference/);
  });

  test('a value repeated without a cycle is fine', () => {
    const shared = { k: 1 };
    expect(canonicalJson({ a: shared, b: [shared, shared] })).toBe('{"a":{"k":1},"b":[{"k":1},{"k":1}]}');
  });

  test('findLoneSurrogate finds lone halves but not pairs', () => {
    expect(findLoneSurrogate('ok \ud83d\ude00')).toBe(-1);
    expect(findLoneSurrogate('ab\ud83d')).toBe(2);
    expect(findLoneSurrogate('\ude00\ud83d\ude00')).toBe(0);
  });

  test('sha256Hex hashes text as UTF-8 and bytes as given', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sha256Hex(Buffer.from('abc'))).toBe(sha256Hex('abc'));
    expect(sha256Hex('é')).toBe(sha256Hex(Buffer.from([0xc3, 0xa9])));
  });

  test('agrees with the canonicalize package byte for byte on RFC vectors and 500 random JSON values', () => {
    const random = prng(8785);
    const keyPool = ['a', 'B', 'b', '', '1', '10', '2', '\r', '\u0080', 'é', '\u20ac', '\ud83d\ude00', '\ufb33', 'key with space', '"q"', '\\'];
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
    const randomDouble = (): number => {
      for (;;) {
        const bytes = Buffer.from(Array.from({ length: 8 }, () => Math.floor(random() * 256)));
        const value = bytes.readDoubleBE(0);
        if (Number.isFinite(value)) return value;
      }
    };
    const randomString = (): string =>
      Array.from({ length: Math.floor(random() * 6) }, () => pick(['x', '"', '\\', '\n', '\u0001', '\u001f', '\u007f', 'ö', '\u2028', '\ud83d\ude00', '/'])).join('');
    const randomValue = (depth: number): unknown => {
      const kind = Math.floor(random() * (depth > 3 ? 4 : 6));
      if (kind === 0) return pick([null, true, false]);
      if (kind === 1) return pick([randomDouble(), Math.floor(random() * 2000) - 1000, random() / 1e6, random() * 1e22, 0.1, 1e21, 1e-7]);
      if (kind === 2 || kind === 3) return randomString();
      if (kind === 4) return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(depth + 1));
      const record: Record<string, unknown> = {};
      for (let i = Math.floor(random() * 5); i > 0; i--) record[pick(keyPool)] = randomValue(depth + 1);
      return record;
    };
    const corpus: unknown[] = [
      { numbers: [333333333.33333329, 1e30, 4.5, 2e-3, 1e-27], string: '\u20ac$\u000f\nA\'B"\\\\"/', literals: [null, true, false] },
      Object.fromEntries(keyPool.map((key, i) => [key, i])),
      ...Array.from({ length: 500 }, () => randomValue(0)),
    ];
    // Both sides parse the same text, so they see the same doubles.
    const text = JSON.stringify(corpus);
    const ours = (JSON.parse(text) as unknown[]).map((value) => canonicalJson(value));
    expect(ours).toEqual(canonicalizeWithPackage(text));
  });
});

// ---------------------------------------------------------------------------------------------
// A naive reference: the chain rule read literally over an array, with its own canonical form
// (sorted keys by recursion, JSON.stringify for the leaves), and the Merkle root from merkle.ts's
// array function over the leaves of each prefix.
// ---------------------------------------------------------------------------------------------

function refCanonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(refCanonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record)
      .filter((key) => record[key] !== undefined)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${refCanonical(record[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

function refHash(entry: Record<string, unknown>): string {
  const copy: Record<string, unknown> = {};
  for (const field of ['seq', 'id', 'at', 'actor', 'method', 'path', 'fingerprint', 'outcome', 'body', 'prev_hash']) copy[field] = entry[field];
  return sha256(refCanonical(copy));
}

function refVerify(entries: unknown[]): { broke_at: number; broke_seq: number } | undefined {
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i] as Record<string, unknown> | null;
    const seq = entry?.seq;
    const readable = typeof seq === 'number' && Number.isSafeInteger(seq) && seq > 0 ? seq : 0;
    const broken =
      entry === null ||
      typeof entry !== 'object' ||
      seq !== i + 1 ||
      entry.prev_hash !== (i === 0 ? '0'.repeat(64) : (entries[i - 1] as AuditEntry).hash) ||
      (() => {
        try {
          return refHash(entry) !== entry.hash;
        } catch {
          return true;
        }
      })();
    if (broken) return { broke_at: i + 1, broke_seq: readable };
  }
  return undefined;
}

function refAnchor(entries: AuditEntry[], size: number): AuditAnchor {
  const leaves = entries.slice(0, size).map((entry) => leafHash(Buffer.from(entry.hash, 'hex')));
  return { size, head_hash: entries[size - 1].hash, merkle_root: rootFromLeafHashes(leaves).toString('hex') };
}

// ---------------------------------------------------------------------------------------------
// Chains to tamper with
// ---------------------------------------------------------------------------------------------

function fieldsFor(i: number): AuditEntryFields {
  const methods = ['POST', 'PATCH', 'DELETE', 'PUT'];
  return {
    id: `aud_${String(i).padStart(6, '0')}`,
    at: new Date(Date.UTC(2025, 0, 1, 12, 0, i)).toISOString(),
    actor: i % 3 === 0 ? 'usr_admin' : `tok_agent${i % 5}`,
    method: methods[i % methods.length],
    path: `/v1/runs/run_${i}/approve`,
    fingerprint: sha256(`request ${i}`),
    outcome: i % 7 === 0 ? 'denied' : 200 + (i % 3),
    body: { run_id: `run_${i}`, decision_id: `aud_${i}`, tags: ['a', i], nested: { n: i / 3, ok: i % 2 === 0 } },
  };
}

function buildChain(n: number, fields: (i: number) => AuditEntryFields = fieldsFor): AuditEntry[] {
  const entries: AuditEntry[] = [];
  for (let i = 1; i <= n; i++) entries.push(chainEntry(entries[i - 2], fields(i)));
  return entries;
}

const clone = <T>(value: T): T => structuredClone(value);

const flipHex = (hex: string, at = 0): string => hex.slice(0, at) + (hex[at] === '0' ? '1' : '0') + hex.slice(at + 1);

const chain50 = buildChain(50);

function breakOf(entries: unknown[]): { broke_at: number; broke_seq: number } | 'intact' {
  const report = verifyChain(entries);
  return report.ok ? 'intact' : { broke_at: report.broke_at, broke_seq: report.broke_seq };
}

describe('building the chain', () => {
  test('a chain of 50 built with chainEntry verifies, with the reference agreeing', () => {
    const report = verifyChain(chain50);
    expect(report).toEqual({
      ok: true,
      count: 50,
      head_hash: chain50[49].hash,
      merkle_root: refAnchor(chain50, 50).merkle_root,
    });
    expect(refVerify(chain50)).toBeUndefined();
  });

  test('the first entry starts at seq 1 from the genesis hash, and each next one links to the last', () => {
    expect(GENESIS_HASH).toBe('0'.repeat(64));
    expect(chain50[0]).toMatchObject({ seq: 1, prev_hash: GENESIS_HASH });
    expect(chain50[1]).toMatchObject({ seq: 2, prev_hash: chain50[0].hash });
    for (const entry of chain50) expect(entry.hash).toBe(refHash(entry as unknown as Record<string, unknown>));
  });

  test('the entry hash is SHA-256 of exactly this canonical text (a known answer that pins the format)', () => {
    const entry = chainEntry(undefined, {
      id: 'aud_01',
      at: '2025-01-01T12:00:00Z',
      actor: 'usr_admin',
      method: 'POST',
      path: '/v1/runs/run_1/approve',
      fingerprint: 'f1',
      outcome: 200,
      body: { reason_commitment: 'sha256:ab', decision_id: 'aud_01' },
    });
    const text =
      '{"actor":"usr_admin","at":"2025-01-01T12:00:00.000Z","body":{"decision_id":"aud_01","reason_commitment":"sha256:ab"},' +
      '"fingerprint":"f1","id":"aud_01","method":"POST","outcome":200,"path":"/v1/runs/run_1/approve",' +
      `"prev_hash":"${'0'.repeat(64)}","seq":1}`;
    expect(entry.hash).toBe(sha256(text));
    expect(entryHash(entry)).toBe(entry.hash);
    // The same through the canonicalize package itself.
    const { hash: _hash, ...unhashed } = entry;
    expect(sha256(canonicalizeWithPackage(JSON.stringify([unhashed]))[0])).toBe(entry.hash);
  });

  test('a chain read back through JSON (as from a jsonb column) still verifies', () => {
    const fields = (i: number): AuditEntryFields => ({
      ...fieldsFor(i),
      body: { when: new Date(Date.UTC(2025, 1, i)), gone: undefined, list: [undefined, -0, 1e21, 0.1 + 0.2], text: 'é\u2028"' },
    });
    const entries = buildChain(10, fields);
    expect(entries[0].body).toEqual({ when: '2025-02-01T00:00:00.000Z', list: [null, 0, 1e21, 0.30000000000000004], text: 'é\u2028"' });
    expect(verifyChain(JSON.parse(JSON.stringify(entries)) as unknown[])).toMatchObject({ ok: true, count: 10 });
  });

  test('a timestamptz read back as a Date gives the same at, so the hash still recomputes', () => {
    const entry = chainEntry(undefined, { ...fieldsFor(1), at: '2025-03-30T03:30:00.123456+02:00' });
    expect(entry.at).toBe('2025-03-30T01:30:00.123Z');
    expect(new Date(entry.at).toISOString()).toBe(entry.at);
  });

  test('columns a store adds to a row do not change the hash', () => {
    const rows = chain50.map((entry) => ({ ...entry, created_at: new Date(), row_id: entry.seq * 10 }));
    expect(verifyChain(rows)).toMatchObject({ ok: true, count: 50 });
  });

  test('changing the caller\'s body after chaining does not change the entry', () => {
    const body: Record<string, unknown> = { a: 1 };
    const entry = chainEntry(undefined, { ...fieldsFor(1), body });
    body.a = 2;
    expect(entry.body).toEqual({ a: 1 });
    expect(verifyChain([entry]).ok).toBe(true);
  });

  test.each<[string, Partial<AuditEntryFields>, RegExp]>([
    ['a time that is not RFC 3339', { at: 'yesterday' }, /at is "yesterday", not an RFC 3339 time/],
    ['a date without a time', { at: '2025-01-01' }, /not an RFC 3339 time/],
    ['an invalid Date', { at: new Date(Number.NaN) }, /at is an invalid Date/],
    ['an empty id', { id: '' }, /id must be a non-empty string/],
    ['an actor that is not a string', { actor: 7 as unknown as string }, /actor is 7, not a string/],
    ['an outcome of NaN', { outcome: Number.NaN }, /outcome is NaN, not a string or a finite number/],
    ['a body that is an array', { body: [] as unknown as Record<string, unknown> }, /body is an array, not an object/],
  ])('chainEntry refuses %s, naming the value', (_name, change, message) => {
    expect(() => chainEntry(undefined, { ...fieldsFor(1), ...change })).toThrow(AuditChainError);
    expect(() => chainEntry(undefined, { ...fieldsFor(1), ...change })).toThrow(message);
  });

  test('chainEntry refuses a body with no canonical form, naming the path from the entry', () => {
    expect(() => chainEntry(undefined, { ...fieldsFor(1), body: { counts: [1, 2n] } })).toThrow(CanonicalJsonError);
    expect(() => chainEntry(undefined, { ...fieldsFor(1), body: { counts: [1, 2n] } })).toThrow(/body\.counts\[1\] is a BigInt/);
  });

  test('chainEntry refuses a previous entry whose seq or hash is unreadable, naming it', () => {
    expect(() => chainEntry({ ...chain50[0], seq: 0 }, fieldsFor(2))).toThrow(/previous entry's seq is 0/);
    expect(() => chainEntry({ ...chain50[0], hash: 'ABC' }, fieldsFor(2))).toThrow(/previous entry's hash is "ABC"/);
  });

  test('entryHash refuses an entry missing a field', () => {
    const { actor: _actor, hash: _hash, ...rest } = chain50[0];
    expect(() => entryHash(rest as AuditEntry)).toThrow(/actor is undefined, not a string/);
  });
});

describe('verifying the chain', () => {
  type Tamper = (entries: unknown[], position: number) => void;
  const at = (entries: unknown[], position: number): Record<string, unknown> => entries[position - 1] as Record<string, unknown>;

  // One field changed in place (its hash left as it was): the entry itself no longer recomputes.
  const fieldChanges: [string, Tamper][] = [
    ['id', (e, p) => void (at(e, p).id = 'aud_forged')],
    ['at', (e, p) => void (at(e, p).at = '2030-01-01T00:00:00.000Z')],
    ['actor', (e, p) => void (at(e, p).actor = 'usr_someone_else')],
    ['method', (e, p) => void (at(e, p).method = 'GET')],
    ['path', (e, p) => void (at(e, p).path = '/v1/elsewhere')],
    ['fingerprint', (e, p) => void (at(e, p).fingerprint = flipHex(at(e, p).fingerprint as string, 63))],
    ['outcome (a status to its string, a word to a status)', (e, p) => void (at(e, p).outcome = typeof at(e, p).outcome === 'number' ? String(at(e, p).outcome) : 500)],
    ['outcome (to another status)', (e, p) => void (at(e, p).outcome = 403)],
    ['body (a nested value)', (e, p) => void (((at(e, p).body as { nested: { ok: boolean } }).nested.ok = !(at(e, p).body as { nested: { ok: boolean } }).nested.ok))],
    ['body (a key added)', (e, p) => void ((at(e, p).body as Record<string, unknown>).extra = 1)],
    ['body (a key removed)', (e, p) => void delete (at(e, p).body as Record<string, unknown>).run_id],
    ['body (an array element)', (e, p) => void ((at(e, p).body as { tags: unknown[] }).tags[0] = 'b')],
    ['hash', (e, p) => void (at(e, p).hash = flipHex(at(e, p).hash as string, 10))],
    ['prev_hash', (e, p) => void (at(e, p).prev_hash = flipHex(at(e, p).prev_hash as string, 5))],
  ];

  test.each(fieldChanges)('changing %s at any position breaks the chain at exactly that entry', (_field, tamper) => {
    const wrong: string[] = [];
    for (let position = 1; position <= 50; position++) {
      const entries = clone(chain50) as unknown[];
      tamper(entries, position);
      const got = breakOf(entries);
      const want = { broke_at: position, broke_seq: position };
      if (JSON.stringify(got) !== JSON.stringify(want)) wrong.push(`position ${position}: ${JSON.stringify(got)}`);
      if (JSON.stringify(refVerify(entries)) !== JSON.stringify(want)) wrong.push(`reference at ${position}`);
    }
    expect(wrong).toEqual([]);
  });

  const structural: [string, Tamper, (position: number) => { broke_at: number; broke_seq: number }, number[]][] = [
    ['an entry deleted', (e, p) => void e.splice(p - 1, 1), (p) => ({ broke_at: p, broke_seq: p + 1 }), range(1, 49)],
    ['a pair swapped', (e, p) => void e.splice(p - 1, 2, e[p], e[p - 1]), (p) => ({ broke_at: p, broke_seq: p + 1 }), range(1, 49)],
    ['an entry duplicated', (e, p) => void e.splice(p, 0, clone(e[p - 1])), (p) => ({ broke_at: p + 1, broke_seq: p }), range(1, 50)],
    ['seq made a string', (e, p) => void (at(e, p).seq = String(p)), (p) => ({ broke_at: p, broke_seq: 0 }), range(1, 50)],
    ['seq made a fraction', (e, p) => void (at(e, p).seq = p + 0.5), (p) => ({ broke_at: p, broke_seq: 0 }), range(1, 50)],
    ['seq removed', (e, p) => void delete at(e, p).seq, (p) => ({ broke_at: p, broke_seq: 0 }), range(1, 50)],
    ['seq renumbered', (e, p) => void (at(e, p).seq = p + 100), (p) => ({ broke_at: p, broke_seq: p + 100 }), range(1, 50)],
    ['the entry replaced by null', (e, p) => void (e[p - 1] = null), (p) => ({ broke_at: p, broke_seq: 0 }), range(1, 50)],
    [
      'an entry rewritten with its own hash recomputed (the next one no longer links)',
      (e, p) => {
        const entry = at(e, p);
        entry.actor = 'usr_forger';
        entry.hash = entryHash(entry as unknown as AuditEntry);
      },
      (p) => ({ broke_at: p + 1, broke_seq: p + 1 }),
      range(1, 49),
    ],
  ];

  test.each(structural)('%s reports the exact position and seq', (_name, tamper, want, positions) => {
    const wrong: string[] = [];
    for (const position of positions) {
      const entries = clone(chain50) as unknown[];
      tamper(entries, position);
      const got = breakOf(entries);
      if (JSON.stringify(got) !== JSON.stringify(want(position))) wrong.push(`position ${position}: ${JSON.stringify(got)}`);
      if (JSON.stringify(refVerify(entries)) !== JSON.stringify(want(position))) wrong.push(`reference at ${position}`);
    }
    expect(wrong).toEqual([]);
  });

  test('the report names what did not match, with the values', () => {
    const changed = clone(chain50);
    changed[6].actor = 'usr_forger';
    const report = verifyChain(changed);
    expect(report).toMatchObject({ ok: false, reason: 'chain_break', broke_at: 7, broke_seq: 7, count: 50 });
    expect(!report.ok && report.detail).toBe(`hash is ${chain50[6].hash} but the entry recomputes to ${entryHash(changed[6])}`);

    const deleted = clone(chain50);
    deleted.splice(9, 1);
    expect(verifyChain(deleted)).toMatchObject({ broke_at: 10, broke_seq: 11, count: 49, detail: "seq is 11, expected 10, one more than the previous entry's 9" });

    const relinked = clone(chain50);
    relinked[3].actor = 'x';
    relinked[3].hash = entryHash(relinked[3]);
    expect(verifyChain(relinked)).toMatchObject({
      broke_at: 5,
      detail: `prev_hash is "${chain50[3].hash}", expected the previous entry's hash ${relinked[3].hash}`,
    });

    const stringSeq = clone(chain50) as unknown[];
    at(stringSeq, 3).seq = '3';
    expect(verifyChain(stringSeq)).toMatchObject({ broke_at: 3, broke_seq: 0, detail: 'seq is "3", not a positive integer; expected 3' });

    const badType = clone(chain50) as unknown[];
    at(badType, 2).actor = 42;
    expect(verifyChain(badType)).toMatchObject({ broke_at: 2, broke_seq: 2, detail: 'actor is 42, not a string' });
  });

  test('a chain that starts anywhere but seq 1 from the genesis hash breaks at position 1', () => {
    expect(verifyChain(chain50.slice(1))).toMatchObject({ broke_at: 1, broke_seq: 2, detail: 'seq is 2, expected 1 for the first entry' });
    expect(verifyChain([{ ...chain50[0], prev_hash: chain50[0].hash }])).toMatchObject({ broke_at: 1, broke_seq: 1 });
  });

  test('an entry whose body has no canonical form is a break, not an exception', () => {
    const entries = clone(chain50) as unknown[];
    (at(entries, 4).body as Record<string, unknown>).n = Number.NaN;
    expect(verifyChain(entries)).toMatchObject({ broke_at: 4, broke_seq: 4, detail: expect.stringMatching(/no canonical form: body\.n is NaN/) });
  });

  test('only the first break is reported, and count still covers every entry', () => {
    const entries = clone(chain50);
    entries[39].actor = 'late';
    entries[9].actor = 'early';
    expect(verifyChain(entries)).toMatchObject({ broke_at: 10, broke_seq: 10, count: 50 });
  });

  test('a truncated tail is not something the chain alone can see', () => {
    expect(verifyChain(chain50.slice(0, 45))).toEqual({
      ok: true,
      count: 45,
      head_hash: chain50[44].hash,
      merkle_root: refAnchor(chain50, 45).merkle_root,
    });
  });

  test('an empty chain verifies with the genesis head and the empty-tree root', () => {
    expect(verifyChain([])).toEqual({ ok: true, count: 0, head_hash: GENESIS_HASH, merkle_root: EMPTY_ROOT.toString('hex') });
  });

  test('verification reads a one-shot stream in order, each entry once', () => {
    const pulled: number[] = [];
    function* stream(): Generator<AuditEntry> {
      let previous: AuditEntry | undefined;
      for (let i = 1; i <= 1000; i++) {
        previous = chainEntry(previous, fieldsFor(i));
        pulled.push(i);
        yield previous;
      }
    }
    expect(verifyChain(stream())).toMatchObject({ ok: true, count: 1000 });
    expect(pulled).toEqual(range(1, 1000));
  });

  test('random tamperings agree with the naive reference (300 seeded cases)', () => {
    const random = prng(9162);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
    const disagreements: string[] = [];
    for (let round = 0; round < 300; round++) {
      const entries = clone(chain50) as unknown[];
      const ops: string[] = [];
      for (let k = 1 + Math.floor(random() * 3); k > 0 && entries.length > 1; k--) {
        const i = Math.floor(random() * entries.length);
        const op = pick(['field', 'delete', 'swap', 'duplicate', 'seq', 'hash', 'relink'] as const);
        ops.push(`${op}@${i + 1}`);
        const entry = entries[i] as Record<string, unknown>;
        if (op === 'field') entry[pick(['id', 'at', 'actor', 'method', 'path', 'fingerprint', 'outcome'])] = pick(['x', 1, 'y']);
        if (op === 'delete') entries.splice(i, 1);
        if (op === 'swap' && i + 1 < entries.length) entries.splice(i, 2, entries[i + 1], entries[i]);
        if (op === 'duplicate') entries.splice(i, 0, clone(entry));
        if (op === 'seq') entry.seq = pick([String(entry.seq), -1, 0, 1.5, null, (entry.seq as number) + 1]);
        if (op === 'hash') entry.hash = randomBytes(32).toString('hex');
        if (op === 'relink') {
          entry.method = 'PUT';
          try {
            entry.hash = entryHash(entry as unknown as AuditEntry);
          } catch {
            // An earlier operation left it without a hashable shape; it breaks there anyway.
          }
        }
      }
      const got = breakOf(entries);
      const want = refVerify(entries) ?? 'intact';
      if (JSON.stringify(got) !== JSON.stringify(want)) disagreements.push(`${ops.join(', ')}: ${JSON.stringify(got)} vs ${JSON.stringify(want)}`);
    }
    expect(disagreements).toEqual([]);
  });

  test('100,000 entries verify in well under a few seconds', () => {
    const entries = buildChain(100_000);
    const { value: report, ms } = cpuTimed(() => verifyChain(entries));
    expect(report).toMatchObject({ ok: true, count: 100_000, head_hash: entries[99_999].hash });
    // About 1.2 s of CPU under Jest (0.9 s in plain Node), Merkle root included; 3.8 s was seen
    // beside a fresh machine's Go builds. The bound catches a slower algorithm (a quadratic one
    // takes minutes), not a slower machine: the speed itself is bench (d)'s.
    expect(ms).toBeLessThan(8000);
  });
});

describe('anchors', () => {
  test('an anchor is the size, head hash and RFC 9162 root of the first n entries', () => {
    for (const size of [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32, 33, 50]) {
      expect(anchorOf(chain50, size)).toEqual(refAnchor(chain50, size));
    }
    expect(anchorOf(chain50)).toEqual(refAnchor(chain50, 50));
  });

  test('anchorOf reads no further than the size it anchors', () => {
    let pulled = 0;
    function* stream(): Generator<AuditEntry> {
      for (const entry of chain50) {
        pulled++;
        if (pulled > 20) throw new Error('read past the anchor');
        yield entry;
      }
    }
    expect(anchorOf(stream(), 20)).toEqual(refAnchor(chain50, 20));
    expect(pulled).toBe(20);
  });

  test('a chain that satisfies its anchors verifies', () => {
    const anchors = [20, 40, 50].map((size) => anchorOf(chain50, size));
    expect(checkAnchors(chain50, anchors)).toEqual([]);
    expect(verifyChain(chain50, anchors)).toMatchObject({ ok: true, count: 50 });
    // A chain that grew after its anchors still satisfies them.
    const grown = buildChain(70);
    expect(verifyChain(grown, anchors)).toMatchObject({ ok: true, count: 70 });
  });

  test('a truncated tail shows as anchor_unsatisfied with missing_entries', () => {
    const anchors = [20, 40, 50].map((size) => anchorOf(chain50, size));
    const truncated = chain50.slice(0, 45);
    expect(checkAnchors(truncated, anchors)).toEqual([{ size: 50, problem: 'missing_entries', expected: 50, actual: 45 }]);
    expect(verifyChain(truncated, anchors)).toEqual({
      ok: false,
      reason: 'anchor_unsatisfied',
      broke_at: 0,
      broke_seq: 0,
      count: 45,
      anchor_problems: [{ size: 50, problem: 'missing_entries', expected: 50, actual: 45 }],
      detail: 'the anchor of size 50 needs 50 entries, the chain has 45',
    });
  });

  test('a chain rewritten from entry 30 and relinked fails every anchor at or after 30 on head and root', () => {
    const rewritten = chain50.slice(0, 29);
    for (let i = 30; i <= 50; i++) {
      rewritten.push(chainEntry(rewritten[i - 2], i === 30 ? { ...fieldsFor(i), actor: 'usr_forger' } : fieldsFor(i)));
    }
    expect(verifyChain(rewritten)).toMatchObject({ ok: true, count: 50 });

    const anchors = [20, 40, 50].map((size) => anchorOf(chain50, size));
    const problems = checkAnchors(rewritten, anchors);
    expect(problems).toEqual([
      { size: 40, problem: 'head_mismatch', expected: chain50[39].hash, actual: rewritten[39].hash },
      { size: 40, problem: 'root_mismatch', expected: anchors[1].merkle_root, actual: refAnchor(rewritten, 40).merkle_root },
      { size: 50, problem: 'head_mismatch', expected: chain50[49].hash, actual: rewritten[49].hash },
      { size: 50, problem: 'root_mismatch', expected: anchors[2].merkle_root, actual: refAnchor(rewritten, 50).merkle_root },
    ]);
    expect(verifyChain(rewritten, anchors)).toMatchObject({ ok: false, reason: 'anchor_unsatisfied', count: 50, anchor_problems: problems });
  });

  test('a relinked rewrite that also replaces the tail entirely still fails the anchor it rewrote under', () => {
    const anchors = [anchorOf(chain50, 10)];
    const forged = buildChain(60, (i) => ({ ...fieldsFor(i), actor: 'usr_forger' }));
    expect(verifyChain(forged, anchors)).toMatchObject({
      reason: 'anchor_unsatisfied',
      anchor_problems: [
        { size: 10, problem: 'head_mismatch' },
        { size: 10, problem: 'root_mismatch' },
      ],
    });
  });

  test('an entry that does not link still takes its place in the tree by its stored hash as it is: an uppercased hash is a leaf of its text', () => {
    const entries = clone(chain50).slice(0, 12);
    entries[6].hash = entries[6].hash.toUpperCase();
    const leaves = entries.map((entry) => leafOfStoredHash(entry.hash));
    const root = rootFromLeafHashes(leaves).toString('hex');
    expect(leaves[6]).toEqual(leafHash(Buffer.from(entries[6].hash, 'utf8')));
    expect(verifyChain(entries)).toMatchObject({ ok: false, reason: 'chain_break', broke_at: 7 });
    // The anchor over the intact chain no longer holds, and the root found is the one of the stored hashes.
    expect(checkAnchors(entries, [refAnchor(chain50, 12)])).toEqual([
      { size: 12, problem: 'root_mismatch', expected: refAnchor(chain50, 12).merkle_root, actual: root },
    ]);
  });

  test('a verifier judging anchors only gives no report of entries it did not check', () => {
    const verifier = ChainVerifier.judgingAnchorsOnly([refAnchor(chain50, 10)]);
    const entries = clone(chain50).slice(0, 10);
    entries[2].path = '/v1/forged';
    for (const entry of entries) verifier.push(entry);
    expect(verifier.anchorProblems()).toEqual([]);
    expect(() => verifier.report()).toThrow(/judging anchors only/);
    expect(verifier.checkpoint()).toBeUndefined();
  });

  test('a chain break takes precedence over anchor problems', () => {
    const anchors = [anchorOf(chain50, 50)];
    const entries = clone(chain50).slice(0, 45);
    entries[4].path = '/v1/forged';
    expect(verifyChain(entries, anchors)).toMatchObject({ ok: false, reason: 'chain_break', broke_at: 5, broke_seq: 5, count: 45 });
  });

  test('checkAnchors judges the hashes as stored, so an edited field alone is verifyChain\'s to find', () => {
    const anchors = [anchorOf(chain50, 50)];
    const entries = clone(chain50);
    entries[4].path = '/v1/forged';
    expect(checkAnchors(entries, anchors)).toEqual([]);
    expect(verifyChain(entries).ok).toBe(false);
  });

  test('anchors are checked in size order whatever order they are given in', () => {
    const anchors = [50, 10, 30].map((size) => anchorOf(chain50, size));
    expect(checkAnchors(chain50.slice(0, 5), anchors).map((p) => p.size)).toEqual([10, 30, 50]);
  });

  test('the streaming root agrees with rootFromLeafHashes at every size up to 70', () => {
    const chain = buildChain(70);
    const anchors = range(1, 70).map((size) => refAnchor(chain, size));
    expect(checkAnchors(chain, anchors)).toEqual([]);
  });

  test('anchorOf refuses to vouch for a broken, short or empty chain', () => {
    const broken = clone(chain50);
    broken[2].actor = 'x';
    expect(() => anchorOf(broken, 10)).toThrow(/will not anchor a chain that breaks at position 3/);
    expect(anchorOf(broken, 2)).toEqual(refAnchor(chain50, 2));
    expect(() => anchorOf(chain50, 51)).toThrow(/the chain has 50 entries, fewer than the anchor size 51/);
    expect(() => anchorOf([])).toThrow(/will not anchor an empty chain/);
    expect(() => anchorOf(chain50, 0)).toThrow(/anchor size 0 is not a positive integer/);
    expect(() => anchorOf(chain50, 1.5)).toThrow(AuditChainError);
  });

  test('a malformed anchor is refused up front, naming it', () => {
    const good = anchorOf(chain50, 10);
    expect(() => checkAnchors(chain50, [good, { ...good, size: -1 }])).toThrow(/anchor 1 has size -1, not a positive integer/);
    expect(() => verifyChain(chain50, [{ ...good, head_hash: good.head_hash.toUpperCase() }])).toThrow(/anchor 0 has head_hash/);
    expect(() => verifyChain(chain50, [{ ...good, merkle_root: 'x' }])).toThrow(/anchor 0 has merkle_root "x"/);
  });
});

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

describe('resuming from a checkpoint', () => {
  const chain = buildChain(45);
  const fullReport = verifyChain(chain);

  test.each([1, 2, 3, 7, 8, 16, 31, 32, 44, 45])('a verifier resumed at %i reaches the same head and root as a whole pass', (at) => {
    const prefix = new ChainVerifier();
    chain.slice(0, at).forEach((entry) => prefix.push(entry));
    const checkpoint = prefix.checkpoint()!;
    expect(checkpoint.size).toBe(at);
    expect(checkpoint.frontier).toHaveLength(at.toString(2).split('').filter((b) => b === '1').length);
    const resumed = new ChainVerifier([], checkpoint);
    chain.slice(at).forEach((entry) => resumed.push(entry));
    expect(resumed.report()).toEqual(fullReport);
    expect(resumed.checkpoint()).toMatchObject({ size: 45, head_hash: chain[44].hash });
  });

  test('a break after the checkpoint is reported at its position in the whole chain', () => {
    const prefix = new ChainVerifier();
    chain.slice(0, 20).forEach((entry) => prefix.push(entry));
    const tampered = clone(chain);
    tampered[29].actor = 'mallory';
    const resumed = new ChainVerifier([], prefix.checkpoint()!);
    tampered.slice(20).forEach((entry) => resumed.push(entry));
    expect(resumed.report()).toMatchObject({ ok: false, reason: 'chain_break', broke_at: 30, broke_seq: 30, count: 45 });
    expect(resumed.checkpoint()).toBeUndefined();
  });

  test('an entry that does not link to the checkpoint is a break', () => {
    const prefix = new ChainVerifier();
    chain.slice(0, 10).forEach((entry) => prefix.push(entry));
    const resumed = new ChainVerifier([], prefix.checkpoint()!);
    chain.slice(11).forEach((entry) => resumed.push(entry));
    expect(resumed.report()).toMatchObject({ ok: false, broke_at: 11, broke_seq: 12 });
  });

  test('a malformed checkpoint is refused', () => {
    const good = (() => {
      const v = new ChainVerifier();
      chain.slice(0, 6).forEach((entry) => v.push(entry));
      return v.checkpoint()!;
    })();
    expect(() => new ChainVerifier([], { ...good, frontier: good.frontier.slice(1) })).toThrow(AuditChainError);
    expect(() => new ChainVerifier([], { ...good, head_hash: 'nope' })).toThrow(/head_hash/);
    expect(() => new ChainVerifier([], { ...good, size: 0 })).toThrow(/positive integer size/);
    expect(() => new ChainVerifier([anchorOf(chain, 4)], good)).toThrow(/cannot be checked from it/);
  });
});

test('an entry hashes as its canonical prefix plus the link suffix, the form the store hashes in SQL', () => {
  const chain = buildChain(12, (i) => ({ ...fieldsFor(i), body: { kind: 'x', text: 'héllo "quoted" \u2028', n: i, nested: { b: [1, 2], a: null } } }));
  for (const entry of chain) {
    expect(sha256(entryCanonicalPrefix(entry) + chainLinkSuffix(entry.prev_hash, entry.seq))).toBe(entry.hash);
  }
});

test('a bundle entry spliced from the stored canonical text is the canonical JSON of the whole entry', () => {
  // Keys sorting before `id` put a structural `,"id":"` inside the body, before the entry's own.
  const decoys = { aardvark: 0, kind: 'x', id: 'decoy', seq: 9, nested: { a: 1, id: 'deeper' }, text: 'héllo ,"id":"q" \u2028' };
  const chain = buildChain(6, (i) => ({ ...fieldsFor(i), path: `/v1/runs?id=${i}&x=","id":"`, body: { ...decoys, n: i } }));
  for (const entry of chain) {
    const canonical = entryCanonicalPrefix(entry) + chainLinkSuffix(entry.prev_hash, entry.seq);
    // As the store streams it (the text and its hash), and as it reads it (with the fields).
    for (const row of [{ seq: entry.seq, hash: entry.hash, canonical }, { ...entry, canonical }]) {
      const spliced = entryForBundle(row);
      expect(spliced).toBeInstanceOf(CanonicalText);
      expect(canonicalJson({ entries: [spliced] })).toBe(canonicalJson({ entries: [entry] }));
    }
    // Text that is not what the hash covers is never carried.
    expect(() => entryForBundle({ ...entry, canonical: canonical.replace('"kind":"x"', '"kind":"y"') })).toThrow(AuditChainError);
    expect(entryForBundle({ ...entry, canonical: null })).toEqual(entry);
  }
});

test('a stored entry that carries its text is that text: verified by its bytes alone, read back by entryFromStoredText', () => {
  const chain = buildChain(5, fieldsFor);
  const rows = chain.map((entry) => ({ seq: entry.seq, hash: entry.hash, canonical: entryCanonicalPrefix(entry) + chainLinkSuffix(entry.prev_hash, entry.seq) }));
  expect(verifyChain(rows)).toEqual(verifyChain(chain));
  expect(rows.map((row) => entryFromStoredText(row.canonical, row.hash))).toEqual(chain);

  const edited = rows.map((row, i) => (i === 2 ? { ...row, canonical: row.canonical.replace('"actor":', '"actor":"mallory","was":') } : row));
  expect(verifyChain(edited)).toMatchObject({ ok: false, broke_at: 3, detail: expect.stringMatching(/stored text hashes to/) });
  // A text moved to another place in the chain names the wrong previous hash and seq.
  const moved = rows.map((row, i) => (i === 3 ? { ...row, canonical: rows[1].canonical, hash: rows[1].hash } : row));
  expect(verifyChain(moved)).toMatchObject({ ok: false, broke_at: 4, detail: expect.stringMatching(/does not end with prev_hash/) });
  expect(entryFromStoredText('not json', rows[0].hash)).toBeUndefined();
});

test('a stored text links to its place only by exactly the suffix the store writes: each near miss breaks the chain there', () => {
  const chain = buildChain(12, fieldsFor);
  const rows = chain.map((entry) => ({ seq: entry.seq, hash: entry.hash, canonical: entryCanonicalPrefix(entry) + chainLinkSuffix(entry.prev_hash, entry.seq) }));
  expect(verifyChain(rows)).toMatchObject({ ok: true, count: 12 });
  const { prev_hash: previous } = chain[10];
  const prefix = entryCanonicalPrefix(chain[10]);
  // The eleventh entry's text, ending otherwise; its stored hash is that text's, so only the link can fail.
  const endings = [
    `,"prev_hash":"${previous}","seq":12}`, // the next place's seq
    `,"prev_hash":"${previous}","seq":21}`, // its digits in another order
    `,"prev_hash":"${previous}","seq":111}`, // another seq ending in its digits
    `,"prev_hash":"${previous}","seq":011}`, // a leading zero
    `,"prev_hash":"${previous}","seq":1}`, // its seq's last digit only
    `,"prev_hash":"${previous}","seq":11 }`,
    `,"prev_hash":"${previous}","seq":11]`,
    `,"prev_hash":"${previous}","seq":11`,
    `,"prev_hash":"${previous.slice(1)}0","seq":11}`,
    `,"prev_hash":"${previous}","seq" :11}`,
    `,"prev_hash" :"${previous}","seq":11}`,
    `"prev_hash":"${previous}","seq":11}`,
  ];
  for (const ending of endings) {
    const canonical = prefix + ending;
    const tampered = rows.map((row, i) => (i === 10 ? { ...row, canonical, hash: sha256(canonical) } : row));
    expect([ending, verifyChain(tampered)]).toEqual([ending, expect.objectContaining({ ok: false, broke_at: 11, detail: expect.stringMatching(/does not end with prev_hash/) })]);
  }
  // The suffix alone, with nothing before it, is not an entry.
  const bare = chainLinkSuffix(previous, 11).slice(1);
  expect(verifyChain(rows.map((row, i) => (i === 10 ? { ...row, canonical: bare, hash: sha256(bare) } : row)))).toMatchObject({ ok: false, broke_at: 11 });
});
