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
 * - Output that is still arriving (a run's log) is masked by a stream (core/stream-masker.ts) that
 *   asks the masker what it may pass on: each rule also says where a match that more text could
 *   still complete begins ({@link Unfinished}), so the rules and that knowledge never drift apart.
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
  /**
   * For text that more output may follow: the matches at its end that what follows could still
   * complete or extend, earliest first. Empty when nothing at the end can still become a secret.
   */
  unfinished(text: string): Unfinished[];
  /**
   * How much of `text`, the part of a stream not passed on yet, can be masked and passed on now
   * and then forgotten: the longest prefix that ends at a line end (`line`) or after any
   * whitespace (`word`), splits no match and ends before anything {@link unfinished}. Masking it
   * on its own hides what masking it together with whatever follows would.
   */
  settled(text: string, at: 'line' | 'word'): number;
  /**
   * How much of `text` can be passed on now if it is also kept and masked again in front of what
   * follows: up to where an unfinished match's hidden part begins, so `Password: ` shows while
   * the answer that may follow still meets its name.
   */
  showable(text: string): number;
  /**
   * Where to cut `text` near `target` when it must be cut whatever follows (a word longer than
   * any bound): at or before the target, after a delimiter if one is near, outside every match.
   */
  forcedCut(text: string, target: number): number;
  /** The longest secret of bounded length: the known values and the fixed-length token shapes. */
  readonly longestSecret: number;
}

/**
 * A match that more text could still complete, at the end of a text.
 * - `key`: a private key block whose END line has not come; `bodyStart` is where its BEGIN line ends.
 * - `value`: a secret's name, shape or prefix whose value is still arriving; it runs to the next
 *   whitespace or to the end of its line (`until`).
 * - `word`: the text ends inside a word, which more characters could still turn into a token.
 */
export type Unfinished =
  | { kind: 'key'; start: number; hiddenFrom: number; bodyStart: number }
  | { kind: 'value'; start: number; hiddenFrom: number; until: 'space' | 'line' }
  | { kind: 'word'; start: number; hiddenFrom: number };
// `start`: where the match begins, so what follows must be masked together with the text from
// here. `hiddenFrom`: where its hidden part begins (or would), so text before it may be shown.

/** A half-open `[start, end)` range of the text. */
type Span = [number, number];

/**
 * One way a secret shows. `find` adds the spans to hide and, when asked, each whole match (name,
 * separator and value), so a stream is never cut inside one. `unfinished` reports a match at the
 * very end of the text that more text could still complete, searching from `lineStart` (the
 * last line) unless the rule's matches can run across lines.
 */
interface Rule {
  find(text: string, spans: Span[], matches?: Span[]): void;
  unfinished?(text: string, lineStart: number): Unfinished | undefined;
}

/** Creates a masker for one run, given that run's known secret values. */
export function createMasker(knownSecrets: Iterable<string> = [], options: { prefilter?: boolean } = {}): Masker {
  const needles = secretNeedles(knownSecrets);
  // `prefilter: false` (tests only) runs every rule's RegExp over every text: the reference.
  const rules: Rule[] = [knownSecretRule(needles), ...(options.prefilter === false ? REFERENCE_RULES : PATTERN_RULES)];
  // The rules whose matches can run across a line break: only these can split at a line end, or
  // have anything unfinished before the last line.
  const lineRules: Rule[] = [knownSecretRule(needles.filter((needle) => /[\r\n]/.test(needle))), privateKeyRule];

  const mask = (text: string): string => {
    // A few passes at most: each pass only turns secrets into markers, which no rule matches.
    for (let pass = 0; pass < 4; pass++) {
      const spans: Span[] = [];
      for (const rule of rules) rule.find(text, spans);
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

  return {
    mask,
    changed: (text) => mask(text) !== text,
    unfinished: (text) => unfinishedAt(text, rules),
    settled(text, at) {
      let cut = at === 'line' ? lineCut(text, text.length) : wordCut(text, text.length);
      if (cut === 0) return 0;
      const consulted = at === 'line' ? lineRules : rules;
      const first = unfinishedAt(text, consulted, at === 'word')[0];
      const back = (to: number) => (at === 'line' ? lineCut(text, to) : wordCut(text, to));
      if (first && first.start < cut) cut = back(first.start);
      return cut === 0 ? 0 : moveBefore(findAll(text, consulted).matches, cut, back);
    },
    showable(text) {
      const shown = Math.min(text.length, ...unfinishedAt(text, rules).map((open) => open.hiddenFrom));
      return shown === 0 ? 0 : moveBefore(findAll(text, rules).spans, shown, (to) => to);
    },
    forcedCut(text, target) {
      let cut = target;
      for (let at = target; at > Math.max(0, target - 256); at--) {
        if (!WORD_CHARACTER.test(text[at - 1]) && !splitsPair(text, at)) {
          cut = at;
          break;
        }
      }
      const { matches } = findAll(text, rules);
      const before = moveBefore(matches, cut, (to) => (splitsPair(text, to) ? to - 1 : to));
      if (before > 0) return splitsPair(text, before) ? before - 1 : before;
      // One match covers everything up to the cut: cut after it instead.
      for (let moved = true; moved; ) {
        moved = false;
        for (const [start, end] of matches) {
          if (start < cut && cut < end) {
            cut = end;
            moved = true;
          }
        }
      }
      return splitsPair(text, cut) ? cut + 1 : cut;
    },
    longestSecret: Math.max(LONGEST_FIXED_TOKEN, ...needles.map((needle) => needle.length)),
  };
}

/**
 * Characters that can sit inside a key name, a token, a URL scheme or a credential: a forced cut
 * right after one could start a name or token that was not there before.
 */
const WORD_CHARACTER = /[A-Za-z0-9_.\/+=%\\-]/;

/** Whether a cut at `at` would part the two halves of a character outside the BMP. */
function splitsPair(text: string, at: number): boolean {
  const high = text.charCodeAt(at - 1);
  const low = text.charCodeAt(at);
  return high >= 0xd800 && high <= 0xdbff && low >= 0xdc00 && low <= 0xdfff;
}

const KIND_ORDER = { key: 0, value: 1, word: 2 };

/** The unfinished matches at the end of the text, earliest first; a key before a value before a word. */
function unfinishedAt(text: string, rules: readonly Rule[], words = true): Unfinished[] {
  const lineStart = text.lastIndexOf('\n') + 1;
  const found: Unfinished[] = [];
  for (const rule of rules) {
    const open = rule.unfinished?.(text, lineStart);
    if (open) found.push(open);
  }
  // Any rule's match may still grow while the text ends inside a word.
  if (words) {
    const start = wordCut(text, text.length);
    if (start < text.length) found.push({ kind: 'word', start, hiddenFrom: start });
  }
  return found.sort((a, b) => a.start - b.start || KIND_ORDER[a.kind] - KIND_ORDER[b.kind]);
}

/** The start of the text or the position after a line break, at or before `to`. */
function lineCut(text: string, to: number): number {
  return to === 0 ? 0 : text.lastIndexOf('\n', to - 1) + 1;
}

/** The start of the text or the position after a whitespace character, at or before `to`. */
function wordCut(text: string, to: number): number {
  for (let at = to; at > 0; at--) {
    const code = text.charCodeAt(at - 1);
    if (code === 32 || (code >= 9 && code <= 13) || (code > 127 && /\s/.test(text[at - 1]))) return at;
  }
  return 0;
}

/** Every rule's hidden spans and whole matches in the text. */
function findAll(text: string, rules: readonly Rule[]): { spans: Span[]; matches: Span[] } {
  const spans: Span[] = [];
  const matches: Span[] = [];
  for (const rule of rules) rule.find(text, spans, matches);
  return { spans, matches };
}

/**
 * Moves `cut` back until none of the ranges straddles it; `back` picks an allowed cut at or
 * before a position (a line start, a word start, any position).
 */
function moveBefore(ranges: Span[], cut: number, back: (to: number) => number): number {
  // Latest start first: once the cut is before a range's start, no range passed over can straddle it.
  for (const [start, end] of [...ranges].sort((x, y) => y[0] - x[0])) {
    if (start < cut && cut < end) cut = back(start);
  }
  return cut;
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

/**
 * indexOf, not a RegExp: a secret is a literal value, whatever characters it holds. Unfinished:
 * the longest end of the text that begins a secret, found with each secret's KMP prefix table so
 * the check costs the secret's length, not its square.
 */
function knownSecretRule(needles: readonly string[]): Rule {
  const tables = needles.map(prefixTable);
  return {
    find(text, spans, matches) {
      for (const needle of needles) {
        for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + 1)) {
          spans.push([at, at + needle.length]);
          matches?.push([at, at + needle.length]);
        }
      }
    },
    unfinished(text) {
      let start = text.length;
      needles.forEach((needle, i) => {
        // Only the last needle.length - 1 characters can begin an unfinished occurrence.
        let matched = 0;
        for (let at = Math.max(0, text.length - needle.length + 1); at < text.length; at++) {
          while (matched > 0 && text[at] !== needle[matched]) matched = tables[i][matched - 1];
          if (text[at] === needle[matched]) matched++;
        }
        start = Math.min(start, text.length - matched);
      });
      return start < text.length ? { kind: 'value', start, hiddenFrom: start, until: 'line' } : undefined;
    },
  };
}

/** For each prefix of the needle, the length of its longest proper prefix that is also its suffix. */
function prefixTable(needle: string): number[] {
  const table = [0];
  for (let at = 1, length = 0; at < needle.length; at++) {
    while (length > 0 && needle[at] !== needle[length]) length = table[length - 1];
    if (needle[at] === needle[length]) length++;
    table.push(length);
  }
  return table;
}

// ---------------------------------------------------------------------------------------------
// Patterns

/**
 * A RegExp rule. The span hidden is the last capture group that took part in the match (the
 * value), or the whole match when the pattern has no group. `keep` vetoes a match.
 * `unfinished` is the same pattern cut short, matched against the end of the text: a match still
 * arriving, whose one group is its value so far (absent: the value has not begun); `until` says
 * what ends such a value.
 */
function patternRule(
  source: string,
  options: { flags?: string; keep?: (value: string) => boolean; unfinished?: string; until?: 'space' | 'line'; trigger?: string } = {},
): Rule {
  const { flags = '', keep, unfinished, until = 'line', trigger } = options;
  const re = new RegExp(source, `gd${flags}`);
  const openRe = unfinished === undefined ? undefined : new RegExp(`${unfinished}$`, `gd${flags}`);
  return {
    find(text, spans, matches) {
      // Every match holds the trigger: a text without it is not scanned (one indexOf, not a RegExp pass).
      if (trigger !== undefined && !text.includes(trigger)) return;
      for (const match of text.matchAll(re)) {
        const span = lastGroupSpan(match);
        if (span && (!keep || keep(text.slice(span[0], span[1])))) {
          spans.push(span);
          matches?.push([match.index!, match.index! + match[0].length]);
        }
      }
    },
    unfinished:
      openRe &&
      ((text, lineStart) => {
        openRe.lastIndex = lineStart;
        const open = openRe.exec(text);
        return open ? { kind: 'value', start: open.index, hiddenFrom: valueStart(open, text.length), until } : undefined;
      }),
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

/** Where the first group that took part (the value so far, maybe empty) begins; `absent` when none did. */
function valueStart(match: RegExpExecArray, absent: number): number {
  for (let i = 1; i < match.length; i++) if (match[i] !== undefined) return match.indices![i][0];
  return absent;
}

/**
 * A `name<separator>value` rule. The name is judged before the value is read: a value is scanned
 * only after a secret name, and scanning resumes right after an innocent one, so
 * `--env=DB_PASSWORD=x` still reaches `DB_PASSWORD` and `a=a=a=...` stays linear.
 * Unfinished: a secret name whose value runs to the end of the text ({@link OPEN_VALUE}), or
 * (`partialHead`) a secret name whose separator has not come yet.
 */
function assignmentRule(
  head: string,
  isSecretName: (name: string) => boolean,
  partialHead?: string,
  headStart?: (text: string, separator: number) => number,
): Rule {
  const headRe = new RegExp(head, 'g');
  const stickyHeadRe = new RegExp(head, 'y');
  const valueRe = new RegExp(VALUE, 'yd');
  const openValueRe = new RegExp(OPEN_VALUE, 'yd');
  const partialRe = partialHead === undefined ? undefined : new RegExp(`${partialHead}$`, 'g');
  /**
   * The first head match at or after `from`, as `headRe.exec` would find it. With `headStart`,
   * found from the separators instead of by trying the RegExp at every position: every head
   * holds a separator character, and `headStart` gives the one position a head whose first
   * separator character is there could begin at (-1: none), where the RegExp is tried once.
   */
  const nextHead = (text: string, from: number): { name: string; index: number; end: number } | undefined => {
    if (!headStart) {
      headRe.lastIndex = from;
      const name = headRe.exec(text);
      return name ? { name: name[1], index: name.index, end: headRe.lastIndex } : undefined;
    }
    SEPARATOR_CHARACTER.lastIndex = from;
    for (let separator = SEPARATOR_CHARACTER.exec(text); separator; separator = SEPARATOR_CHARACTER.exec(text)) {
      const start = headStart(text, separator.index);
      if (start < from) continue;
      stickyHeadRe.lastIndex = start;
      const name = stickyHeadRe.exec(text);
      if (name) return { name: name[1], index: start, end: stickyHeadRe.lastIndex };
    }
    return undefined;
  };
  return {
    find(text, spans, matches) {
      for (let name = nextHead(text, 0); name; ) {
        let resume = name.end;
        if (isSecretName(name.name)) {
          valueRe.lastIndex = name.end;
          const value = valueRe.exec(text);
          if (value) {
            const span = lastGroupSpan(value);
            if (span && !isPlaceholder(text.slice(span[0], span[1])) && !isWorkingDirectory(name.name, text.slice(span[0], span[1]))) {
              spans.push(span);
              matches?.push([name.index, valueRe.lastIndex]);
            }
            resume = valueRe.lastIndex;
          }
        }
        name = nextHead(text, resume);
      }
    },
    unfinished(text, lineStart) {
      headRe.lastIndex = lineStart;
      for (let name = headRe.exec(text); name; name = headRe.exec(text)) {
        if (!isSecretName(name[1])) continue;
        openValueRe.lastIndex = headRe.lastIndex;
        const open = openValueRe.exec(text);
        // A bare value ends at whitespace; a quoted one, or one not begun, at the end of its line.
        if (open) return { kind: 'value', start: name.index, hiddenFrom: valueStart(open, text.length), until: open[4] ? 'space' : 'line' };
      }
      if (!partialRe) return undefined;
      partialRe.lastIndex = lineStart;
      const name = partialRe.exec(text);
      return name && isSecretName(name[1]) ? { kind: 'value', start: name.index, hiddenFrom: text.length, until: 'line' } : undefined;
    },
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

/**
 * The shell's `PWD` holds the working directory, an absolute path, where an ODBC connection
 * string's `PWD` holds a password: the name stays a secret one, and only a value beginning with `/`
 * under exactly that name is let through. (`OLDPWD` is not a secret name at all.)
 */
function isWorkingDirectory(key: string, value: string): boolean {
  return key.toLowerCase() === 'pwd' && value.startsWith('/');
}

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
 * {@link VALUE} still arriving, up to the end of the text: a quote not closed yet, or a bare
 * value (maybe empty) that more characters would extend; an escape may be half written.
 */
const OPEN_VALUE = String.raw`(?:"((?:[^"\\\r\n]|\\.)*\\?)|'([^'\r\n]*)|\\"([^"\\\r\n]*\\?)|((?:[^\s"'\x60,;&\\]|\\(?!["']))*\\?))$`;

/**
 * A key name starting at a word start; bounded so a long identifier is scanned once. Not after
 * `/`: in `https://x-access-token:...@host` the URL rule owns the user and password.
 */
const KEY = String.raw`(?<![A-Za-z0-9_./-])([A-Za-z0-9_.-]{1,100})`;

/** The characters one of which every `name<separator>` head holds (`:`, `:=`, `=`, `=>`). */
const SEPARATOR_CHARACTER = /[:=]/g;

/** Whether the character code is one {@link KEY}'s name may hold: `A-Za-z0-9_.-`. */
function isKeyCode(code: number): boolean {
  return (
    (code >= 97 && code <= 122) || (code >= 65 && code <= 90) || (code >= 48 && code <= 57) || code === 95 || code === 46 || code === 45
  );
}

/**
 * For a `KEY (\\?["'])? [ \t]* separator` head whose first separator character is at
 * `separator`: where it must begin. Only blanks stand between the quote (if any) and that
 * character, the name is a whole run of name characters (the lookbehind forbids one before it),
 * so the start is found walking back; -1 when no name is there. Each character is walked over
 * for one separator at most (a walk stops at the previous separator character), so finding every
 * head stays linear.
 */
function assignmentHeadStart(text: string, separator: number): number {
  let at = separator;
  while (at > 0 && (text.charCodeAt(at - 1) === 32 || text.charCodeAt(at - 1) === 9)) at--;
  const quote = text.charCodeAt(at - 1);
  if (at > 0 && (quote === 34 || quote === 39)) {
    at--;
    if (at > 0 && text.charCodeAt(at - 1) === 92) at--;
  }
  const nameEnd = at;
  while (at > 0 && isKeyCode(text.charCodeAt(at - 1))) at--;
  return at < nameEnd ? at : -1;
}

/** Private key PEM blocks; the END line is at most this far from the BEGIN line. */
const MAX_PEM_BLOCK = 64 * 1024;
const PEM_BEGIN = /-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----/g;
const PEM_END = /-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----/g;
/** A BEGIN line still arriving at the end of the text (other BEGIN lines look alike until they end). */
const PEM_BEGIN_ARRIVING = /-----BEGIN(?: [A-Z0-9]*){0,6}-{0,5}$/g;
/** Without an END line (a truncated log), the header lines and base64 body that follow the BEGIN line. */
const PEM_BODY = /(?:(?:\r?\n|\\n)(?:[A-Za-z0-9+/=]{1,100}|(?:Proc-Type|DEK-Info|Comment|Version|Hash):[^\r\n\\]*))*/y;

/**
 * Masks a private key (RSA, EC, DSA, OPENSSH, ENCRYPTED, PKCS#8, PGP) from its BEGIN line through
 * its END line. Public keys and certificates are public material and stay. Written as a scan, not
 * one lazy RegExp, so many BEGIN lines without an END cost one search, not one each.
 * Unfinished: a BEGIN line with no END line after it, or a BEGIN line still arriving.
 */
const privateKeyRule: Rule = {
  find(text, spans, matches) {
    let endSearchedFrom = -1;
    let endAt = -1; // start of the first END at or after endSearchedFrom, -1 when there is none
    let endLength = 0;
    PEM_BEGIN.lastIndex = 0;
    for (let begin = PEM_BEGIN.exec(text); begin; begin = PEM_BEGIN.exec(text)) {
      const start = begin.index;
      const afterBegin = start + begin[0].length;
      if (endSearchedFrom === -1 || afterBegin < endSearchedFrom || (endAt !== -1 && afterBegin > endAt)) {
        PEM_END.lastIndex = afterBegin;
        const end = PEM_END.exec(text);
        endSearchedFrom = afterBegin;
        endAt = end ? end.index : -1;
        endLength = end ? end[0].length : 0;
      }
      const span: Span =
        endAt !== -1 && endAt - start <= MAX_PEM_BLOCK ? [start, endAt + endLength] : [start, afterBegin + bodyLength(text, afterBegin)];
      spans.push(span);
      matches?.push(span);
    }
  },
  unfinished(text, lineStart) {
    let afterLastEnd = 0;
    PEM_END.lastIndex = 0;
    while (PEM_END.exec(text)) afterLastEnd = PEM_END.lastIndex;
    PEM_BEGIN.lastIndex = afterLastEnd;
    const begin = PEM_BEGIN.exec(text);
    if (begin) return { kind: 'key', start: begin.index, hiddenFrom: begin.index, bodyStart: begin.index + begin[0].length };
    PEM_BEGIN_ARRIVING.lastIndex = Math.max(lineStart, afterLastEnd);
    const arriving = PEM_BEGIN_ARRIVING.exec(text);
    return arriving ? { kind: 'value', start: arriving.index, hiddenFrom: arriving.index, until: 'line' } : undefined;
  },
};

function bodyLength(text: string, from: number): number {
  PEM_BODY.lastIndex = from;
  const body = PEM_BODY.exec(text);
  return body ? body[0].length : 0;
}

/**
 * A line that may belong to a key's body: base64 (with whatever indents or marks it, as in a diff,
 * a quote or a YAML block) or an armor header. Lenient on purpose: over-masking a truncated key's
 * neighbour beats passing on part of a key.
 */
const KEY_LINE = /^[ \t]*(?:(?:Proc-Type|DEK-Info|Comment|Version|Hash):[^\r\n\\]*|[A-Za-z0-9+/=_> \t-]*)(?:\r|\\r)?$/;
/** The same, for a line still arriving: it may yet be the END line, or stop halfway through an escaped `\n`. */
const KEY_LINE_SO_FAR = /^[ \t]*(?:(?:Proc-Type|DEK-Info|Comment|Version|Hash):[^\r\n\\]*|[A-Za-z0-9+/=_> \t-]*)(?:\r|\\r?)?$/;
const BLANK_LINE = /^[ \t]*(?:\r|\\r)?$/;
/** Lines of a key end at a newline, or at an escaped one inside a JSON string. */
const KEY_LINE_BREAK = /\n|\\n/g;

/**
 * For a stream that has masked a private key's BEGIN line but not seen its END line: how much of
 * `text`, which follows, still belongs to the key. The key runs through its END line, or up to a
 * line that cannot be key material; blank lines count only when key lines follow them, as they do
 * for {@link PEM_BODY}. `over` says the key has ended; otherwise the rest may still be part of it
 * and waits for more text, unless this is the `final` text. The lines before `from` (the
 * `resume` of the previous call, less what it took) are known blank and are not read again.
 */
export function privateKeyBody(text: string, final: boolean, from = 0): { length: number; over: boolean; resume: number } {
  PEM_END.lastIndex = from;
  const end = PEM_END.exec(text);
  let length = 0;
  for (let at = from; ; ) {
    KEY_LINE_BREAK.lastIndex = at;
    const lineBreak = KEY_LINE_BREAK.exec(text);
    const lineEnd = lineBreak ? lineBreak.index : text.length;
    if (end && end.index < lineEnd) return { length: end.index + end[0].length, over: true, resume: 0 };
    const line = text.slice(at, lineEnd);
    if (!lineBreak) {
      if (final) return { length: !BLANK_LINE.test(line) && KEY_LINE.test(line) ? text.length : length, over: true, resume: 0 };
      return { length, over: !KEY_LINE_SO_FAR.test(line), resume: at };
    }
    if (!BLANK_LINE.test(line)) {
      if (!KEY_LINE.test(line)) return { length, over: true, resume: 0 };
      length = lineEnd;
    }
    at = lineEnd + lineBreak[0].length;
  }
}

/** The longest token shape of fixed length (a Cairn bearer secret): a stream cutting a long word keeps at least this much back. */
const LONGEST_FIXED_TOKEN = 'cairn_'.length + 43;

/**
 * The pattern rules. `prefilter` (always, but in tests) lets a rule skip what cannot hold a match
 * of it: a text without its trigger, positions a head cannot start at. Without it every rule's
 * RegExp runs over every text, the reference the prefilters are tested against.
 */
const patternRules = (prefilter: boolean): Rule[] => [
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
        String.raw`cairn_[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])`, // Cairn's own bearer secrets (LONGEST_FIXED_TOKEN)
        String.raw`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`, // signed JWTs (OIDC federation)
      ].join('|') +
      ')',
  ),

  // (Tokens, webhook paths and URL credentials hold no whitespace: while one is arriving the text
  // ends inside a word, which is unfinished already.)

  // Slack incoming webhooks: the path is the credential.
  patternRule(String.raw`hooks\.slack\.com/services/([A-Za-z0-9/]+)`),

  // Authorization headers: whatever credential follows the scheme, however short.
  patternRule(
    String.raw`(?<![A-Za-z0-9_-])(?:proxy-)?authorization(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?` +
      String.raw`(?:(?:basic|bearer|token|bot)[ \t]+)?(?!(?:basic|bearer|token|bot)(?![A-Za-z0-9._~+/-]))([A-Za-z0-9._~+/-]+=*)`,
    {
      flags: 'i',
      // The header's name, separator, scheme and credential so far (a scheme word may yet be a credential).
      unfinished:
        String.raw`(?<![A-Za-z0-9_-])(?:proxy-)?authorization(?:\\?["'])?[ \t]*` +
        String.raw`(?:[:=][ \t]*\\?["']?(?:[A-Za-z0-9._~+/-]+[ \t]+)?([A-Za-z0-9._~+/=-]*\\?))?`,
    },
  ),

  // A Bearer token anywhere (curl lines, client logs); 16 characters keeps prose out.
  patternRule(String.raw`(?<![A-Za-z0-9_-])bearer[ \t]+([A-Za-z0-9._~+/-]{16,}=*)`, {
    flags: 'i',
    unfinished: String.raw`(?<![A-Za-z0-9_-])bearer[ \t]+([A-Za-z0-9._~+/-]*=*)`,
  }),

  // name=value, name: value, "name": "value", name => 'value' where the name says secret.
  // `name= other` is an empty value: after a bare `=` a space ends it, unless one came before.
  assignmentRule(
    KEY + String.raw`(?:\\?["'])?(?:[ \t]*(?::=|=>|:)[ \t]*|=|[ \t]+=[ \t]*)`,
    isSecretKey,
    KEY + String.raw`(?:\\?["'])?[ \t]+`, // `password ` before its `=` or `:`
    prefilter ? assignmentHeadStart : undefined,
  ),

  // --password value on a command line.
  assignmentRule(
    String.raw`(?<![A-Za-z0-9_-])--([A-Za-z0-9_.-]{1,100})[ \t]+(?!-)`,
    (name) => !name.toLowerCase().startsWith('no-') && isSecretKey(name),
  ),

  // scheme://user:password@host: the password up to the last @ of the authority.
  patternRule(
    String.raw`(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s:/?#@\[\]"'<>\x60]*:([^\s/?#"'<>\x60]+)@`,
    {
      keep: (password) => !isPlaceholder(password),
      trigger: prefilter ? '://' : undefined,
      // Until a later @ the password may still be growing.
      unfinished: String.raw`(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s:/?#@\[\]"'<>\x60]*:([^\s/?#"'<>\x60]*)`,
      until: 'space',
    },
  ),
];
const PATTERN_RULES = patternRules(true);
const REFERENCE_RULES = patternRules(false);

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
