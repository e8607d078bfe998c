import { promises as fs } from 'node:fs';
import type { Config } from '../../core/config';
import { ConfigError } from '../../core/config';
import { BUILT_IN_LICENSE_KEYS, LicenseError, parseLicense, type License, type Tier } from '../../core/access/license';

export interface Licensing {
  tier: Tier;
  license: License | null;
}

/**
 * The install's tier: Community without `--license-file`, else what the license grants. A license
 * named but refused stops the start: an operator who configured one expects its tier, and a
 * silent fall back to Community would refuse their policies later with a misleading message.
 */
export async function loadLicensing(
  config: Config,
  installId: string,
  /** The keys trusted to sign licenses: Cairn's own; an in-process test harness may add its own. */
  trusted: readonly object[] = BUILT_IN_LICENSE_KEYS,
): Promise<Licensing> {
  if (!config.licenseFile) return { tier: 'community', license: null };
  let text: string;
  try {
    text = await fs.readFile(config.licenseFile, 'utf8');
  } catch (err) {
    throw new ConfigError(`--license-file (CAIRN_LICENSE_FILE): cannot read ${config.licenseFile}: ${(err as Error).message}`);
  }
  try {
    const license = await parseLicense(text, [...trusted], new Date(), installId);
    return { tier: license.tier, license };
  } catch (err) {
    if (err instanceof LicenseError) throw new ConfigError(`--license-file (CAIRN_LICENSE_FILE): ${err.message}`);
    throw err;
  }
}
