import { CanonicalText, canonicalJson } from './canonical';
import type { AuditEntry, UnhashedAuditEntry } from './audit-chain';

/**
 * The audit bundle's two formats (docs/api.md, GET /v1/audit/bundle).
 *
 * Version 1 is one compact JWS whose payload holds everything, the entries included: signing and
 * verifying it reads the whole chain's text through base64url, SHA-512 twice (Ed25519) and RFC
 * 8785 canonicalization, several times the cost of hashing the entries.
 *
 * Version 2 signs only what the entries are bound by: the tree head (size, head hash, Merkle
 * root), the window, the anchors, the last entry's inclusion proof and the list of the entries'
 * hashes (`entry_hashes`). The entries travel beside the signature in a JSON document
 * `{"entries": [...], "signed": "<compact JWS>", "type": "cairn.audit.bundle", "version": 2}`,
 * each exactly the fields its hash covers (no `hash` member: its hash is the signed one at its
 * place), so the server writes each entry as the very text it stored and verified, and a
 * verifier hashes each as carried (recomputing only one whose text does not hash to the signed
 * hash, to name what it recomputes to). Changing one is as visible as in version 1, and
 * the signature costs the same whatever the entries weigh.
 */

export const BUNDLE_TYPE = 'cairn.audit.bundle';
/** The bundle versions Cairn makes and verifies; a version 1 payload has no `version` member. */
export const BUNDLE_VERSIONS = [1, 2] as const;
export type BundleVersion = (typeof BUNDLE_VERSIONS)[number];
/** What `GET /v1/audit/bundle` answers when no version is asked for. */
export const DEFAULT_BUNDLE_VERSION: BundleVersion = 2;

/** The tree head and window a bundle of either version signs. */
export interface BundleHead {
  install_id: string;
  key_id: string;
  issued_at: string;
  size: number;
  head_hash: string;
  merkle_root: string;
  /** The stored anchors' compact JWS, as signed. */
  anchors: string[];
  window: { after: number; prev_hash: string };
  last_inclusion: string[];
}

/** An entry as a bundle carries it: its fields and hash, or its stored canonical text with the hash spliced in. */
export type BundleEntry = AuditEntry | CanonicalText;

/**
 * The payload to sign. Version 1 holds the entries (each with its hash); version 2 holds their
 * hashes, in window order, and says its version so its signed part can never pass for a version 1
 * bundle without entries.
 */
export function bundlePayloadV1(head: BundleHead, entries: readonly BundleEntry[]): Record<string, unknown> {
  return { type: BUNDLE_TYPE, ...head, entries };
}

export function bundlePayloadV2(head: BundleHead, hashes: readonly string[]): Record<string, unknown> {
  return { type: BUNDLE_TYPE, ...head, version: 2, entry_hashes: hashes };
}

/**
 * An entry as a version 2 document carries it: the text its hash covers, as the store keeps it
 * (schema/021) and the chain's verification just hashed; a row stored without that text (before
 * schema/017), its hashed fields. Precondition: the row is one a verification found intact.
 */
export function bundleEntryV2(row: { canonical?: string | null } & Partial<UnhashedAuditEntry>): CanonicalText | UnhashedAuditEntry {
  if (typeof row.canonical === 'string') return new CanonicalText(row.canonical);
  const { seq, id, at, actor, method, path, fingerprint, outcome, body, prev_hash } = row as UnhashedAuditEntry;
  return { seq, id, at, actor, method, path, fingerprint, outcome, body, prev_hash };
}

/** The version 2 document around its signed part, in RFC 8785 canonical JSON. */
export function bundleDocumentV2(signed: string, entries: readonly (CanonicalText | UnhashedAuditEntry)[]): string {
  return canonicalJson({ type: BUNDLE_TYPE, version: 2, signed, entries });
}

/** What a version 2 document holds, read without trusting any of it. */
export interface BundleDocumentV2 {
  signed: unknown;
  entries: unknown;
  version: unknown;
  type: unknown;
  /**
   * Each element of `entries` as the document's own text, when the document is laid out as Cairn
   * writes it (canonical JSON, so it opens with that list); undefined otherwise. An element whose
   * text hashes to its signed hash is that very entry text, which a verifier need not recompute.
   */
  entryTexts: string[] | undefined;
}

/** The version 2 document in `text`, or undefined when the text is not a JSON object (a version 1 JWS, or damage). */
export function readBundleDocument(text: string): BundleDocumentV2 | undefined {
  if (!text.startsWith('{')) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const { signed, entries, version, type } = parsed as Record<string, unknown>;
  return { signed, entries, version, type, entryTexts: entryTextsOf(text) };
}

const ENTRIES_OPEN = '{"entries":[';

/**
 * The text of each element of the list `text` opens with, split at its top-level commas. Only
 * strings and nesting are followed (JSON.parse has already found the text to be JSON), a string
 * skipped to its closing quote at once.
 */
function entryTextsOf(text: string): string[] | undefined {
  if (!text.startsWith(ENTRIES_OPEN)) return undefined;
  const texts: string[] = [];
  let start = ENTRIES_OPEN.length;
  let depth = 0;
  for (let i = start; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      i = closingQuote(text, i);
      if (i < 0) return undefined;
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
    } else if (c === 0x7d || c === 0x5d) {
      if (depth-- > 0) continue;
      if (i > start) texts.push(text.slice(start, i));
      return texts;
    } else if (c === 0x2c && depth === 0) {
      texts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  return undefined;
}

/** Where the string opened by the quote at `open` ends: the next quote not escaped, or -1. */
function closingQuote(text: string, open: number): number {
  for (let quote = text.indexOf('"', open + 1); quote !== -1; quote = text.indexOf('"', quote + 1)) {
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === 0x5c) backslashes++;
    if (backslashes % 2 === 0) return quote;
  }
  return -1;
}
