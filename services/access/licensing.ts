import { promises as fs } from 'node:fs';
import type { Config } from '../../core/config';
import { ConfigError } from '../../core/config';
import { BUILT_IN_LICENSE_KEYS, LicenseError, parseLicense, type License, type Tier, featureRefusal, tierAllows } from '../../core/access/license';
import { forbidden } from '../../core/errors';

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

/**
 * A named queue (spec part A 1.2) needs the Team tier, since only a worker serves one and every
 * worker is Team: 403 naming the feature and `field` wherever a run, template, inventory or
 * schedule names one, or a run inherits one. The default queue (`""`) is always allowed.
 */
export function requireQueueAllowed(queue: string, tier: Tier, field = 'queue'): void {
  if (queue !== '' && !tierAllows(tier, 'named_queue')) {
    throw forbidden(featureRefusal('named_queue', tier), { feature: 'named_queue', field, tier });
  }
}
