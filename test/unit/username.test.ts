import { foldUsername, mixedScripts, usernameKey } from '../../core/access/username';

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

test('letters of other scripts fold apart, however alike they look (a name may not mix them, below)', () => {
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

describe('a username keeps to one script (Unicode TR39 highly restrictive)', () => {
  test.each([
    ['\u0430dmin', ['Cyrillic', 'Latin']], // Cyrillic а, then Latin
    ['p\u0430ypal', ['Cyrillic', 'Latin']],
    ['b\u03bfb', ['Greek', 'Latin']], // Greek ο
    ['\u0391\u0412', ['Cyrillic', 'Greek']], // Greek Α, Cyrillic В
    ['\u0561dmin', ['Armenian', 'Latin']], // Armenian ա
    ['admin\u13aa', ['Cherokee', 'Latin']], // Cherokee Ꭺ
    ['\uff41\u0430', ['Cyrillic', 'Latin']], // full-width Latin a folds to Latin
  ])('%j mixes %j and is refused', (name, scripts) => {
    expect(mixedScripts(name)).toEqual(scripts);
  });

  test.each([
    'admin',
    'dana.smith-2@ops',
    '\u0418\u0432\u0430\u043d', // Иван
    '\u03c3\u03bf\u03c6\u03af\u03b1', // σοφία
    'cafe\u0301', // a combining accent takes its letter's script
    '12345',
    '\u5c71\u7530\u305f\u308d\u3046', // 山田たろう: Han with Hiragana
    '\u7530\u4e2dTaro', // 田中Taro: Latin with Han
    '\u30bf\u30ed\u30a6-\u5c71\u7530', // タロウ-山田
    '\uae40\ubbfc\uc900Kim', // 김민준Kim: Latin with Hangul
    '\u738b\u3105\u3106', // Han with Bopomofo
  ])('%j keeps to one script, or to an allowed East Asian combination', (name) => {
    expect(mixedScripts(name)).toEqual([]);
  });

  test('Hangul with kana is not one of the allowed combinations', () => {
    expect(mixedScripts('\uae40\u30bf')).toEqual(['Hangul', 'Katakana']);
  });
});
