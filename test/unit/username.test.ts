import { foldUsername, usernameKey } from '../../core/username';

const same = (a: string, b: string) => expect(usernameKey(a)).toBe(usernameKey(b));
const distinct = (a: string, b: string) => expect(usernameKey(a)).not.toBe(usernameKey(b));

test('case does not make a different name', () => {
  same('admin', 'ADMIN');
  same('Dana', 'dANA');
});

test('composed and decomposed letters are one name', () => {
  same('caf\u00e9', 'cafe\u0301');
  same('CAF\u00c9', 'cafe\u0301');
});

test('compatibility forms fold to the plain letters', () => {
  same('ａｄｍｉｎ', 'admin'); // full-width
  same('\ufb01le', 'file'); // the fi ligature
  same('\u212aelvin', 'kelvin'); // the Kelvin sign
});

test('a full case mapping folds what toLowerCase alone keeps apart', () => {
  same('straße', 'STRASSE');
  same('οδος', 'οδοσ'); // final and medial sigma
  same('\u017fam', 'sam'); // long s
});

test('invisible default-ignorable code points are dropped', () => {
  same('admin\ufe0f', 'admin'); // variation selector
  same('ad\u034fmin', 'admin'); // combining grapheme joiner
});

test('letters of other scripts stay distinct, however alike they look', () => {
  distinct('a', '\u0430'); // Latin a, Cyrillic а
  distinct('o', '\u03bf'); // Latin o, Greek ο
  distinct('bob', 'bob1');
});

test('the fold is stable: folding a folded name changes nothing', () => {
  for (const name of ['Straße', 'İstanbul', 'ΣΟΦΟΣ', 'ǅemal', 'ﬃ', 'cafe\u0301']) {
    expect(foldUsername(foldUsername(name))).toBe(foldUsername(name));
  }
});

test('the key is a fixed-size digest however far a name expands', () => {
  // U+FDFA becomes 18 characters under NFKC.
  expect(usernameKey('\ufdfa'.repeat(85))).toMatch(/^[0-9a-f]{64}$/);
});
