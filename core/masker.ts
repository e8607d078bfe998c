/**
 * The secret masker: the one filter run over captured logs, event payloads and approval reasons
 * before Cairn keeps or shows them (spec part A 2.7).
 *
 * It hides two kinds of thing:
 * - the run's known secret values (credential secrets, injected variables), matched literally;
 * - secrets recognisable by shape: private key blocks, cloud and forge tokens, Bearer and Basic
 *   credentials, `password=`-style assignments and credentials inside URLs.
 *
 * Every hit becomes {@link MASK}. Where a secret is assigned to a name (`password=...`,
 * `postgres://app:...@db`) only the value is replaced, so the reader still sees what was hidden.
 *
 * Design choices:
 * - Each rule reports character spans; overlapping and touching spans merge before anything is
 *   replaced, so overlapping secrets are covered whole and neighbouring hits give one marker.
 * - Masking repeats until the text stops changing, four passes at most (a marker can give a token
 *   the word boundary it lacked), so `mask(mask(x)) === mask(x)`.
 * - Every pattern is anchored on a literal or a word start and has no nested ambiguous quantifier,
 *   so a pass is linear in the text length even on hostile input.
 */

/** What a secret is replaced with. Never matched by any rule, which keeps masking idempotent. */
export const MASK = '[masked]';

/** Known secrets shorter than this are ignored, so a value like `ok` or `dev` does not blank prose. */
export const MIN_SECRET_LENGTH = 4;

export interface Masker {
  /** The text with every secret replaced by {@link MASK}; everything else untouched. */
  mask(text: string): string;
  /** Whether {@link mask} would change the text (a reason that does is answered 409). */
  changed(text: string): boolean;
}

/** A half-open `[start, end)` range of the text to hide. */
type Span = [number, number];
type Rule = (text: string, spans: Span[]) => void;

/** Creates a masker for one run, given that run's known secret values. */
export function createMasker(knownSecrets: Iterable<string> = []): Masker {
  const needles = secretNeedles(knownSecrets);
  const rules: Rule[] = [knownSecretRule(needles), ...PATTERN_RULES];

  const mask = (text: string): string => {
    // A few passes at most: each pass only turns secrets into markers, which no rule matches.
    for (let pass = 0; pass < 4; pass++) {
      const spans: Span[] = [];
      for (const rule of rules) rule(text, spans);
      if (spans.length === 0) return text;
      // Markers from an earlier pass join a touching new span, so one secret leaves one marker.
      for (let at = text.indexOf(MASK); at !== -1; at = text.indexOf(MASK, at + MASK.length)) {
        spans.push([at, at + MASK.length]);
      }
      const next = replaceSpans(text, spans);
      if (next === text) return text;
      text = next;
    }
    return text;
  };

  return { mask, changed: (text) => mask(text) !== text };
}

// ---------------------------------------------------------------------------------------------
// Known secrets

/**
 * The literal strings to look for: each secret, plus the forms it takes when a tool prints it
 * trimmed (read from a file), JSON-escaped (inside an event) or percent-encoded (inside a URL).
 */
function secretNeedles(knownSecrets: Iterable<string>): string[] {
  const needles = new Set<string>();
  for (const secret of knownSecrets) {
    if (typeof secret !== 'string') continue;
    for (const form of [secret, secret.trim(), JSON.stringify(secret).slice(1, -1), safeEncode(secret)]) {
      // A secret inside the marker would re-mask every marker.
      if (form.length >= MIN_SECRET_LENGTH && !MASK.includes(form)) needles.add(form);
    }
  }
  return [...needles];
}

function safeEncode(value: string): string {
  try {
    return encodeURIComponent(value);
  } catch {
    return value; // lone surrogate: no encoded form exists to leak
  }
}

/** indexOf, not a RegExp: a secret is a literal value, whatever characters it holds. */
function knownSecretRule(needles: readonly string[]): Rule {
  return (text, spans) => {
    for (const needle of needles) {
      for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + 1)) {
        spans.push([at, at + needle.length]);
      }
    }
  };
}

// ---------------------------------------------------------------------------------------------
// Patterns

/**
 * A RegExp rule. The span hidden is the last capture group that took part in the match (the
 * value), or the whole match when the pattern has no group. `keep` vetoes a match.
 */
function patternRule(source: string, flags = '', keep?: (value: string) => boolean): Rule {
  const re = new RegExp(source, `gd${flags}`);
  return (text, spans) => {
    for (const match of text.matchAll(re)) {
      const span = lastGroupSpan(match);
      if (span && (!keep || keep(text.slice(span[0], span[1])))) spans.push(span);
    }
  };
}

function lastGroupSpan(match: RegExpExecArray | RegExpMatchArray): Span | undefined {
  let group = 0;
  for (let i = match.length - 1; i > 0; i--) {
    if (match[i] !== undefined) {
      group = i;
      break;
    }
  }
  const [start, end] = match.indices![group];
  return end > start ? [start, end] : undefined;
}

/**
 * A `name<separator>value` rule. The name is judged before the value is read: a value is scanned
 * only after a secret name, and scanning resumes right after an innocent one, so
 * `--env=DB_PASSWORD=x` still reaches `DB_PASSWORD` and `a=a=a=...` stays linear.
 */
function assignmentRule(head: string, isSecretName: (name: string) => boolean): Rule {
  const headRe = new RegExp(head, 'g');
  const valueRe = new RegExp(VALUE, 'yd');
  return (text, spans) => {
    headRe.lastIndex = 0;
    for (let name = headRe.exec(text); name; name = headRe.exec(text)) {
      if (!isSecretName(name[1])) continue;
      valueRe.lastIndex = headRe.lastIndex;
      const value = valueRe.exec(text);
      if (!value) continue;
      const span = lastGroupSpan(value);
      if (span && !isPlaceholder(text.slice(span[0], span[1]))) spans.push(span);
      headRe.lastIndex = valueRe.lastIndex;
    }
  };
}

/** A value that stands for a secret without being one: a marker, stars, null or a boolean, a variable or template reference. */
function isPlaceholder(value: string): boolean {
  return (
    value.split(MASK).join('') === '' ||
    /^\*+$/.test(value) ||
    /^(?:null|none|nil|true|false|undefined)$/i.test(value) ||
    /^\$\{?[A-Z_][A-Z0-9_]*\}?$/.test(value) ||
    value.startsWith('{{')
  );
}

/** Key names whose value is a secret when the name ends with them (`_`, `-`, `.` ignored, any case). */
const SECRET_KEY_ENDINGS = [
  'password',
  'passwd',
  'passphrase',
  'secret',
  'secretkey',
  'accesskey', // aws_secret_access_key, SecretAccessKey, Azure SharedAccessKey
  'accountkey', // Azure storage connection strings
  'privatekey',
  'apikey',
  'token',
];
/** Short names that are secrets only as a whole word (`pass` but not `bypass`). */
const SECRET_KEY_WORDS = ['pass', 'pwd', 'auth'];

function isSecretKey(key: string): boolean {
  const lower = key.toLowerCase().replace(/^-+/, '');
  const squashed = lower.replace(/[_.-]/g, '');
  if (SECRET_KEY_ENDINGS.some((ending) => squashed.endsWith(ending))) return true;
  return SECRET_KEY_WORDS.some(
    (word) => lower === word || (lower.endsWith(word) && '_.-'.includes(lower[lower.length - word.length - 1])),
  );
}

/**
 * The value after a separator: double-quoted (JSON escapes allowed), single-quoted, JSON-escaped
 * quotes (JSON inside a JSON string), or bare up to whitespace, a quote or a `,` `;` `&`
 * delimiter (query strings, ADO.NET and libpq connection strings). Only the inside is captured.
 * Empty values do not match.
 */
const VALUE = String.raw`(?:"((?:[^"\\\r\n]|\\.)+)"|'([^'\r\n]+)'|\\"([^"\\\r\n]+)\\"|((?:[^\s"'\x60,;&\\]|\\(?!["']))+))`;

/**
 * A key name starting at a word start; bounded so a long identifier is scanned once. Not after
 * `/`: in `https://x-access-token:...@host` the URL rule owns the user and password.
 */
const KEY = String.raw`(?<![A-Za-z0-9_./-])([A-Za-z0-9_.-]{1,100})`;

const PATTERN_RULES: Rule[] = [
  privateKeyRule,

  // Tokens recognisable by prefix alone.
  patternRule(
    String.raw`(?<![A-Za-z0-9_])(?:` +
      [
        String.raw`(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])`, // AWS access key id (long-term, temporary)
        String.raw`gh[pousr]_[A-Za-z0-9]{36,}`, // GitHub classic and app tokens
        String.raw`github_pat_[A-Za-z0-9_]{22,}`, // GitHub fine-grained tokens
        String.raw`gl(?:pat|ptt|rt|dt)-[A-Za-z0-9_-]{20,}`, // GitLab personal, trigger, runner, deploy tokens
        String.raw`xox[abposr]-[A-Za-z0-9-]{10,}`, // Slack tokens
        String.raw`AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])`, // Google API keys
        String.raw`cairn_[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])`, // Cairn's own bearer secrets
        String.raw`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`, // signed JWTs (OIDC federation)
      ].join('|') +
      ')',
  ),

  // Slack incoming webhooks: the path is the credential.
  patternRule(String.raw`hooks\.slack\.com/services/([A-Za-z0-9/]+)`),

  // Authorization headers: whatever credential follows the scheme, however short.
  patternRule(
    String.raw`(?<![A-Za-z0-9_-])(?:proxy-)?authorization(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?` +
      String.raw`(?:(?:basic|bearer|token|bot)[ \t]+)?(?!(?:basic|bearer|token|bot)(?![A-Za-z0-9._~+/-]))([A-Za-z0-9._~+/-]+=*)`,
    'i',
  ),

  // A Bearer token anywhere (curl lines, client logs); 16 characters keeps prose out.
  patternRule(String.raw`(?<![A-Za-z0-9_-])bearer[ \t]+([A-Za-z0-9._~+/-]{16,}=*)`, 'i'),

  // name=value, name: value, "name": "value", name => 'value' where the name says secret.
  // `name= other` is an empty value: after a bare `=` a space ends it, unless one came before.
  assignmentRule(KEY + String.raw`(?:\\?["'])?(?:[ \t]*(?::=|=>|:)[ \t]*|=|[ \t]+=[ \t]*)`, isSecretKey),

  // --password value on a command line.
  assignmentRule(
    String.raw`(?<![A-Za-z0-9_-])--([A-Za-z0-9_.-]{1,100})[ \t]+(?!-)`,
    (name) => !name.toLowerCase().startsWith('no-') && isSecretKey(name),
  ),

  // scheme://user:password@host: the password up to the last @ of the authority.
  patternRule(
    String.raw`(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s:/?#@\[\]"'<>\x60]*:([^\s/?#"'<>\x60]+)@`,
    '',
    (password) => !isPlaceholder(password),
  ),
];

/** Private key PEM blocks; the END line is at most this far from the BEGIN line. */
const MAX_PEM_BLOCK = 64 * 1024;
const PEM_BEGIN = /-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----/g;
const PEM_END = /-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----/g;
/** Without an END line (a truncated log), the header lines and base64 body that follow the BEGIN line. */
const PEM_BODY = /(?:(?:\r?\n|\\n)(?:[A-Za-z0-9+/=]{1,100}|(?:Proc-Type|DEK-Info|Comment|Version|Hash):[^\r\n\\]*))*/y;

/**
 * Masks a private key (RSA, EC, DSA, OPENSSH, ENCRYPTED, PKCS#8, PGP) from its BEGIN line through
 * its END line. Public keys and certificates are public material and stay. Written as a scan, not
 * one lazy RegExp, so many BEGIN lines without an END cost one search, not one each.
 */
function privateKeyRule(text: string, spans: Span[]): void {
  let endSearchedFrom = -1;
  let endAt = -1; // start of the first END at or after endSearchedFrom, -1 when there is none
  let endLength = 0;
  for (const begin of text.matchAll(PEM_BEGIN)) {
    const start = begin.index!;
    const afterBegin = start + begin[0].length;
    if (endSearchedFrom === -1 || afterBegin < endSearchedFrom || (endAt !== -1 && afterBegin > endAt)) {
      PEM_END.lastIndex = afterBegin;
      const end = PEM_END.exec(text);
      endSearchedFrom = afterBegin;
      endAt = end ? end.index : -1;
      endLength = end ? end[0].length : 0;
    }
    if (endAt !== -1 && endAt - start <= MAX_PEM_BLOCK) {
      spans.push([start, endAt + endLength]);
    } else {
      PEM_BODY.lastIndex = afterBegin;
      const body = PEM_BODY.exec(text);
      spans.push([start, afterBegin + (body ? body[0].length : 0)]);
    }
  }
}

// ---------------------------------------------------------------------------------------------

/** Replaces the union of the spans with one marker per contiguous run. */
function replaceSpans(text: string, spans: Span[]): string {
  spans.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  const parts: string[] = [];
  let copied = 0;
  let runStart = spans[0][0];
  let runEnd = spans[0][1];
  for (const [start, end] of spans) {
    if (start <= runEnd) {
      runEnd = Math.max(runEnd, end);
      continue;
    }
    parts.push(text.slice(copied, runStart), MASK);
    copied = runEnd;
    runStart = start;
    runEnd = end;
  }
  parts.push(text.slice(copied, runStart), MASK, text.slice(runEnd));
  return parts.join('');
}
