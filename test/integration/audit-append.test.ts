import { verifyChain } from '../../core/audit/audit-chain';
import { appendAuditEntry, entryOfChainRow, streamAuditEntries, type StoredAuditEntry } from '../../store/audit';
import { connectDatabase } from '../../store/db';
import { migrate } from '../../store/migrate';
import { createTestDatabase } from '../support/database';

test('appends racing on many connections link into one chain in commit order, and a rolled-back one leaves no trace', async () => {
  const database = await createTestDatabase();
  const sql = connectDatabase(database.url, { max: 12 });
  try {
    await migrate(sql);
    const append = (i: number) =>
      sql.begin(async (tx) => {
        // Some work before the append, as a real change has, so transactions overlap.
        await tx`SELECT pg_sleep(${(i % 5) / 1000})`;
        return appendAuditEntry(tx, {
          id: `aud_${i}`,
          at: new Date(),
          actor: `actor-${i % 3}`,
          method: 'POST',
          path: `/v1/things/${i}`,
          fingerprint: `sha256:${i}`,
          outcome: 201,
          body: { kind: 'thing.created', i, text: 'ünïcode "quoted" \\ back' },
          run_id: i % 2 ? `run_${i}` : null,
        });
      });
    const failed = sql.begin(async (tx) => {
      await appendAuditEntry(tx, { id: 'aud_rolled_back', at: new Date(), actor: 'x', method: 'POST', path: '/', fingerprint: '', outcome: 500, body: {} });
      throw new Error('the change failed');
    });
    const appended = await Promise.all([...Array(120).keys()].map(append));
    await expect(failed).rejects.toThrow('the change failed');

    const stored: StoredAuditEntry[] = [];
    for await (const row of streamAuditEntries(sql)) stored.push(entryOfChainRow(row));
    expect(stored.map((e) => e.seq)).toEqual([...Array(120).keys()].map((i) => i + 1));
    expect(stored.find((e) => e.id === 'aud_rolled_back')).toBeUndefined();
    const report = verifyChain(stored);
    expect(report).toMatchObject({ ok: true, count: 120 });
    // What each append answered is what was stored.
    for (const entry of appended) expect(stored[entry.seq - 1]).toMatchObject({ id: entry.id, hash: entry.hash, prev_hash: entry.prev_hash });
    const [head] = await sql`SELECT seq, hash FROM audit_head`;
    expect(head).toEqual({ seq: 120, hash: stored[119].hash });
  } finally {
    await sql.end();
    await database.drop();
  }
});
