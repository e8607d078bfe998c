import { lazy } from '../lazy';
import { sha256Hex } from '../sha256';

/**
 * A username as Cairn compares it: two names belong to one account when their folded forms are
 * equal. The steps, each for a reason:
 * - NFKC: a composed and a decomposed `é`, full-width letters and ligatures become one spelling;
 * - default-ignorable code points dropped: a variation selector or joiner is invisible;
 * - upper case, then lower case: a full case mapping, so `ß` and `SS`, a final `ς` and `σ`, `ſ` and
 *   `s` fold together where a plain toLowerCase keeps them apart (toUpperCase and toLowerCase are
 *   locale-independent, so every server folds alike);
 * - NFKC again, since a case mapping can leave a sequence that composes differently.
 * This is close to Unicode's NFKC_Casefold and errs toward merging (a dotless `ı` folds with `i`).
 * Letters of different scripts that only look alike (Latin `a`, Cyrillic `а`) stay distinct here;
 * `mixedScripts` keeps a new name from mixing them.
 */
export function foldUsername(username: string): string {
  const compatible = username.normalize('NFKC').replace(/\p{Default_Ignorable_Code_Point}/gu, '');
  return compatible.toUpperCase().toLowerCase().normalize('NFKC');
}

/**
 * The key a username is unique and looked up by: hex SHA-256 of its folded form. Hashed so that an
 * index entry stays small however far a name expands under NFKC (one character can become 18),
 * and so that counters keyed by it (failed sign-ins) hold no typed name.
 */
export function usernameKey(username: string): string {
  return sha256Hex(foldUsername(username));
}

/**
 * Unicode's scripts by their ISO 15924 codes (the Script property's short values, Unicode 17).
 * A code the running Node does not know is skipped: its letters are unassigned there, and a
 * username refuses unassigned code points anyway.
 */
const SCRIPT_CODES = (
  'Adlm Aghb Ahom Arab Armi Armn Avst Bali Bamu Bass Batk Beng Bhks Bopo Brah Brai Bugi Buhd Cakm Cans Cari Cham Cher Chrs ' +
  'Copt Cpmn Cprt Cyrl Deva Diak Dogr Dsrt Dupl Egyp Elba Elym Ethi Gara Geor Glag Gong Gonm Goth Gran Grek Gujr Gukh Guru ' +
  'Hang Hani Hano Hatr Hebr Hira Hluw Hmng Hmnp Hung Ital Java Kali Kana Kawi Khar Khmr Khoj Kits Knda Krai Kthi Lana Laoo ' +
  'Latn Lepc Limb Lina Linb Lisu Lyci Lydi Mahj Maka Mand Mani Marc Medf Mend Merc Mero Mlym Modi Mong Mroo Mtei Mult Mymr ' +
  'Nagm Nand Narb Nbat Newa Nkoo Nshu Ogam Olck Onao Orkh Orya Osge Osma Ougr Palm Pauc Perm Phag Phli Phlp Phnx Plrd Prti ' +
  'Rjng Rohg Runr Samr Sarb Saur Sgnw Shaw Shrd Sidd Sind Sinh Sogd Sogo Sora Soyo Sund Sunu Sylo Syrc Tagb Takr Tale Talu ' +
  'Taml Tang Tavt Telu Tfng Tglg Thaa Thai Tibt Tirh Tnsa Todr Toto Tutg Ugar Vaii Vith Wara Wcho Xpeo Xsux Yezi Yiii Zanb'
).split(' ');

/** One test per script, compiled on the first name judged: about 170 Unicode property patterns take a fifth of a second to build. */
const scriptTests = lazy((): [string, RegExp][] =>
  SCRIPT_CODES.flatMap((code): [string, RegExp][] => {
    try {
      return [[code, new RegExp(`^\\p{Script_Extensions=${code}}$`, 'u')]];
    } catch {
      return [];
    }
  }),
);

/** Common (digits, punctuation) and Inherited (combining marks) characters go with any script. */
const ANY_SCRIPT = /^[\p{Script_Extensions=Common}\p{Script_Extensions=Inherited}]$/u;

/**
 * Writing systems that join scripts (TR39 5.1, augmented script sets): Han is written with kana
 * in Japanese (Jpan), with Hangul in Korean (Kore) and with Bopomofo in Chinese (Hanb).
 */
const WRITING_SYSTEMS: Record<string, string[]> = { Hani: ['Jpan', 'Kore', 'Hanb'], Hira: ['Jpan'], Kana: ['Jpan'], Hang: ['Kore'], Bopo: ['Hanb'] };

/** The combinations TR39's highly restrictive level allows beside a single script. */
const ALLOWED_COMBINATIONS = [
  ['Latn', 'Jpan'],
  ['Latn', 'Hanb'],
  ['Latn', 'Kore'],
];

/** A character's scripts (its Script_Extensions), or undefined for one that goes with any. */
function scriptsOf(char: string): string[] | undefined {
  if (ANY_SCRIPT.test(char)) return undefined;
  const scripts = scriptTests().filter(([, test]) => test.test(char)).map(([code]) => code);
  return scripts.length ? scripts : ['Zzzz'];
}

const SCRIPT_NAMES = new Intl.DisplayNames('en', { type: 'script' });

/**
 * The scripts a username mixes, by English name, or none when it keeps to Unicode TR39's highly
 * restrictive level: one script (digits, punctuation and combining marks go with any), or Latin
 * with Han and kana, with Han and Bopomofo, or with Han and Hangul. So a Latin name cannot hide a
 * Cyrillic `а` or a Greek `ο`. Judged on the folded name, as uniqueness is.
 */
export function mixedScripts(username: string): string[] {
  const perChar = [...foldUsername(username)].map(scriptsOf).filter((s): s is string[] => s !== undefined);
  const augmented = perChar.map((scripts) => new Set(scripts.flatMap((code) => [code, ...(WRITING_SYSTEMS[code] ?? [])])));
  const shared = augmented.reduce<Set<string> | undefined>((common, set) => (common ? new Set([...common].filter((c) => set.has(c))) : set), undefined);
  if (!shared || shared.size > 0) return [];
  if (ALLOWED_COMBINATIONS.some((combination) => augmented.every((set) => combination.some((code) => set.has(code))))) return [];
  const names = new Set(perChar.map((scripts) => SCRIPT_NAMES.of(scripts[0]) ?? scripts[0]));
  return [...names].sort();
}

/**
 * Whether a new account may take this name: what `POST /v1/users` accepts (api/schemas/accounts.ts),
 * for names the server picks itself (an OpenID Connect sign-in's first account).
 */
export function acceptableNewUsername(name: string): boolean {
  return name.length > 0 && !/[\s\p{C}]/u.test(name) && Buffer.byteLength(name) <= 255 && mixedScripts(name).length === 0;
}
