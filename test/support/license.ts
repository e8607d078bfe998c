import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { generateSigningKey, signDocument } from '../../core/audit/signing';
import { tempDir } from './temp';

/**
 * A license file for the tier, signed by a fresh key, and that key's public half: a server or
 * worker trusts it only when its harness is given the key.
 */
export async function testLicense(tier: 'pro' | 'team'): Promise<{ file: string; publicJwk: object }> {
  const key = await generateSigningKey();
  const issuedAt = new Date(Date.now() - 60_000).toISOString();
  const text = await signDocument({ licensee: 'Cairn tests', tier, issued_at: issuedAt }, key.privateJwk, key.keyId);
  const file = path.join(tempDir('cairn-license'), 'license.jws');
  writeFileSync(file, `${text}\n`);
  return { file, publicJwk: key.publicJwk };
}
