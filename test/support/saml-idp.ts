import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { inflateRawSync } from 'node:zlib';
import { SignedXml } from 'xml-crypto';

/**
 * A SAML 2.0 identity provider for the sign-in tests, in the test's process: it takes an
 * AuthnRequest on the HTTP-Redirect binding at /sso and answers, as a real provider does, a page
 * whose form posts a signed Response to the request's AssertionConsumerServiceURL (HTTP-POST
 * binding). Responses are built here and their assertions signed with xml-crypto, by a key pair
 * and self-signed certificate made with openssl for the test; `respond` builds one with any fault
 * a forged or confused answer could carry.
 */

export interface KeyPair {
  key: string;
  cert: string;
}

/** A fresh RSA key and self-signed certificate (node:crypto makes keys but not certificates). */
export function makeKeyPair(commonName: string): KeyPair {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cairn-saml-'));
  try {
    const key = path.join(dir, 'key.pem');
    const cert = path.join(dir, 'cert.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', `/CN=${commonName}`], { stdio: 'ignore' });
    return { key: readFileSync(key, 'utf8'), cert: readFileSync(cert, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface Person {
  nameId: string;
  attributes?: Record<string, string[]>;
}

/** What an answer says and how it is signed; every field defaults to a correct answer to `requestId`. */
export interface AnswerOptions extends Person {
  requestId: string | undefined;
  acsUrl: string;
  audience?: string;
  recipient?: string;
  destination?: string;
  issuer?: string;
  /** The assertion's NotOnOrAfter times. */
  notOnOrAfter?: Date;
  /** Whether the subject confirmation repeats InResponseTo (true unless false). */
  subjectInResponseTo?: boolean;
  /** `assertion`: signed by the provider's key (the default); `none`: unsigned; `other-key`: signed by a key Cairn does not trust. */
  signing?: 'assertion' | 'none' | 'other-key';
}

const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const newId = () => `_${randomBytes(16).toString('hex')}`;

export class TestIdentityProvider {
  readonly keys = makeKeyPair('cairn-test-idp');
  readonly otherKeys = makeKeyPair('someone-else');
  /** Who the provider signs in, as if they had typed their password at it. */
  person: Person = { nameId: 'nobody' };
  /** The AuthnRequests it was sent, newest last. */
  readonly requests: { id: string; acsUrl: string; xml: string }[] = [];
  private server?: http.Server;
  url = '';

  get entityId(): string {
    return `${this.url}/metadata`;
  }

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const url = new URL(req.url ?? '/', this.url);
      if (req.method !== 'GET' || url.pathname !== '/sso' || !url.searchParams.get('SAMLRequest')) {
        res.writeHead(404).end();
        return;
      }
      const xml = inflateRawSync(Buffer.from(url.searchParams.get('SAMLRequest')!, 'base64')).toString('utf8');
      const id = /<samlp:AuthnRequest[^>]*\sID="([^"]+)"/.exec(xml)?.[1];
      const acsUrl = /\sAssertionConsumerServiceURL="([^"]+)"/.exec(xml)?.[1];
      if (!id || !acsUrl) {
        res.writeHead(400).end('not an AuthnRequest');
        return;
      }
      this.requests.push({ id, acsUrl, xml });
      const response = this.respond({ requestId: id, acsUrl, ...this.person });
      const relay = url.searchParams.get('RelayState') ?? '';
      res.writeHead(200, { 'content-type': 'text/html' }).end(
        `<html><body onload="document.forms[0].submit()"><form method="post" action="${escape(acsUrl)}">` +
          `<input type="hidden" name="SAMLResponse" value="${response}"/><input type="hidden" name="RelayState" value="${escape(relay)}"/></form></body></html>`,
      );
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /** A Response, base64 as the HTTP-POST binding carries it. */
  respond(options: AnswerOptions): string {
    return Buffer.from(this.responseXml(options)).toString('base64');
  }

  responseXml(o: AnswerOptions): string {
    const now = new Date();
    const later = o.notOnOrAfter ?? new Date(now.getTime() + 5 * 60_000);
    const issuer = escape(o.issuer ?? this.entityId);
    const inResponseTo = o.requestId === undefined ? '' : ` InResponseTo="${escape(o.requestId)}"`;
    const attributes = Object.entries(o.attributes ?? {})
      .map(([name, values]) => `<saml:Attribute Name="${escape(name)}">${values.map((v) => `<saml:AttributeValue>${escape(v)}</saml:AttributeValue>`).join('')}</saml:Attribute>`)
      .join('');
    const assertion =
      `<saml:Assertion xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="${newId()}" Version="2.0" IssueInstant="${now.toISOString()}">` +
      `<saml:Issuer>${issuer}</saml:Issuer>` +
      `<saml:Subject><saml:NameID Format="urn:oasis:names:tc:SAML:2.0:nameid-format:persistent">${escape(o.nameId)}</saml:NameID>` +
      `<saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer"><saml:SubjectConfirmationData${o.subjectInResponseTo === false ? '' : inResponseTo} ` +
      `NotOnOrAfter="${later.toISOString()}" Recipient="${escape(o.recipient ?? o.acsUrl)}"/></saml:SubjectConfirmation></saml:Subject>` +
      `<saml:Conditions NotBefore="${new Date(now.getTime() - 30_000).toISOString()}" NotOnOrAfter="${later.toISOString()}">` +
      `<saml:AudienceRestriction><saml:Audience>${escape(o.audience ?? 'cairn-test-sp')}</saml:Audience></saml:AudienceRestriction></saml:Conditions>` +
      `<saml:AuthnStatement AuthnInstant="${now.toISOString()}" SessionIndex="${newId()}"><saml:AuthnContext>` +
      `<saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>` +
      (attributes ? `<saml:AttributeStatement>${attributes}</saml:AttributeStatement>` : '') +
      `</saml:Assertion>`;
    const response =
      `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="${newId()}" Version="2.0" ` +
      `IssueInstant="${now.toISOString()}" Destination="${escape(o.destination ?? o.acsUrl)}"${inResponseTo}>` +
      `<saml:Issuer>${issuer}</saml:Issuer><samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status>` +
      assertion +
      `</samlp:Response>`;
    const signing = o.signing ?? 'assertion';
    return signing === 'none' ? response : signAssertion(response, signing === 'assertion' ? this.keys : this.otherKeys);
  }
}

/** Signs the Response's assertion (enveloped, exclusive c14n, RSA-SHA256), the signature after its Issuer as the schema wants it. */
export function signAssertion(responseXml: string, keys: KeyPair): string {
  const signer = new SignedXml({
    privateKey: keys.key,
    publicCert: keys.cert,
    signatureAlgorithm: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256',
    canonicalizationAlgorithm: 'http://www.w3.org/2001/10/xml-exc-c14n#',
  });
  signer.addReference({
    xpath: "//*[local-name(.)='Assertion']",
    digestAlgorithm: 'http://www.w3.org/2001/04/xmlenc#sha256',
    transforms: ['http://www.w3.org/2000/09/xmldsig#enveloped-signature', 'http://www.w3.org/2001/10/xml-exc-c14n#'],
  });
  signer.computeSignature(responseXml, {
    prefix: 'ds',
    location: { reference: "//*[local-name(.)='Assertion']/*[local-name(.)='Issuer']", action: 'after' },
  });
  return signer.getSignedXml();
}
