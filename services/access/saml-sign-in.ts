import type { CacheProvider, Profile, SAML } from '@node-saml/node-saml';
import { DomainError } from '../../core/errors';
import { lazy } from '../../core/lazy';
import type { Config } from '../../core/config';
import { SAML_ACS_PATH, type SamlSettings } from '../../core/access/saml-settings';
import { claimAt } from '../../core/access/sign-in-mapping';
import type { Db } from '../../store/db';
import { getSamlRequest, insertSamlRequest, rememberAssertion, takeSamlRequest } from '../../store/saml';
import type { AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { signInIdentity, type IdentitySignIn, type SignInMode } from './identity-sign-in';
import { admitSamlStart } from './throttle';
import { samlIdpCertificate } from './saml-certificate';

/**
 * SAML 2.0 sign-in (spec part A 4.11; docs/api.md, SAML sign-in), Cairn the service provider
 * through @node-saml/node-saml: the login route sends the browser to the identity provider with an
 * AuthnRequest (HTTP-Redirect binding) whose ID is kept in PostgreSQL, so any server of the install
 * can take the answer; the assertion consumer service takes the Response the provider has the
 * browser post (HTTP-POST binding) and signs the person in (services/access/identity-sign-in.ts)
 * by their (identity provider entity id, NameID) pair.
 *
 * An assertion is accepted only when it is signed by the configured certificate (a signed Response
 * alone is not enough), its Issuer is the configured identity provider, its audience this service
 * provider, its subject confirmation's Recipient (and the Response's Destination, when given) this
 * ACS URL, it answers (InResponseTo) an unanswered request of this install, its times hold within
 * the clock skew, and it was not used before. The library verifies only the signed assertion it
 * hands back, so a signature moved beside an unsigned assertion (signature wrapping) verifies nothing.
 */

/** How long a sent request may wait for its answer. */
export const SAML_REQUEST_SECONDS = 600;

/** The sign-in settings; a 404 naming the flag while SAML sign-in is not configured. */
export function samlSettingsOf(config: Pick<Config, 'saml'>): SamlSettings {
  if (!config.saml) throw new DomainError('not_found', 'SAML sign-in is not configured on this server: --saml-idp-sso-url (CAIRN_SAML_IDP_SSO_URL) is not set');
  return config.saml;
}

const refused = (reason: string) => new DomainError('unauthorized', `the SAML sign-in was refused: ${reason}; start again at /auth/saml/login`);

/**
 * The library's store of request ids, backed by saml_requests: a request is recorded with the mode
 * it was started in; it is read while unexpired, never deleted by the library (the sign-in takes it
 * once, below), and the ids the library looked up are remembered so that a refused answer spends them.
 */
class RequestStore implements CacheProvider {
  readonly looked = new Set<string>();
  constructor(
    private readonly db: Db,
    private readonly mode: SignInMode = 'console',
  ) {}
  async saveAsync(key: string, value: string) {
    await insertSamlRequest(this.db, { request_id: key, mode: this.mode, expires_at: new Date(Date.now() + SAML_REQUEST_SECONDS * 1000) });
    return { value, createdAt: Date.now() };
  }
  async getAsync(key: string) {
    this.looked.add(key);
    const request = await getSamlRequest(this.db, key);
    return request ? request.created_at.toISOString() : null;
  }
  async removeAsync(key: string | null) {
    return key;
  }
}

/** node-saml, loaded by the first SAML sign-in rather than by every server start. */
const nodeSaml = lazy(() => ({
  ...(require('@node-saml/node-saml') as typeof import('@node-saml/node-saml')),
  ...(require('@node-saml/node-saml/lib/xml') as typeof import('@node-saml/node-saml/lib/xml')),
}));

function serviceProvider(settings: SamlSettings, store: RequestStore): SAML {
  const { SAML, ValidateInResponseTo } = nodeSaml();
  return new SAML({
    entryPoint: settings.idpSsoUrl,
    issuer: settings.spEntityId,
    callbackUrl: settings.acsUrl,
    idpCert: samlIdpCertificate(settings),
    idpIssuer: settings.idpEntityId,
    audience: settings.spEntityId,
    wantAssertionsSigned: true,
    wantAuthnResponseSigned: false,
    acceptedClockSkewMs: settings.clockSkewSeconds * 1000,
    validateInResponseTo: ValidateInResponseTo.always,
    requestIdExpirationPeriodMs: SAML_REQUEST_SECONDS * 1000,
    cacheProvider: store,
    // The identity provider picks the NameID format it is configured with for Cairn, and how the person authenticates.
    identifierFormat: null,
    disableRequestedAuthnContext: true,
  });
}

/** This service provider's metadata, for the identity provider's administrator. */
export function samlMetadata(server: Pick<ServerContext, 'config' | 'sql'>): string {
  const settings = samlSettingsOf(server.config);
  return serviceProvider(settings, new RequestStore(server.sql)).generateServiceProviderMetadata(null, null);
}

/** Starts a sign-in: where to send the browser (the identity provider, with the AuthnRequest). */
export async function beginSamlSignIn(server: Pick<ServerContext, 'config' | 'sql'>, mode: SignInMode, address: string): Promise<string> {
  const settings = samlSettingsOf(server.config);
  await admitSamlStart(server.sql, address);
  return serviceProvider(settings, new RequestStore(server.sql, mode)).getAuthorizeUrlAsync('', undefined, {});
}

export interface SamlSignIn extends IdentitySignIn {
  mode: SignInMode;
}

/** The assertion's own XML-to-JS form, as the library parsed it from the signed part. */
type Parsed = { $?: Record<string, string> } & Record<string, Parsed[] | undefined>;

/**
 * Finishes a sign-in with the Response the browser posted: checked as above, its request taken
 * and its assertion remembered (each once), its attributes mapped, the person signed in. `outcome`
 * gives the status the ACS will answer in a mode, for the chain entries.
 */
export async function completeSamlSignIn(
  server: Pick<ServerContext, 'config' | 'sql' | 'logger'>,
  samlResponse: string,
  outcome: (mode: SignInMode) => number,
): Promise<SamlSignIn> {
  const settings = samlSettingsOf(server.config);
  const store = new RequestStore(server.sql);
  let profile: Profile | null;
  try {
    profile = (await serviceProvider(settings, store).validatePostResponseAsync({ SAMLResponse: samlResponse })).profile;
    if (!profile) throw refused('the identity provider did not sign the person in');
    await checkAddressedHere(settings, samlResponse, profile);
  } catch (err) {
    // A refused answer spends the request it claims to answer.
    for (const id of store.looked) await takeSamlRequest(server.sql, id);
    if (err instanceof DomainError) throw err;
    throw refused(libraryReason(err));
  }

  const request = await takeSamlRequest(server.sql, String(profile.inResponseTo));
  if (!request) throw refused('the request it answers was already answered');
  const assertion = (profile.getAssertion!() as { Assertion: Parsed }).Assertion;
  const assertionId = assertion.$?.ID;
  if (!assertionId) throw refused('the assertion has no ID');
  if (!(await rememberAssertion(server.sql, settings.idpEntityId, assertionId, rememberUntil(assertion, settings)))) {
    throw refused('the assertion was already used');
  }

  const attributes = (profile.attributes ?? {}) as Record<string, unknown>;
  const named = settings.usernameAttribute ? claimAt(attributes, settings.usernameAttribute) : profile.nameID;
  const names = [named].flat().filter((v): v is string => typeof v === 'string');
  const origin: AuditOrigin = { actor: 'anonymous', method: 'POST', path: SAML_ACS_PATH, withheld: new Set() };
  const person = { protocol: 'saml' as const, issuer: settings.idpEntityId, subject: profile.nameID, claims: attributes, names };
  const signedIn = await signInIdentity(server, settings, person, origin, outcome(request.mode));
  return { ...signedIn, mode: request.mode };
}

/** The checks the library leaves to its caller: who issued the assertion, and that it was meant for this ACS. */
async function checkAddressedHere(settings: SamlSettings, samlResponse: string, profile: Profile): Promise<void> {
  if (profile.issuer !== settings.idpEntityId) throw refused('the assertion was issued by another identity provider (Issuer)');
  if (!profile.nameID) throw refused('the assertion names no subject (NameID)');
  const assertion = (profile.getAssertion!() as { Assertion: Parsed }).Assertion;
  const confirmations = (assertion.Subject?.[0]?.SubjectConfirmation ?? []).filter((c) => c.$?.Method === 'urn:oasis:names:tc:SAML:2.0:cm:bearer');
  const recipients = confirmations.map((c) => c.SubjectConfirmationData?.[0]?.$?.Recipient);
  if (!recipients.includes(settings.acsUrl)) throw refused('the assertion is meant for another recipient (SubjectConfirmationData Recipient)');
  const { parseDomFromString, xpath } = nodeSaml();
  const doc = await parseDomFromString(Buffer.from(samlResponse, 'base64').toString('utf8'));
  const destination = xpath.selectAttributes(doc, "/*[local-name()='Response']/@Destination")[0]?.nodeValue;
  if (destination != null && destination !== settings.acsUrl) throw refused('the response is addressed to another destination (Destination)');
}

/** An assertion is remembered while any of its times would still let it through, the skew included. */
function rememberUntil(assertion: Parsed, settings: SamlSettings): Date {
  const times = [
    assertion.Conditions?.[0]?.$?.NotOnOrAfter,
    ...(assertion.Subject?.[0]?.SubjectConfirmation ?? []).map((c) => c.SubjectConfirmationData?.[0]?.$?.NotOnOrAfter),
  ]
    .map((t) => (t ? Date.parse(t) : NaN))
    .filter((t) => Number.isFinite(t));
  const until = times.length > 0 ? Math.max(...times) : Date.now() + SAML_REQUEST_SECONDS * 1000;
  return new Date(until + settings.clockSkewSeconds * 1000);
}

/** The library's reason, in a sentence and bounded: it names the check, never anything secret. */
function libraryReason(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.replace(/\s+/g, ' ').slice(0, 200) || 'the response could not be verified';
}
