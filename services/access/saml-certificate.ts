import { readFileSync } from 'node:fs';
import { ConfigError } from '../../core/config';
import { isCertificatePem, where, type SamlSettings } from '../../core/access/saml-settings';

/**
 * The identity provider's signing certificate, PEM: `--saml-idp-cert` as given, or the file it
 * names, read each time so that a certificate rolled over in the file is taken without a restart.
 * `cairn serve` reads it once at start, so a missing or unusable file stops the start naming the flag.
 */
export function samlIdpCertificate(settings: Pick<SamlSettings, 'idpCert'>): string {
  if (settings.idpCert.includes('-----BEGIN')) return settings.idpCert;
  let pem: string;
  try {
    pem = readFileSync(settings.idpCert, 'utf8');
  } catch (err) {
    throw new ConfigError(`${where('samlIdpCert')}: cannot read ${settings.idpCert}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (!isCertificatePem(pem)) throw new ConfigError(`${where('samlIdpCert')}: ${settings.idpCert} does not hold a PEM X.509 certificate`);
  return pem;
}
