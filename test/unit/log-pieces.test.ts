import { STREAM_LOG_MESSAGE_BYTES, logPieces } from '../../services/runs/run-feed';

describe('a read cut into stream messages (logPieces)', () => {
  it('gives no piece for an empty read, so a stream sends no empty log message', () => {
    expect(logPieces(Buffer.alloc(0))).toEqual([]);
  });

  it('keeps a read of at most one message whole', () => {
    const read = Buffer.from('x'.repeat(STREAM_LOG_MESSAGE_BYTES));
    const pieces = logPieces(read);
    expect(pieces).toHaveLength(1);
    expect(pieces[0]!.equals(read)).toBe(true);
  });

  it('cuts a longer read on character boundaries, each piece within the bound, nothing lost', () => {
    // 'xx' then '€' (e2 82 ac) repeated: the first 64 KiB mark, and the second piece's, fall inside a character.
    const text = 'xx' + '€'.repeat(90_000);
    const read = Buffer.from(text, 'utf8');
    const pieces = logPieces(read);
    expect(pieces.length).toBeGreaterThan(1);
    for (const piece of pieces) {
      expect(piece.length).toBeLessThanOrEqual(STREAM_LOG_MESSAGE_BYTES);
      expect(piece.toString('utf8')).not.toContain('\uFFFD');
    }
    expect(Buffer.concat(pieces).equals(read)).toBe(true);
    expect(pieces.map((piece) => piece.toString('utf8')).join('')).toBe(text);
  });
});
