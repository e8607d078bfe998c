import { cpuTimed } from '../support/cpu-time';
import { DomainError } from '../../core/errors';
import {
  checkAnswers,
  codePointLength,
  mergeSecretDefaultEdit,
  parseSurvey,
  REDACTED,
  redactSurvey,
  secretFieldVars,
  SURVEY_TYPE_ALIASES,
  SURVEY_TYPES,
  SurveyError,
  requireStoredPatterns,
  unansweredRequired,
} from '../../core/runs/survey';

const MISSING = Symbol('missing');

function surveyError(fn: () => unknown): SurveyError {
  try {
    fn();
  } catch (err) {
    if (err instanceof SurveyError) return err;
    throw err;
  }
  throw new Error('expected a SurveyError');
}

/** Answers one field named `v` with `value` (or leaves it unanswered). */
function answerOne(field: Record<string, unknown>, value: unknown) {
  const fields = parseSurvey([{ var: 'v', ...field }]);
  return checkAnswers(fields, value === MISSING ? {} : { v: value }, { secretDefaults: [] });
}

describe('types and aliases', () => {
  test('the six canonical types and five aliases', () => {
    expect([...SURVEY_TYPES]).toEqual(['text', 'multiline', 'secret', 'int', 'choice', 'bool']);
    expect(SURVEY_TYPE_ALIASES).toEqual({ integer: 'int', boolean: 'bool', string: 'text', textarea: 'multiline', password: 'secret' });
  });

  test.each([
    ['text', 'text'],
    ['multiline', 'multiline'],
    ['secret', 'secret'],
    ['int', 'int'],
    ['bool', 'bool'],
    ['integer', 'int'],
    ['boolean', 'bool'],
    ['string', 'text'],
    ['textarea', 'multiline'],
    ['password', 'secret'],
  ])('type %s is read as %s', (given, canonical) => {
    expect(parseSurvey([{ var: 'x', type: given }])).toEqual([{ var: 'x', type: canonical }]);
  });

  test('choice', () => {
    expect(parseSurvey([{ var: 'x', type: 'choice', choices: ['a'] }])).toEqual([{ var: 'x', type: 'choice', choices: ['a'] }]);
  });

  test('types are case-sensitive and unknown ones are refused', () => {
    for (const type of ['Text', 'INT', 'float', 'number', 'select', '']) {
      const err = surveyError(() => parseSurvey([{ var: 'x', type }]));
      expect(err.field).toBe('survey[0].type');
      expect(err.message).toMatch(/^survey\[0\]\.type must be one of text, multiline, secret, int, choice, bool/);
    }
  });
});

describe('answer constraints', () => {
  type Row = [string, Record<string, unknown>, unknown, true | RegExp];
  const rows: Row[] = [
    // int and its alias
    ['int: a positive integer', { type: 'int' }, 5, true],
    ['int: zero', { type: 'int' }, 0, true],
    ['int: a negative integer', { type: 'int' }, -3, true],
    ['int: a numeric string', { type: 'int' }, '5', /must be an integer/],
    ['int: a fraction', { type: 'int' }, 5.5, /must be an integer/],
    ['int: a boolean', { type: 'int' }, true, /must be an integer/],
    ['int: null', { type: 'int' }, null, /must be an integer/],
    ['int: an object', { type: 'int' }, { n: 1 }, /must be an integer/],
    ['int: past the safe integer range', { type: 'int' }, 2 ** 53, /must be an integer/],
    ['integer alias: an integer', { type: 'integer' }, 7, true],
    ['integer alias: a numeric string', { type: 'integer' }, '7', /must be an integer/],
    ['int: below min', { type: 'int', min: 1, max: 10 }, 0, /must be at least 1$/],
    ['int: at min', { type: 'int', min: 1, max: 10 }, 1, true],
    ['int: just above min', { type: 'int', min: 1, max: 10 }, 2, true],
    ['int: just below max', { type: 'int', min: 1, max: 10 }, 9, true],
    ['int: at max', { type: 'int', min: 1, max: 10 }, 10, true],
    ['int: above max', { type: 'int', min: 1, max: 10 }, 11, /must be at most 10$/],
    ['int: at a negative min', { type: 'int', min: -5 }, -5, true],
    ['int: below a negative min', { type: 'int', min: -5 }, -6, /at least -5/],
    ['int: only max, far below', { type: 'int', max: 3 }, -1000, true],
    ['int: fractional bounds, inside', { type: 'int', min: 0.5, max: 2.5 }, 1, true],
    ['int: fractional bounds, below', { type: 'int', min: 0.5, max: 2.5 }, 0, /at least 0.5/],
    ['int: fractional bounds, above', { type: 'int', min: 0.5, max: 2.5 }, 3, /at most 2.5/],
    ['int: min equal to max', { type: 'int', min: 4, max: 4 }, 4, true],
    // bool and its alias
    ['bool: true', { type: 'bool' }, true, true],
    ['bool: false', { type: 'bool' }, false, true],
    ['bool: the string "true"', { type: 'bool' }, 'true', /must be true or false/],
    ['bool: 1', { type: 'bool' }, 1, /must be true or false/],
    ['bool: 0', { type: 'bool' }, 0, /must be true or false/],
    ['bool: null', { type: 'bool' }, null, /must be true or false/],
    ['boolean alias: false', { type: 'boolean' }, false, true],
    ['boolean alias: "yes"', { type: 'boolean' }, 'yes', /must be true or false/],
    // choice
    ['choice: the first', { type: 'choice', choices: ['blue', 'green'] }, 'blue', true],
    ['choice: the last', { type: 'choice', choices: ['blue', 'green'] }, 'green', true],
    ['choice: not listed', { type: 'choice', choices: ['blue', 'green'] }, 'red', /must be one of the choices: "blue", "green"/],
    ['choice: another case', { type: 'choice', choices: ['blue', 'green'] }, 'Blue', /one of the choices/],
    ['choice: a prefix', { type: 'choice', choices: ['blue', 'green'] }, 'blu', /one of the choices/],
    ['choice: a list', { type: 'choice', choices: ['blue', 'green'] }, ['blue'], /one of the choices/],
    ['choice: a number', { type: 'choice', choices: ['1', '2'] }, 1, /one of the choices/],
    ['choice: the empty string when listed', { type: 'choice', choices: ['', 'x'] }, '', true],
    // text and its alias
    ['text: a string', { type: 'text' }, 'hello', true],
    ['text: the empty string', { type: 'text' }, '', true],
    ['text: a number', { type: 'text' }, 5, /must be a string/],
    ['text: null', { type: 'text' }, null, /must be a string/],
    ['text: a line feed', { type: 'text' }, 'a\nb', /single line/],
    ['text: a carriage return', { type: 'text' }, 'a\rb', /single line/],
    ['text: a trailing newline', { type: 'text' }, 'abc\n', /single line/],
    ['string alias: a string', { type: 'string' }, 'x', true],
    ['string alias: a line feed', { type: 'string' }, 'a\nb', /single line/],
    ['text: below min_length', { type: 'text', min_length: 2, max_length: 4 }, 'a', /must be at least 2 characters long/],
    ['text: at min_length', { type: 'text', min_length: 2, max_length: 4 }, 'ab', true],
    ['text: just above min_length', { type: 'text', min_length: 2, max_length: 4 }, 'abc', true],
    ['text: at max_length', { type: 'text', min_length: 2, max_length: 4 }, 'abcd', true],
    ['text: above max_length', { type: 'text', min_length: 2, max_length: 4 }, 'abcde', /must be at most 4 characters long/],
    ['text: empty under min_length 1', { type: 'text', min_length: 1 }, '', /at least 1 character/],
    ['text: empty at max_length 0', { type: 'text', max_length: 0 }, '', true],
    // lengths count code points
    ['unicode: two CJK characters at max_length 2', { type: 'text', max_length: 2 }, '日本', true],
    ['unicode: three CJK characters above max_length 2', { type: 'text', max_length: 2 }, '日本語', /at most 2/],
    ['unicode: two emoji (four UTF-16 units) at max_length 2', { type: 'text', max_length: 2 }, '😀😀', true],
    ['unicode: three emoji above max_length 2', { type: 'text', max_length: 2 }, '😀😀😀', /at most 2/],
    ['unicode: two emoji below min_length 3', { type: 'text', min_length: 3 }, '😀😀', /at least 3/],
    ['unicode: a combining accent is its own code point', { type: 'text', max_length: 1 }, 'e\u0301', /at most 1/],
    // multiline and its alias
    ['multiline: line feeds', { type: 'multiline' }, 'a\nb\nc', true],
    ['multiline: CRLF', { type: 'multiline' }, 'a\r\nb', true],
    ['multiline: a number', { type: 'multiline' }, 1, /must be a string/],
    ['textarea alias: line feeds', { type: 'textarea' }, 'line 1\nline 2', true],
    ['multiline: a newline counts as a character', { type: 'multiline', max_length: 3 }, 'a\nb', true],
    ['multiline: above max_length with newlines', { type: 'multiline', max_length: 3 }, 'a\nbc', /at most 3/],
    // secret and its alias
    ['secret: a string', { type: 'secret' }, 's3cret', true],
    ['secret: a number', { type: 'secret' }, 1234, /must be a string/],
    ['secret: may hold a newline', { type: 'secret' }, '-----BEGIN-----\nabc', true],
    ['password alias: a string', { type: 'password' }, 'pw', true],
    ['secret: below min_length', { type: 'secret', min_length: 8 }, 'short', /at least 8/],
    ['secret: at min_length', { type: 'secret', min_length: 8 }, '12345678', true],
    ['secret: above max_length', { type: 'secret', max_length: 4 }, '12345', /at most 4/],
    ['secret: at max_length', { type: 'secret', max_length: 4 }, '1234', true],
    // patterns match the whole answer
    ['pattern ab: exactly', { type: 'text', pattern: 'ab' }, 'ab', true],
    ['pattern ab: inside a longer answer', { type: 'text', pattern: 'ab' }, 'xaby', /must match the pattern ab as a whole/],
    ['pattern ab: as a prefix', { type: 'text', pattern: 'ab' }, 'abx', /must match the pattern/],
    ['pattern ab: as a suffix', { type: 'text', pattern: 'ab' }, 'xab', /must match the pattern/],
    ['pattern a|b: a', { type: 'text', pattern: 'a|b' }, 'a', true],
    ['pattern a|b: b', { type: 'text', pattern: 'a|b' }, 'b', true],
    ['pattern a|b: ab', { type: 'text', pattern: 'a|b' }, 'ab', /must match the pattern/],
    ['pattern a|b: xa (the left branch unanchored)', { type: 'text', pattern: 'a|b' }, 'xa', /must match the pattern/],
    ['pattern a|b: bx (the right branch unanchored)', { type: 'text', pattern: 'a|b' }, 'bx', /must match the pattern/],
    ['pattern [0-9]+: digits', { type: 'text', pattern: '[0-9]+' }, '123', true],
    ['pattern [0-9]+: digits then a letter', { type: 'text', pattern: '[0-9]+' }, '12a', /must match/],
    ['pattern [0-9]+: empty', { type: 'text', pattern: '[0-9]+' }, '', /must match/],
    ['pattern already anchored', { type: 'text', pattern: '^abc$' }, 'abc', true],
    ['pattern already anchored, longer answer', { type: 'text', pattern: '^abc$' }, 'abcd', /must match/],
    ['pattern (?m): ^ and $ at a line break still cannot match part of the answer', { type: 'multiline', pattern: '(?m)a$' }, 'a\nb', /must match/],
    ['pattern (?s): . crosses a newline when the pattern asks', { type: 'multiline', pattern: '(?s).*' }, 'a\nb', true],
    ['pattern a|ab: the longer branch when only it matches whole', { type: 'text', pattern: 'a|ab' }, 'ab', true],
    ['pattern \\pL: Unicode classes', { type: 'text', pattern: '\\pL+' }, 'héllo', true],
    ['pattern \\d is ASCII digits only', { type: 'text', pattern: '\\d+' }, '١٢٣', /must match/],
    ['pattern . matches a lone surrogate as one code point', { type: 'text', pattern: '.' }, '\ud800', true],
    ['pattern . is one code point', { type: 'text', pattern: '.' }, '😀', true],
    ['pattern .{2} with one emoji', { type: 'text', pattern: '.{2}' }, '😀', /must match/],
    ['pattern on multiline: . does not cross a newline', { type: 'multiline', pattern: '.*' }, 'a\nb', /must match/],
    ['pattern on multiline: [\\s\\S]* does', { type: 'multiline', pattern: '[\\s\\S]*' }, 'a\nb', true],
    ['pattern on multiline: $ is the end of the answer, not of a line', { type: 'multiline', pattern: 'a' }, 'a\n', /must match/],
    ['pattern on secret: matches', { type: 'secret', pattern: '\\d{4}' }, '1234', true],
    ['pattern on secret: too long', { type: 'secret', pattern: '\\d{4}' }, '12345', /must match the pattern/],
    ['pattern and lengths together: length checked first', { type: 'text', pattern: '[a-z]+', max_length: 3 }, 'abcd', /at most 3/],
    ['pattern and lengths together: pass', { type: 'text', pattern: '[a-z]+', min_length: 2 }, 'ab', true],
  ];

  test.each(rows)('%s', (_name, field, value, expected) => {
    if (expected === true) {
      expect(answerOne(field, value).extraVars).toEqual({ v: value });
    } else {
      const err = surveyError(() => answerOne(field, value));
      expect(err.field).toBe('answers.v');
      expect(err.message).toMatch(/^answers\.v /);
      expect(err.message).toMatch(expected);
    }
  });

  test('every type and alias appears in the table', () => {
    const covered = new Set(rows.map(([, field]) => field.type));
    for (const type of [...SURVEY_TYPES, ...Object.keys(SURVEY_TYPE_ALIASES)]) expect(covered).toContain(type);
  });
});

describe('parseSurvey refuses', () => {
  type Row = [string, unknown, string, RegExp];
  const field = (extra: Record<string, unknown>) => [{ var: 'x', type: 'text', ...extra }];
  const rows: Row[] = [
    ['an object for a survey', { var: 'x' }, 'survey', /must be a list of fields/],
    ['null for a survey', null, 'survey', /must be a list of fields/],
    ['a string for a survey', 'x', 'survey', /must be a list of fields/],
    ['a field that is not an object', [5], 'survey[0]', /must be an object/],
    ['a field that is null', [{ var: 'a', type: 'int' }, null], 'survey[1]', /must be an object/],
    ['a field without var', [{ type: 'text' }], 'survey[0].var', /is required/],
    ['a field without type', [{ var: 'x' }], 'survey[0].type', /is required/],
    ['a var that is not a string', [{ var: 5, type: 'text' }], 'survey[0].var', /must be a string/],
    ['a var starting with a digit', [{ var: '1x', type: 'text' }], 'survey[0].var', /variable name/],
    ['a var with a dash', [{ var: 'a-b', type: 'text' }], 'survey[0].var', /variable name/],
    ['a var with a space', [{ var: 'a b', type: 'text' }], 'survey[0].var', /variable name/],
    ['an empty var', [{ var: '', type: 'text' }], 'survey[0].var', /variable name/],
    ['a var with a non-ASCII letter', [{ var: 'größe', type: 'text' }], 'survey[0].var', /variable name/],
    ['a var with a dot', [{ var: 'a.b', type: 'text' }], 'survey[0].var', /variable name/],
    ['__proto__ as a var', [{ var: '__proto__', type: 'text' }], 'survey[0].var', /__proto__/],
    ['an unknown key', field({ colour: 'red' }), 'survey[0].colour', /is not a survey field key/],
    ['an unknown key in a later field', [{ var: 'a', type: 'int' }, { var: 'b', type: 'bool' }, { var: 'c', type: 'text', question_name: 'q' }], 'survey[2].question_name', /not a survey field key/],
    ['a label that is not a string', field({ label: 5 }), 'survey[0].label', /must be a string/],
    ['help that is not a string', field({ help: ['x'] }), 'survey[0].help', /must be a string/],
    ['required that is not a boolean', field({ required: 'yes' }), 'survey[0].required', /must be true or false/],
    // keys not applying to the type
    ['choices on int', [{ var: 'x', type: 'int', choices: ['1'] }], 'survey[0].choices', /does not apply to a field of type int; it is for choice fields/],
    ['choices on text', field({ choices: ['a'] }), 'survey[0].choices', /does not apply to a field of type text/],
    ['min on text', field({ min: 1 }), 'survey[0].min', /does not apply to a field of type text; it is for int fields/],
    ['max on secret', [{ var: 'x', type: 'secret', max: 1 }], 'survey[0].max', /does not apply to a field of type secret/],
    ['min on bool', [{ var: 'x', type: 'bool', min: 0 }], 'survey[0].min', /does not apply to a field of type bool/],
    ['min_length on int', [{ var: 'x', type: 'int', min_length: 1 }], 'survey[0].min_length', /does not apply to a field of type int; it is for text, multiline and secret fields/],
    ['max_length on choice', [{ var: 'x', type: 'choice', choices: ['a'], max_length: 3 }], 'survey[0].max_length', /does not apply to a field of type choice/],
    ['pattern on bool', [{ var: 'x', type: 'bool', pattern: 'x' }], 'survey[0].pattern', /does not apply to a field of type bool/],
    ['pattern on int (by alias)', [{ var: 'x', type: 'integer', pattern: '\\d+' }], 'survey[0].pattern', /does not apply to a field of type int/],
    ['min on choice', [{ var: 'x', type: 'choice', choices: ['a'], min: 1 }], 'survey[0].min', /does not apply to a field of type choice/],
    // bounds
    ['min that is not a number', [{ var: 'x', type: 'int', min: '1' }], 'survey[0].min', /must be a finite number/],
    ['max that is null', [{ var: 'x', type: 'int', max: null }], 'survey[0].max', /must be a finite number/],
    ['min above max', [{ var: 'x', type: 'int', min: 5, max: 4 }], 'survey[0].max', /must not be below survey\[0\]\.min/],
    ['a negative min_length', field({ min_length: -1 }), 'survey[0].min_length', /0 or more/],
    ['a fractional max_length', field({ max_length: 1.5 }), 'survey[0].max_length', /whole number/],
    ['a string max_length', field({ max_length: '3' }), 'survey[0].max_length', /whole number/],
    ['min_length above max_length', field({ min_length: 3, max_length: 2 }), 'survey[0].max_length', /must not be below survey\[0\]\.min_length/],
    // patterns
    ['a pattern that is not a string', field({ pattern: 5 }), 'survey[0].pattern', /must be a string/],
    ['an unclosed group', field({ pattern: '(' }), 'survey[0].pattern', /must be RE2 syntax/],
    ['an unclosed class', [{ var: 'x', type: 'multiline', pattern: '[a-' }], 'survey[0].pattern', /must be RE2 syntax/],
    ['a dangling quantifier', [{ var: 'x', type: 'secret', pattern: '*a' }], 'survey[0].pattern', /must be RE2 syntax/],
    ['a trailing backslash', field({ pattern: 'abc\\' }), 'survey[0].pattern', /must be RE2 syntax/],
    ['a pattern that would break out of the anchoring group', field({ pattern: 'a)|(?:b' }), 'survey[0].pattern', /must be RE2 syntax/],
    ['a pattern that would break out of the anchoring group, reopened', field({ pattern: 'a)(b' }), 'survey[0].pattern', /must be RE2 syntax/],
    // RE2 has no backtracking constructs: they are refused at save, not run
    ['a back reference', field({ pattern: '(a)\\1' }), 'survey[0].pattern', /must be RE2 syntax.*\\1/],
    ['a named back reference', field({ pattern: '(?<x>a)\\k<x>' }), 'survey[0].pattern', /must be RE2 syntax/],
    ['a lookahead', field({ pattern: '(?=a)a' }), 'survey[0].pattern', /must be RE2 syntax/],
    ['a negative lookahead', field({ pattern: '(?!b)a' }), 'survey[0].pattern', /must be RE2 syntax/],
    ['a lookbehind', field({ pattern: '(?<=a)b' }), 'survey[0].pattern', /must be RE2 syntax/],
    ['a possessive quantifier', field({ pattern: 'a++' }), 'survey[0].pattern', /must be RE2 syntax/],
    ['a JavaScript \\u escape (RE2 writes \\x{41})', field({ pattern: '\\u0041' }), 'survey[0].pattern', /must be RE2 syntax/],
    ['a repeat count over 1000', field({ pattern: 'a{1001}' }), 'survey[0].pattern', /must be RE2 syntax/],
    ['a pattern over 4096 characters', field({ pattern: 'a'.repeat(4097) }), 'survey[0].pattern', /at most 4096 characters/],
    ['a pattern that compiles too large', field({ pattern: '(?:ab|cd){1000}'.repeat(3) }), 'survey[0].pattern', /too large/],
    // choices
    ['a choice field without choices', [{ var: 'x', type: 'choice' }], 'survey[0].choices', /is required for a choice field/],
    ['empty choices', [{ var: 'x', type: 'choice', choices: [] }], 'survey[0].choices', /must not be empty/],
    ['duplicate choices', [{ var: 'x', type: 'choice', choices: ['a', 'b', 'a'] }], 'survey[0].choices[2]', /repeats survey\[0\]\.choices\[0\]/],
    ['a choice that is not a string', [{ var: 'x', type: 'choice', choices: ['a', 2] }], 'survey[0].choices[1]', /must be a string/],
    ['choices that are not a list', [{ var: 'x', type: 'choice', choices: 'a,b' }], 'survey[0].choices', /must be a list of strings/],
    // duplicate vars
    ['a repeated var', [{ var: 'x', type: 'text' }, { var: 'y', type: 'int' }, { var: 'x', type: 'bool' }], 'survey[2].var', /repeats the var x of survey\[0\]/],
    // defaults must satisfy the field
    ['an int default given as a string', [{ var: 'x', type: 'int', default: '5' }], 'survey[0].default', /must be an integer/],
    ['an int default that is a fraction', [{ var: 'x', type: 'int', default: 1.5 }], 'survey[0].default', /must be an integer/],
    ['an int default above max', [{ var: 'x', type: 'int', max: 10, default: 11 }], 'survey[0].default', /must be at most 10/],
    ['an int default below min', [{ var: 'x', type: 'int', min: 1, default: 0 }], 'survey[0].default', /must be at least 1/],
    ['a bool default given as a string', [{ var: 'x', type: 'bool', default: 'true' }], 'survey[0].default', /true or false/],
    ['a choice default not among the choices', [{ var: 'x', type: 'choice', choices: ['a', 'b'], default: 'c' }], 'survey[0].default', /one of the choices/],
    ['a text default with a newline', field({ default: 'a\nb' }), 'survey[0].default', /single line/],
    ['a text default over max_length', field({ max_length: 2, default: 'abc' }), 'survey[0].default', /at most 2/],
    ['a text default not matching the pattern', field({ pattern: '[a-z]+', default: 'ABC' }), 'survey[0].default', /must match the pattern/],
    ['an empty text default under min_length', field({ min_length: 1, default: '' }), 'survey[0].default', /at least 1/],
    ['a null default', field({ default: null }), 'survey[0].default', /must be a string/],
    ['a secret default not matching the pattern', [{ var: 'x', type: 'secret', pattern: '\\d+', default: 'letters' }], 'survey[0].default', /must match the pattern/],
    ['a secret default too short', [{ var: 'x', type: 'password', min_length: 12, default: 'short' }], 'survey[0].default', /at least 12/],
  ];

  test.each(rows)('%s', (_name, input, path, expected) => {
    const err = surveyError(() => parseSurvey(input));
    expect(err.field).toBe(path);
    expect(err.message).toMatch(expected);
    expect(err.message.startsWith(path)).toBe(true);
  });

  test('a SurveyError is a 400 naming the field', () => {
    const err = surveyError(() => parseSurvey(field({ colour: 'red' })));
    expect(err).toBeInstanceOf(DomainError);
    expect(err.code).toBe('invalid');
    expect(err.details).toEqual({ field: 'survey[0].colour' });
  });

  test('an unknown key is refused even when the rest of the field is fine, and named, not ignored', () => {
    const err = surveyError(() => parseSurvey([{ var: 'ok', type: 'int', min: 1, max: 2, maximum: 3 }]));
    expect(err.field).toBe('survey[0].maximum');
  });

  test('the first problem in survey order is reported', () => {
    const err = surveyError(() => parseSurvey([{ var: 'a', type: 'text' }, { var: 'b', type: 'int', choices: ['x'] }, { var: '9', type: 'nope' }]));
    expect(err.field).toBe('survey[1].choices');
  });

  test('a default that fails is never echoed in the message, secret or not', () => {
    for (const type of ['text', 'secret']) {
      const err = surveyError(() => parseSurvey([{ var: 'x', type, pattern: '\\d+', default: 'Tr0ub4dor&3' }]));
      expect(err.message).not.toContain('Tr0ub4dor');
      expect(JSON.stringify(err)).not.toContain('Tr0ub4dor');
    }
  });
});

describe('parseSurvey accepts', () => {
  test('a full survey, normalizing aliases and keeping only the keys given', () => {
    const input = [
      { var: 'batch_size', type: 'integer', label: 'Batch size', required: true, default: 5, help: 'Hosts at a time', min: 1, max: 50 },
      { var: 'dry', type: 'boolean', default: false },
      { var: 'region', type: 'choice', choices: ['eu-west-1', 'us-east-1'], default: 'eu-west-1', required: true },
      { var: 'ticket', type: 'string', pattern: '[A-Z]+-[0-9]+', min_length: 3, max_length: 20, default: 'OPS-1' },
      { var: 'notes', type: 'textarea', default: 'first\nsecond' },
      { var: 'db_password', type: 'password', min_length: 8, default: 'correct horse' },
      { var: '_private', type: 'text' },
      { var: 'A1_b2', type: 'int', min: -1.5 },
    ];
    expect(parseSurvey(input)).toEqual([
      { var: 'batch_size', type: 'int', label: 'Batch size', required: true, default: 5, help: 'Hosts at a time', min: 1, max: 50 },
      { var: 'dry', type: 'bool', default: false },
      { var: 'region', type: 'choice', choices: ['eu-west-1', 'us-east-1'], default: 'eu-west-1', required: true },
      { var: 'ticket', type: 'text', pattern: '[A-Z]+-[0-9]+', min_length: 3, max_length: 20, default: 'OPS-1' },
      { var: 'notes', type: 'multiline', default: 'first\nsecond' },
      { var: 'db_password', type: 'secret', min_length: 8, default: 'correct horse' },
      { var: '_private', type: 'text' },
      { var: 'A1_b2', type: 'int', min: -1.5 },
    ]);
  });

  test('an empty survey', () => {
    expect(parseSurvey([])).toEqual([]);
  });

  test('bounds equal to each other', () => {
    expect(() => parseSurvey([{ var: 'x', type: 'int', min: 3, max: 3, default: 3 }])).not.toThrow();
    expect(() => parseSurvey([{ var: 'x', type: 'text', min_length: 3, max_length: 3, default: 'abc' }])).not.toThrow();
  });

  test('a secret default of the mask or the empty string is an edit instruction, not held to the constraints', () => {
    const fields = parseSurvey([
      { var: 'a', type: 'secret', pattern: '\\d+', min_length: 20, default: REDACTED },
      { var: 'b', type: 'secret', min_length: 8, default: '' },
    ]);
    expect(fields.map((f) => f.default)).toEqual([REDACTED, '']);
  });

  test('the mask is an ordinary value for a non-secret field', () => {
    expect(() => parseSurvey([{ var: 'x', type: 'text', pattern: '\\d+', default: REDACTED }])).toThrow(SurveyError);
    expect(() => parseSurvey([{ var: 'x', type: 'text', default: REDACTED }])).not.toThrow();
  });

  test('does not change its input', () => {
    const input = [{ var: 'x', type: 'integer', default: 1 }];
    const copy = structuredClone(input);
    parseSurvey(input);
    expect(input).toEqual(copy);
  });

  test('vars are case-sensitive, so x and X are two vars', () => {
    expect(parseSurvey([{ var: 'x', type: 'text' }, { var: 'X', type: 'text' }])).toHaveLength(2);
  });
});

describe('checkAnswers', () => {
  const fields = parseSurvey([
    { var: 'batch_size', type: 'int', min: 1, max: 50, default: 5, required: true },
    { var: 'region', type: 'choice', choices: ['eu', 'us'], required: true },
    { var: 'dry', type: 'bool', default: false },
    { var: 'note', type: 'text' },
    { var: 'count', type: 'int', default: 0 },
  ]);

  test('answers become extra vars by var, and missing answers take their defaults', () => {
    expect(checkAnswers(fields, { region: 'eu', note: 'hi', batch_size: 10 }, { secretDefaults: [] })).toEqual({
      extraVars: { batch_size: 10, region: 'eu', dry: false, note: 'hi', count: 0 },
      secretVars: [],
    });
  });

  test('an answer overrides the default', () => {
    expect(checkAnswers(fields, { region: 'us', dry: true, count: 3 }).extraVars).toEqual({ batch_size: 5, region: 'us', dry: true, count: 3 });
  });

  test('a missing optional answer with no default is left out', () => {
    const { extraVars } = checkAnswers(fields, { region: 'eu' });
    expect(Object.keys(extraVars)).not.toContain('note');
  });

  test('a missing required answer with no default is refused naming the field', () => {
    const err = surveyError(() => checkAnswers(fields, { note: 'x' }));
    expect(err.field).toBe('answers.region');
    expect(err.message).toBe('answers.region is required and has no default');
    expect(err.code).toBe('invalid');
  });

  test('a required answer with a default is filled from it', () => {
    expect(checkAnswers(fields, { region: 'eu' }).extraVars.batch_size).toBe(5);
  });

  test('absent answers are empty answers', () => {
    const optional = parseSurvey([{ var: 'a', type: 'text', default: 'x' }, { var: 'b', type: 'int' }]);
    expect(checkAnswers(optional, undefined)).toEqual({ extraVars: { a: 'x' }, secretVars: [] });
    expect(surveyError(() => checkAnswers(fields, undefined)).field).toBe('answers.region');
  });

  test.each([
    ['null', null],
    ['a list', [{ region: 'eu' }]],
    ['a string', 'region=eu'],
    ['a number', 5],
  ])('answers that are %s are refused', (_name, answers) => {
    const err = surveyError(() => checkAnswers(fields, answers));
    expect(err.field).toBe('answers');
    expect(err.message).toMatch(/answers must be an object keyed by each survey field's var/);
  });

  test('an unknown answer key is refused naming it', () => {
    const err = surveyError(() => checkAnswers(fields, { region: 'eu', regoin: 'us' }));
    expect(err.field).toBe('answers.regoin');
    expect(err.message).toBe('answers.regoin is not a question of this survey');
  });

  test('a __proto__ key in parsed JSON is an unknown answer, never a prototype', () => {
    const err = surveyError(() => checkAnswers(fields, JSON.parse('{"region":"eu","__proto__":{"polluted":1}}')));
    expect(err.field).toBe('answers.__proto__');
  });

  test('an answer to a survey with no fields is unknown', () => {
    expect(checkAnswers([], {})).toEqual({ extraVars: {}, secretVars: [] });
    expect(surveyError(() => checkAnswers([], { x: 1 })).field).toBe('answers.x');
  });

  test('a non-secret answer is not echoed either', () => {
    const err = surveyError(() => checkAnswers(fields, { region: 'eu', note: 'line one\nline two' }));
    expect(err.message).not.toContain('line one');
  });

  test('the extra vars are a fresh object each time', () => {
    const a = checkAnswers(fields, { region: 'eu' }).extraVars;
    a.region = 'changed';
    expect(checkAnswers(fields, { region: 'eu' }).extraVars.region).toBe('eu');
  });
});

describe('secret fields at launch', () => {
  const fields = parseSurvey([
    { var: 'db_password', type: 'secret', required: true, min_length: 8, max_length: 64, pattern: '[^\\s]+' },
    { var: 'api_token', type: 'password' },
    { var: 'vault_pass', type: 'secret', required: true },
    { var: 'host', type: 'text', default: 'db1' },
  ]);

  test('an answered secret becomes an extra var (for the caller to seal)', () => {
    const result = checkAnswers(fields, { db_password: 'Sup3rSecret!', api_token: 't', vault_pass: 'v' }, { secretDefaults: [] });
    expect(result).toEqual({ extraVars: { db_password: 'Sup3rSecret!', api_token: 't', vault_pass: 'v', host: 'db1' }, secretVars: [] });
    expect(secretFieldVars(fields)).toEqual(['db_password', 'api_token', 'vault_pass']);
  });

  test('an unanswered secret with a sealed default is left to the caller in secretVars', () => {
    const result = checkAnswers(fields, { db_password: 'Sup3rSecret!' }, { secretDefaults: new Set(['vault_pass', 'api_token']) });
    expect(result.secretVars).toEqual(['api_token', 'vault_pass']);
    expect(result.extraVars).toEqual({ db_password: 'Sup3rSecret!', host: 'db1' });
  });

  test('an answered secret with a sealed default uses the answer', () => {
    const result = checkAnswers(fields, { db_password: 'Sup3rSecret!', vault_pass: 'given' }, { secretDefaults: ['vault_pass'] });
    expect(result.secretVars).toEqual([]);
    expect(result.extraVars.vault_pass).toBe('given');
  });

  test('an unanswered required secret without a sealed default is refused', () => {
    const err = surveyError(() => checkAnswers(fields, { db_password: 'Sup3rSecret!' }, { secretDefaults: [] }));
    expect(err.field).toBe('answers.vault_pass');
    expect(err.message).toMatch(/is required and has no default/);
  });

  test('an unanswered optional secret without a sealed default is left out', () => {
    const result = checkAnswers(fields, { db_password: 'Sup3rSecret!', vault_pass: 'v' });
    expect(Object.keys(result.extraVars)).not.toContain('api_token');
    expect(result.secretVars).toEqual([]);
  });

  test("the checker never uses a secret field's default itself, plaintext or mask", () => {
    const withDefaults = parseSurvey([
      { var: 'a', type: 'secret', default: 'plaintext-default' },
      { var: 'b', type: 'secret', default: REDACTED },
    ]);
    const result = checkAnswers(withDefaults, {}, { secretDefaults: ['b'] });
    expect(result).toEqual({ extraVars: {}, secretVars: ['b'] });
    expect(JSON.stringify(result)).not.toContain('plaintext-default');
    expect(JSON.stringify(result)).not.toContain(REDACTED);
  });

  test('a sealed default named for a non-secret field is ignored', () => {
    expect(checkAnswers(fields, { db_password: 'Sup3rSecret!', vault_pass: 'v' }, { secretDefaults: ['host'] })).toEqual({
      extraVars: { db_password: 'Sup3rSecret!', vault_pass: 'v', host: 'db1' },
      secretVars: [],
    });
  });

  const SECRET = 'hunter2 hunter2';
  test.each([
    ['too short', { db_password: 'hunt3r', vault_pass: 'v' }, 'hunt3r', /at least 8 characters/],
    ['too long', { db_password: 'x'.repeat(65), vault_pass: 'v' }, 'x'.repeat(65), /at most 64 characters/],
    ['not matching the pattern', { db_password: SECRET, vault_pass: 'v' }, SECRET, /must match the pattern/],
    ['not a string', { db_password: 987654321, vault_pass: 'v' }, '987654321', /must be a string/],
    ['the second secret not a string', { db_password: 'Sup3rSecret!', vault_pass: ['my-vault-pass'] }, 'my-vault-pass', /must be a string/],
  ])('a secret answer %s is refused naming the field, never its value', (_name, answers, value, constraint) => {
    const err = surveyError(() => checkAnswers(fields, answers));
    expect(err.message).toMatch(constraint);
    expect(err.message).toMatch(/^answers\.(db_password|vault_pass) /);
    for (const text of [err.message, JSON.stringify(err), JSON.stringify(err.details), String(err.stack)]) {
      expect(text).not.toContain(value);
    }
  });
});

describe('unansweredRequired', () => {
  const fields = parseSurvey([
    { var: 'a', type: 'text', required: true },
    { var: 'b', type: 'text', required: true, default: 'x' },
    { var: 'c', type: 'secret', required: true },
    { var: 'd', type: 'secret', required: true },
    { var: 'e', type: 'int' },
    { var: 'f', type: 'bool', required: true, default: false },
  ]);

  test('names the required questions an unattended launch cannot fill', () => {
    expect(unansweredRequired(fields, { secretDefaults: ['d'] })).toEqual(['a', 'c']);
    expect(unansweredRequired(fields)).toEqual(['a', 'c', 'd']);
  });

  test('is empty when every required question has a default', () => {
    expect(unansweredRequired(fields.filter((f) => f.var !== 'a'), { secretDefaults: ['c', 'd'] })).toEqual([]);
  });

  test('agrees with checkAnswers on empty answers', () => {
    expect(surveyError(() => checkAnswers(fields, {}, { secretDefaults: ['d'] })).field).toBe('answers.a');
  });
});

describe('redactSurvey', () => {
  const fields = parseSurvey([
    { var: 'pw', type: 'secret', default: 'plain-default', min_length: 4 },
    { var: 'token', type: 'password' },
    { var: 'sealed_only', type: 'secret' },
    { var: 'cleared', type: 'secret', default: '' },
    { var: 'host', type: 'text', default: 'db1' },
    { var: 'n', type: 'int', default: 3 },
  ]);

  test("replaces each secret field's default with [redacted] and leaves the rest", () => {
    expect(REDACTED).toBe('[redacted]');
    const shown = redactSurvey(fields, { secretDefaults: ['sealed_only'] });
    expect(shown).toEqual([
      { var: 'pw', type: 'secret', default: REDACTED, min_length: 4 },
      { var: 'token', type: 'secret' },
      { var: 'sealed_only', type: 'secret', default: REDACTED },
      { var: 'cleared', type: 'secret' },
      { var: 'host', type: 'text', default: 'db1' },
      { var: 'n', type: 'int', default: 3 },
    ]);
    expect(JSON.stringify(shown)).not.toContain('plain-default');
  });

  test('without secretDefaults only a default in the fields is masked', () => {
    expect(redactSurvey(fields).find((f) => f.var === 'sealed_only')).toEqual({ var: 'sealed_only', type: 'secret' });
  });

  test('does not change its input and is idempotent', () => {
    const copy = structuredClone(fields);
    const once = redactSurvey(fields);
    expect(fields).toEqual(copy);
    expect(redactSurvey(once)).toEqual(once);
  });
});

describe('mergeSecretDefaultEdit', () => {
  const SEALED = 'v1.0123456789abcdef.aXZpdml2aXZpdml2.Y2lwaGVydGV4dA';

  test('the mask sent back unchanged keeps the stored sealed default', () => {
    expect(mergeSecretDefaultEdit(SEALED, REDACTED)).toEqual({ action: 'keep', sealed: SEALED });
  });

  test('a new string replaces it (the caller seals it)', () => {
    expect(mergeSecretDefaultEdit(SEALED, 'new-password')).toEqual({ action: 'replace', plaintext: 'new-password' });
    expect(mergeSecretDefaultEdit(undefined, 'first-password')).toEqual({ action: 'replace', plaintext: 'first-password' });
  });

  test('the empty string clears it, and so does an omitted default (a survey is replaced whole)', () => {
    expect(mergeSecretDefaultEdit(SEALED, '')).toEqual({ action: 'clear' });
    expect(mergeSecretDefaultEdit(SEALED, undefined)).toEqual({ action: 'clear' });
    expect(mergeSecretDefaultEdit(undefined, '')).toEqual({ action: 'clear' });
  });

  test('the mask with nothing stored is refused naming the field', () => {
    const err = surveyError(() => mergeSecretDefaultEdit(undefined, REDACTED, 'survey[3].default'));
    expect(err.field).toBe('survey[3].default');
    expect(err.message).toMatch(/^survey\[3\]\.default is \[redacted\], which keeps a stored secret default, but this field has none/);
  });

  test('a value that is not a string is refused', () => {
    expect(surveyError(() => mergeSecretDefaultEdit(SEALED, 1234)).field).toBe('default');
    expect(surveyError(() => mergeSecretDefaultEdit(SEALED, null, 'survey[0].default')).field).toBe('survey[0].default');
  });

  test('a read, edit and save cycle keeps the secret default it never showed', () => {
    const stored = parseSurvey([{ var: 'pw', type: 'secret', label: 'Password' }]);
    const read = redactSurvey(stored, { secretDefaults: ['pw'] });
    const edited = parseSurvey(read.map((f) => ({ ...f, label: 'Database password' })));
    expect(edited[0].default).toBe(REDACTED);
    expect(mergeSecretDefaultEdit(SEALED, edited[0].default)).toEqual({ action: 'keep', sealed: SEALED });
  });
});

test('codePointLength counts code points', () => {
  expect(codePointLength('')).toBe(0);
  expect(codePointLength('abc')).toBe(3);
  expect(codePointLength('日本語')).toBe(3);
  expect(codePointLength('😀')).toBe(1);
  expect('😀'.length).toBe(2);
});

describe('patterns run in linear time', () => {
  const elapsed = (fn: () => unknown) =>
    cpuTimed(() => {
      try {
        fn();
      } catch {
        // timing only
      }
    }).ms;

  test('(a+)+b against 31 characters answers at once, and so does it against a hundred thousand', () => {
    for (const length of [31, 100_000]) {
      const ms = elapsed(() => answerOne({ type: 'text', pattern: '(a+)+b' }, 'a'.repeat(length)));
      expect(ms).toBeLessThan(250);
      expect(surveyError(() => answerOne({ type: 'text', pattern: '(a+)+b' }, 'a'.repeat(length))).message).toMatch(/must match the pattern/);
    }
    expect(answerOne({ type: 'text', pattern: '(a+)+b' }, 'a'.repeat(30) + 'b').extraVars.v).toBe('a'.repeat(30) + 'b');
  });

  test('a default is checked the same way when the survey is saved', () => {
    const ms = elapsed(() => parseSurvey([{ var: 'x', type: 'text', pattern: '(a|aa)+c', default: 'a'.repeat(40) }]));
    expect(ms).toBeLessThan(250);
    expect(surveyError(() => parseSurvey([{ var: 'x', type: 'text', pattern: '(a|aa)+c', default: 'a'.repeat(40) }])).field).toBe('survey[0].default');
  });

  test('an answer too long to check against a large pattern in bounded time is refused, naming the most it may be', () => {
    // 1,005 compiled steps: at most 8,346 characters may be checked against it.
    const field = { type: 'text', pattern: '(?:a|b)*a(?:a|b){1000}' };
    let ms = 0;
    const err = surveyError(() => {
      const before = process.cpuUsage();
      try {
        answerOne(field, 'ab'.repeat(10_000));
      } finally {
        const used = process.cpuUsage(before);
        ms = (used.user + used.system) / 1000;
      }
    });
    expect(ms).toBeLessThan(250);
    expect(err.field).toBe('answers.v');
    expect(err.message).toMatch(/^answers\.v is too long to check against its pattern: at most \d+ characters/);
    expect(answerOne(field, 'a'.repeat(1001)).extraVars.v).toBe('a'.repeat(1001));
  });

  test('requireStoredPatterns refuses a stored survey whose pattern RE2 does not accept with 409 naming the field and the fix', () => {
    // Surveys saved before patterns were RE2 syntax are not parsed again; the launch checks them.
    const stored = [{ var: 'a', type: 'text', pattern: '[a-z]+' }, { var: 'b', type: 'secret', pattern: '(x)\\1' }] as never;
    let err: DomainError | undefined;
    try {
      requireStoredPatterns(stored);
    } catch (caught) {
      err = caught as DomainError;
    }
    expect(err).toBeInstanceOf(DomainError);
    expect(err!.code).toBe('conflict');
    expect(err!.details).toEqual({ field: 'survey[1].pattern' });
    expect(err!.message).toMatch(/^survey\[1\]\.pattern cannot be checked: the pattern must be RE2 syntax/);
    expect(err!.message).toMatch(/edit the template/);
    expect(() => requireStoredPatterns(parseSurvey([{ var: 'a', type: 'text', pattern: '[a-z]+' }]))).not.toThrow();
  });
});
