import { decodeJsonBytes, MAX_JSON_DEPTH, scanJsonText } from '../../core/json-scan';

const fieldOf = (text: string) => scanJsonText(text)?.field;

describe('scanJsonText', () => {
  test('well-formed JSON passes, whatever its shape', () => {
    for (const text of [
      '{}',
      '[]',
      '"plain"',
      '12.5e3',
      '-0',
      'null',
      ' { "a" : [ 1, true, null, { "b": "c" } ], "d": { "a": 1 }, "e": [ { "a": 1 }, { "a": 2 } ] } ',
      '{"emoji":"😀 \\ud83d\\ude00","escapes":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9"}',
      '{"big":1.7976931348623157e308,"small":5e-324,"tiny":1e-400,"long":123456789012345678901234567890}',
    ]) {
      expect({ text, fault: scanJsonText(text) }).toEqual({ text, fault: undefined });
      expect(() => JSON.parse(text)).not.toThrow();
    }
  });

  test('a NUL escape names the field, in a value or a key', () => {
    expect(scanJsonText('{"a":"ok","b":["x","y\\u0000"]}')).toEqual({ kind: 'nul', field: 'b[1]', message: 'b[1] holds a NUL character' });
    expect(fieldOf('{"extra_vars":{"k\\u0000":1}}')).toBe('extra_vars.k\u0000');
    expect(scanJsonText('"\\u0000"')).toMatchObject({ field: '(body)', message: '(body) holds a NUL character' });
  });

  test('a lone surrogate escape names the field; a pair written as two escapes is fine', () => {
    for (const lone of ['\\ud800', '\\udfff', 'a\\ud83db', '\\ud83d\\u0041', '\\ude00\\ud83d', '\\ud83d\\ud83d']) {
      expect(scanJsonText(`{"steps":[{"name":"ok"},{"name":"${lone}"}]}`)).toEqual({
        kind: 'lone_surrogate',
        field: 'steps[1].name',
        message: expect.stringMatching(/^steps\[1\]\.name holds a lone surrogate/),
      });
    }
    expect(scanJsonText('{"name":"\\ud83d\\ude00\\uD83D\\uDE00"}')).toBeUndefined();
    // A key at fault is named with the surrogate shown as U+FFFD, so the answer is well-formed text.
    expect(fieldOf('{"extra_vars":{"a\\ud800":1}}')).toBe('extra_vars.a\ufffd');
  });

  test('nesting deeper than the bound is refused naming where it goes too deep; the bound itself is fine', () => {
    const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
    expect(MAX_JSON_DEPTH).toBe(64);
    expect(scanJsonText(nested(64))).toBeUndefined();
    expect(scanJsonText(nested(65))).toEqual({
      kind: 'too_deep',
      field: '[0]'.repeat(64),
      message: `${'[0]'.repeat(64)} is nested more than 64 levels deep`,
    });
    expect(fieldOf(`{"a":[1,{"b":${nested(70)}}]}`)).toBe(`a[1].b${'[0]'.repeat(61)}`);
    // Refused before anything else reads it, however deep and even when it is not JSON at all.
    expect(scanJsonText('{"x":'.repeat(500_000))?.kind).toBe('too_deep');
  });

  test('a key given twice in one object names it; the same key in different objects is fine', () => {
    expect(scanJsonText('{"a":1,"b":{"c":1,"c":2}}')).toEqual({ kind: 'duplicate_key', field: 'b.c', message: 'b.c is given more than once' });
    expect(fieldOf('{"a":1,"\\u0061":2}')).toBe('a');
    expect(scanJsonText('{"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":2}],"d":{"e":{"x":1},"x":2}}')).toBeUndefined();
  });

  test('a __proto__ key is refused naming it, however it is written', () => {
    expect(scanJsonText('{"extra_vars":{"__proto__":{"admin":true}}}')).toEqual({
      kind: 'proto_key',
      field: 'extra_vars.__proto__',
      message: 'extra_vars.__proto__: a key named __proto__ is not accepted',
    });
    expect(fieldOf('[{"\\u005f_proto__":1}]')).toBe('[0].__proto__');
    expect(scanJsonText('{"value":"__proto__","proto":1}')).toBeUndefined();
  });

  test('a number too large for a double names the field; precision loss and underflow are not faults', () => {
    expect(scanJsonText('{"extra_vars":{"n":[1,-1e400]}}')).toEqual({
      kind: 'number_out_of_range',
      field: 'extra_vars.n[1]',
      message: 'extra_vars.n[1] is a number too large to represent',
    });
    expect(fieldOf(`{"n":${'9'.repeat(400)}}`)).toBe('n');
    expect(fieldOf('{"n":1E309}')).toBe('n');
  });

  test('text that is not JSON is left for JSON.parse to describe', () => {
    for (const text of ['{"a":', '{"a" 1}', '[1,2', '{"a":"unterminated', '{"a":"\\uZZZZ"}', ']', '{]', '[}', '{"a":1}}', '{"a":1e}']) {
      expect({ text, fault: scanJsonText(text) }).toEqual({ text, fault: undefined });
      expect(() => JSON.parse(text)).toThrow();
    }
  });

  test('the first fault in the text is the one reported', () => {
    expect(fieldOf('{"a":"\\ud800","b":"\\u0000","a":1}')).toBe('a');
    expect(fieldOf('{"b":"\\u0000","a":"\\ud800"}')).toBe('b');
  });

  test('a 20 MiB inventory-like body scans in well under a second', () => {
    const host = (i: number) => ({
      name: `web-${i}.example.com`,
      port: 22,
      groups: ['web', 'eu', 'é', '😀'],
      vars: { env: 'prod', tier: i % 3, rack: `r${i}`, note: 'line\nnext "quoted" \\ back', motd: 'x'.repeat(120) },
    });
    const hosts: string[] = [];
    let size = 0;
    for (let i = 0; size < 18 * 1024 * 1024; i++) {
      const text = JSON.stringify(host(i));
      hosts.push(text);
      size += text.length + 1;
    }
    const text = `{"hosts":[${hosts.join(',')}],"blob":"${'y'.repeat(2 * 1024 * 1024)}"}`;
    expect(text.length).toBeGreaterThan(20 * 1024 * 1024);
    // The best of three, each beside JSON.parse of the same text: the bound is on the scan's cost,
    // not on a moment when the other test workers of a 2-core machine had the CPU.
    const scans: number[] = [];
    const parses: number[] = [];
    for (let round = 0; round < 3; round++) {
      let started = performance.now();
      expect(scanJsonText(text)).toBeUndefined();
      scans.push(performance.now() - started);
      started = performance.now();
      JSON.parse(text);
      parses.push(performance.now() - started);
    }
    // Typically a tenth of a second, about what JSON.parse takes for the same text; on a machine
    // slowed for both, no more than a few parses' worth.
    expect(Math.min(...scans)).toBeLessThan(Math.max(750, 5 * Math.min(...parses)));
  });
});

describe('decodeJsonBytes', () => {
  test('valid UTF-8 decodes as it is, less a leading byte order mark', () => {
    expect(decodeJsonBytes(Buffer.from('{"a":"é😀"}'))).toBe('{"a":"é😀"}');
    expect(decodeJsonBytes(Buffer.from('\ufeff{"a":1}'))).toBe('{"a":1}');
    expect(decodeJsonBytes(Buffer.alloc(0))).toBe('');
  });

  test.each([
    ['a stray continuation byte', [0x80]],
    ['a byte that is never UTF-8', [0xff]],
    ['an overlong encoding', [0xc0, 0x80]],
    ['an encoded surrogate', [0xed, 0xa0, 0x80]],
    ['a sequence cut short', [0xe2, 0x82]],
    ['a code point past U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
  ])('%s inside a string is reported as invalid UTF-8 naming the field', (_name, bytes) => {
    const body = Buffer.concat([Buffer.from('{"ok":"é","profile":{"full_name":"Ann'), Buffer.from(bytes), Buffer.from('Lee"}}')]);
    expect(scanJsonText(decodeJsonBytes(body))).toEqual({
      kind: 'invalid_utf8',
      field: 'profile.full_name',
      message: 'profile.full_name holds bytes that are not valid UTF-8',
    });
  });

  test('invalid UTF-8 in a key names the key with U+FFFD in its place', () => {
    const body = Buffer.concat([Buffer.from('{"extra_vars":{"k'), Buffer.from([0xff]), Buffer.from('":1}}')]);
    expect(fieldOf(decodeJsonBytes(body))).toBe('extra_vars.k\ufffd');
  });

  test('invalid UTF-8 outside any string makes the text invalid JSON', () => {
    const text = decodeJsonBytes(Buffer.concat([Buffer.from('{"a":1'), Buffer.from([0xff]), Buffer.from('}')]));
    expect(scanJsonText(text)).toBeUndefined();
    expect(() => JSON.parse(text)).toThrow();
  });
});
