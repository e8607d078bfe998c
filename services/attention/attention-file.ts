import fs from 'node:fs';
import { AttentionFileError, EMPTY_ATTENTION_FILE, installThresholds, parseAttentionFile, type AttentionSettings } from '../../core/runs/attention';
import { ConfigError, SETTINGS, type Config } from '../../core/config';

/**
 * Attention alert thresholds (spec part B 6.6): the defaults, with `--attention-file` over them
 * (core/attention.ts), read once at start. A file that cannot be read or holds a fault stops the
 * start, naming the key.
 */
export function attentionSettingsOf(config: Pick<Config, 'attentionFile' | 'leaseSeconds'>): AttentionSettings {
  const file = config.attentionFile;
  if (!file) return { thresholds: installThresholds(config.leaseSeconds, EMPTY_ATTENTION_FILE), file: EMPTY_ATTENTION_FILE };
  const where = `${SETTINGS.attentionFile.flag} (${SETTINGS.attentionFile.env})`;
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`${where}: cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    const parsed = parseAttentionFile(text);
    return { thresholds: installThresholds(config.leaseSeconds, parsed), file: parsed };
  } catch (err) {
    if (err instanceof AttentionFileError) throw new ConfigError(`${where}: ${file}: ${err.message}`);
    throw err;
  }
}
