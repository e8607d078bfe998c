import { targetBytes } from '../../api/middleware/hygiene';

describe('targetBytes: the bytes a request target stands for', () => {
  test('a target without escapes is its bytes as they are', () => {
    expect(targetBytes('/v1/runs?status=running&limit=20')).toEqual(Buffer.from('/v1/runs?status=running&limit=20'));
  });

  test('%XX escapes are decoded, in either case', () => {
    expect(targetBytes('/a%20b%2fc%2Fd')).toEqual(Buffer.from('/a b/c/d'));
    expect(targetBytes('q=%C3%A9t%c3%a9')).toEqual(Buffer.from('q=été'));
    expect(targetBytes('%00')).toEqual(Buffer.from([0]));
    expect(targetBytes('%FF%fe')).toEqual(Buffer.from([0xff, 0xfe]));
  });

  test('a % that does not start an escape stays as it is', () => {
    expect(targetBytes('100%')).toEqual(Buffer.from('100%'));
    expect(targetBytes('a%2')).toEqual(Buffer.from('a%2'));
    expect(targetBytes('%zz%4')).toEqual(Buffer.from('%zz%4'));
    expect(targetBytes('%%41')).toEqual(Buffer.from('%A'));
    expect(targetBytes('%g1%1g')).toEqual(Buffer.from('%g1%1g'));
  });

  test('each character of the target (latin1, as Node hands it over) is one byte', () => {
    expect(targetBytes('/\u00ff\u00e9')).toEqual(Buffer.from([0x2f, 0xff, 0xe9]));
    expect(targetBytes('/\u00ff%41')).toEqual(Buffer.from([0x2f, 0xff, 0x41]));
  });
});
