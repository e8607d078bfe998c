import { writeOnlyEdit } from '../credentials/write-only';
import { RE2JS } from 're2js';
import { z } from 'zod';
import { DomainError, conflict } from '../errors';

/**
 * Survey definitions and launch answers (spec part A 2.4). Pure: the caller stores the survey,
 * seals secret answers and defaults (core/seal.ts) and turns a `SurveyError` into its response.
 *
 * Decisions where the spec is silent:
 * - A `var` is a letter or underscore followed by letters, digits and underscores (ASCII), the
 *   same shape tools/extra-vars.ts passes to script tools as a variable and a valid Ansible
 *   variable name. `__proto__` is refused so an answer can never reach an object's prototype.
 * - Lengths (`min_length`, `max_length`) count Unicode code points, so "日本" is 2 and an emoji
 *   is 1, whatever its UTF-16 length.
 * - `pattern` is RE2 syntax, run by re2js (a linear-time engine with RE2 semantics): no
 *   backtracking, so no pattern can make an answer's check take exponential time. Backreferences,
 *   lookaround and possessive quantifiers do not exist in RE2 and are refused when the survey is
 *   saved. The whole answer must match: the pattern is compiled on its own and the engine matches
 *   it against the entire answer (never text pasted around it), so a pattern such as `a)|(?:b`
 *   is a syntax error rather than a way out of the anchoring. RE2's defaults: `.` is one code
 *   point (consistent with the length count) and does not match a newline (`(?s)` or `[\s\S]` for
 *   that), `^` and `$` are the ends of the answer unless the pattern says `(?m)`, and `\d`, `\w`,
 *   `\s` are ASCII (`\pL`, `\p{Greek}` are Unicode). A lone surrogate is one code point too.
 * - Linear is not free: checking takes time in proportion to the answer's length times the
 *   pattern's compiled size. So a pattern is at most 4096 characters and compiles to at most
 *   10,000 steps, and an answer (or default) is checked against a pattern only while its code
 *   points times the pattern's compiled size stay within 2^23 (about a tenth of a second at worst);
 *   a longer one is refused naming the most that pattern can check. A small pattern checks any
 *   answer the 1 MiB body limit lets through.
 * - A survey stored before patterns were RE2 syntax is not rewritten: a launch of it is refused
 *   with 409 naming `survey[i].pattern` until the template is edited (`requireStoredPatterns`).
 * - `min` and `max` are any finite numbers, inclusive (the spec says "number"); an `int` answer
 *   or default must be a JSON number that is a safe integer (`"5"` and `5.5` are refused).
 * - `text` is a single line: no line feed or carriage return. `multiline` may hold either.
 * - Only absence means "not answered": an answer of `""` is checked like any other string, and
 *   `null` is refused rather than read as unanswered.
 * - A secret field's `default` of `[redacted]` (the mask a read shows) or `""` (clear) is an
 *   edit instruction for `mergeSecretDefaultEdit`, so it is not held to the field's constraints;
 *   any other secret default is.
 * - Error messages name the field and the constraint and never repeat an answer or a default, so
 *   a secret never reaches a response or a log through them.
 */

export const SURVEY_TYPES = ['text', 'multiline', 'secret', 'int', 'choice', 'bool'] as const;
export type SurveyType = (typeof SURVEY_TYPES)[number];

export const SURVEY_TYPE_ALIASES: Readonly<Record<string, SurveyType>> = Object.freeze({
  integer: 'int',
  boolean: 'bool',
  string: 'text',
  textarea: 'multiline',
  password: 'secret',
});

/** What every read shows in place of a secret field's default. */
export const REDACTED = '[redacted]';

/** A survey definition or launch answer at fault: a 400 naming the field. */
export class SurveyError extends DomainError {
  override readonly name = 'SurveyError';
  constructor(
    /** The field at fault, such as `survey[2].pattern` or `answers.batch_size`. */
    readonly field: string,
    message: string,
  ) {
    super('invalid', message, { field });
  }
}

interface SurveyFieldBase {
  var: string;
  label?: string;
  required?: boolean;
  help?: string;
}
export interface TextSurveyField extends SurveyFieldBase {
  type: 'text' | 'multiline' | 'secret';
  default?: string;
  min_length?: number;
  max_length?: number;
  pattern?: string;
}
export interface IntSurveyField extends SurveyFieldBase {
  type: 'int';
  default?: number;
  min?: number;
  max?: number;
}
export interface ChoiceSurveyField extends SurveyFieldBase {
  type: 'choice';
  choices: string[];
  default?: string;
}
export interface BoolSurveyField extends SurveyFieldBase {
  type: 'bool';
  default?: boolean;
}
export type SurveyField = TextSurveyField | IntSurveyField | ChoiceSurveyField | BoolSurveyField;

export const SURVEY_VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const FIELD_KEYS = ['var', 'type', 'label', 'required', 'default', 'help', 'min', 'max', 'min_length', 'max_length', 'pattern', 'choices'] as const;
type FieldKey = (typeof FIELD_KEYS)[number];

/** The keys beyond those every type takes, and which types take them. */
const TYPE_KEYS: Record<SurveyType, readonly FieldKey[]> = {
  text: ['min_length', 'max_length', 'pattern'],
  multiline: ['min_length', 'max_length', 'pattern'],
  secret: ['min_length', 'max_length', 'pattern'],
  int: ['min', 'max'],
  choice: ['choices'],
  bool: [],
};
const COMMON_KEYS: readonly FieldKey[] = ['var', 'type', 'label', 'required', 'default', 'help'];
const APPLIES_TO: Partial<Record<FieldKey, string>> = {
  min: 'int fields',
  max: 'int fields',
  min_length: 'text, multiline and secret fields',
  max_length: 'text, multiline and secret fields',
  pattern: 'text, multiline and secret fields',
  choices: 'choice fields',
};

const TYPE_NAMES = [...SURVEY_TYPES, ...Object.keys(SURVEY_TYPE_ALIASES)] as [string, ...string[]];

const message = (missing: string, wrong: string) => ({
  error: (issue: { input?: unknown }) => (issue.input === undefined ? missing : wrong),
});

const lengthBound = z.int(message('', 'must be a whole number of characters, 0 or more')).min(0, 'must be 0 or more');
const numberBound = z.number(message('', 'must be a finite number'));

const fieldSchema = z.strictObject(
  {
    var: z
      .string(message('is required', 'must be a string'))
      .regex(SURVEY_VAR_NAME, 'must be a variable name: letters, digits and underscores, not starting with a digit')
      .refine((name) => name !== '__proto__', 'must not be __proto__'),
    type: z.enum(TYPE_NAMES, message('is required', `must be one of ${SURVEY_TYPES.join(', ')} (or an alias: ${Object.keys(SURVEY_TYPE_ALIASES).join(', ')})`)),
    label: z.string(message('', 'must be a string')).optional(),
    required: z.boolean(message('', 'must be true or false')).optional(),
    default: z.unknown().optional(),
    help: z.string(message('', 'must be a string')).optional(),
    min: numberBound.optional(),
    max: numberBound.optional(),
    min_length: lengthBound.optional(),
    max_length: lengthBound.optional(),
    pattern: z.string(message('', 'must be a string')).optional(),
    choices: z.array(z.string(message('', 'must be a string')), message('', 'must be a list of strings')).optional(),
  },
  message('must be an object', 'must be an object'),
);

const surveySchema = z.array(z.unknown(), message('must be a list of fields', 'must be a list of fields'));

function pathOf(prefix: string, path: readonly PropertyKey[]): string {
  return path.reduce<string>((acc, key) => (typeof key === 'number' ? `${acc}[${key}]` : `${acc}.${String(key)}`), prefix);
}

function firstIssue(prefix: string, error: z.ZodError): SurveyError {
  const issue = error.issues[0];
  if (issue.code === 'unrecognized_keys') {
    const field = pathOf(prefix, [...issue.path, issue.keys[0]]);
    return new SurveyError(field, `${field} is not a survey field key (a field takes ${FIELD_KEYS.join(', ')})`);
  }
  const field = pathOf(prefix, issue.path);
  return new SurveyError(field, `${field} ${issue.message}`);
}

/** Counts Unicode code points, the length every survey bound uses. */
export function codePointLength(text: string): number {
  let count = 0;
  for (const _ of text) count++;
  return count;
}

/** The longest pattern a survey takes, in code points. */
export const MAX_PATTERN_LENGTH = 4096;
/** The largest compiled pattern a survey takes, in RE2 program steps. */
export const MAX_PATTERN_STEPS = 10_000;
/** Code points times compiled steps: the most work one pattern check may take (about 0.1 s at worst). */
export const PATTERN_CHECK_BUDGET = 2 ** 23;

interface CompiledPattern {
  regexp: RE2JS;
  steps: number;
}

/** Compiled patterns by source, so a launch does not compile its survey's patterns again; bounded. */
const compiled = new Map<string, CompiledPattern>();
const COMPILED_KEPT = 256;

/**
 * Compiles a pattern as RE2 syntax within the size limits, or says why it cannot be: the reason
 * is RE2's own message (it quotes the offending part of the pattern, never an answer).
 */
function compilePattern(pattern: string): CompiledPattern | { problem: string } {
  const cached = compiled.get(pattern);
  if (cached) return cached;
  if (codePointLength(pattern) > MAX_PATTERN_LENGTH) return { problem: `must be at most ${MAX_PATTERN_LENGTH} characters` };
  let regexp: RE2JS;
  try {
    regexp = RE2JS.compile(pattern);
  } catch (err) {
    const why = err instanceof Error ? err.message.replace(/^error parsing regexp: /, '') : String(err);
    return { problem: `must be RE2 syntax (https://github.com/google/re2/wiki/Syntax): ${why}` };
  }
  const steps: number = regexp.re2().prog.numInst();
  if (steps > MAX_PATTERN_STEPS) {
    return { problem: `is too large: it compiles to ${steps} steps and a survey pattern may take at most ${MAX_PATTERN_STEPS}; use smaller repeat counts` };
  }
  const entry = { regexp, steps };
  if (compiled.size >= COMPILED_KEPT) compiled.delete(compiled.keys().next().value!);
  compiled.set(pattern, entry);
  return entry;
}

/**
 * Whether `value` (of `length` code points) matches `pattern` whole. A pattern that does not
 * compile was refused when saved, and a stored one is checked at launch (`requireStoredPatterns`)
 * before any answer, so reaching one here is a fault. Refuses, naming `path`, a value too long to
 * check within the work budget.
 */
function matchesWhole(pattern: string, value: string, length: number, path: string): boolean {
  const entry = compilePattern(pattern);
  if ('problem' in entry) throw new Error(`survey pattern not checked before use: ${entry.problem}`);
  const most = Math.floor(PATTERN_CHECK_BUDGET / entry.steps);
  if (length > most) throw new SurveyError(path, `${path} is too long to check against its pattern: at most ${most} characters for this pattern`);
  return entry.regexp.testExact(value);
}

/**
 * Refuses a stored survey whose pattern this server no longer accepts (one saved before patterns
 * were RE2 syntax): 409 naming `survey[i].pattern` and the fix. The launch calls it before any
 * answer is checked.
 */
export function requireStoredPatterns(fields: readonly SurveyField[], templateId = '{id}'): void {
  fields.forEach((field, i) => {
    const pattern = (field as TextSurveyField).pattern;
    if (pattern === undefined) return;
    const entry = compilePattern(pattern);
    if (!('problem' in entry)) return;
    const at = `survey[${i}].pattern`;
    throw conflict(
      `${at} cannot be checked: the pattern ${entry.problem}. It was saved before survey patterns were RE2 syntax; ` +
        `edit the template (PUT /v1/templates/${templateId}) to rewrite the pattern in RE2 syntax, then launch again`,
      { field: at },
    );
  });
}

/**
 * Checks one value (an answer, or a default) against its field. `path` names it in the error;
 * the value itself is never put into a message.
 */
function checkValue(field: SurveyField, value: unknown, path: string): void {
  switch (field.type) {
    case 'int': {
      if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw new SurveyError(path, `${path} must be an integer (a JSON number, not a string)`);
      if (field.min !== undefined && value < field.min) throw new SurveyError(path, `${path} must be at least ${field.min}`);
      if (field.max !== undefined && value > field.max) throw new SurveyError(path, `${path} must be at most ${field.max}`);
      return;
    }
    case 'bool':
      if (typeof value !== 'boolean') throw new SurveyError(path, `${path} must be true or false`);
      return;
    case 'choice':
      if (typeof value !== 'string' || !field.choices.includes(value)) {
        throw new SurveyError(path, `${path} must be one of the choices: ${field.choices.map((c) => JSON.stringify(c)).join(', ')}`);
      }
      return;
    case 'text':
    case 'multiline':
    case 'secret': {
      if (typeof value !== 'string') throw new SurveyError(path, `${path} must be a string`);
      if (field.type === 'text' && /[\r\n]/.test(value)) throw new SurveyError(path, `${path} must be a single line (a text field takes no line breaks; use multiline)`);
      const length = codePointLength(value);
      if (field.min_length !== undefined && length < field.min_length) {
        throw new SurveyError(path, `${path} must be at least ${field.min_length} characters long`);
      }
      if (field.max_length !== undefined && length > field.max_length) {
        throw new SurveyError(path, `${path} must be at most ${field.max_length} characters long`);
      }
      if (field.pattern !== undefined && !matchesWhole(field.pattern, value, length, path)) {
        throw new SurveyError(path, `${path} must match the pattern ${field.pattern} as a whole`);
      }
      return;
    }
  }
}

/**
 * Decodes a survey definition strictly: a list of fields, types normalized from their aliases.
 * Throws `SurveyError` naming the first fault, such as `survey[2].pattern`.
 */
export function parseSurvey(input: unknown): SurveyField[] {
  const list = surveySchema.safeParse(input);
  if (!list.success) throw new SurveyError('survey', 'survey must be a list of fields');

  const fields: SurveyField[] = [];
  const seen = new Map<string, number>();
  list.data.forEach((raw, i) => {
    const at = `survey[${i}]`;
    const parsed = fieldSchema.safeParse(raw);
    if (!parsed.success) throw firstIssue(at, parsed.error);
    const data = parsed.data;
    const type = (SURVEY_TYPE_ALIASES[data.type] ?? data.type) as SurveyType;

    // A key that does not apply to the type is refused, not ignored.
    const allowed = new Set<FieldKey>([...COMMON_KEYS, ...TYPE_KEYS[type]]);
    for (const key of FIELD_KEYS) {
      if (data[key] !== undefined && !allowed.has(key)) {
        throw new SurveyError(`${at}.${key}`, `${at}.${key} does not apply to a field of type ${type}; it is for ${APPLIES_TO[key]}`);
      }
    }

    const earlier = seen.get(data.var);
    if (earlier !== undefined) {
      throw new SurveyError(`${at}.var`, `${at}.var repeats the var ${data.var} of survey[${earlier}]; each var must be unique`);
    }
    seen.set(data.var, i);

    if (data.min !== undefined && data.max !== undefined && data.min > data.max) {
      throw new SurveyError(`${at}.max`, `${at}.max must not be below ${at}.min`);
    }
    if (data.min_length !== undefined && data.max_length !== undefined && data.min_length > data.max_length) {
      throw new SurveyError(`${at}.max_length`, `${at}.max_length must not be below ${at}.min_length`);
    }
    if (data.pattern !== undefined) {
      const entry = compilePattern(data.pattern);
      if ('problem' in entry) throw new SurveyError(`${at}.pattern`, `${at}.pattern ${entry.problem}`);
    }
    if (type === 'choice') {
      if (data.choices === undefined) throw new SurveyError(`${at}.choices`, `${at}.choices is required for a choice field`);
      if (data.choices.length === 0) throw new SurveyError(`${at}.choices`, `${at}.choices must not be empty`);
      const firstAt = new Map<string, number>();
      data.choices.forEach((choice, j) => {
        const before = firstAt.get(choice);
        if (before !== undefined) {
          throw new SurveyError(`${at}.choices[${j}]`, `${at}.choices[${j}] repeats ${at}.choices[${before}]; choices must be unique`);
        }
        firstAt.set(choice, j);
      });
    }

    const field = { ...data, type } as SurveyField;
    if (data.default !== undefined) {
      const editInstruction = type === 'secret' && (data.default === REDACTED || data.default === '');
      if (!editInstruction) checkValue(field, data.default, `${at}.default`);
    }
    fields.push(field);
  });
  return fields;
}

export interface CheckAnswersOptions {
  /** The vars of secret fields that have a stored sealed default. */
  secretDefaults?: Iterable<string>;
}

export interface CheckedAnswers {
  /** The answers and non-secret defaults, by var, ready to become extra vars. */
  extraVars: Record<string, unknown>;
  /** Secret fields left unanswered whose sealed default the caller fills in (never opened here). */
  secretVars: string[];
}

/**
 * Checks launch answers against the survey (spec part A 2.4 rules 1 and 2) before any answer
 * becomes an extra var. An absent `answers` is an empty one. A missing answer takes the field's
 * default; a secret field's default is never read here (stored sealed, it is reported in
 * `secretVars` when `secretDefaults` names it). Throws `SurveyError` naming the first fault, as
 * `answers.<var>`; the message never holds an answer's value.
 *
 * A secret field that was answered is in `extraVars` like any other; the caller seals it before
 * storage (see `secretFieldVars`).
 */
export function checkAnswers(fields: readonly SurveyField[], answers: unknown, options: CheckAnswersOptions = {}): CheckedAnswers {
  if (answers === undefined) answers = {};
  if (answers === null || typeof answers !== 'object' || Array.isArray(answers)) {
    throw new SurveyError('answers', "answers must be an object keyed by each survey field's var");
  }
  const given = answers as Record<string, unknown>;
  const vars = new Set(fields.map((field) => field.var));
  for (const key of Object.keys(given)) {
    if (!vars.has(key)) throw new SurveyError(`answers.${key}`, `answers.${key} is not a question of this survey`);
  }

  const sealed = new Set(options.secretDefaults ?? []);
  const entries: [string, unknown][] = [];
  const secretVars: string[] = [];
  for (const field of fields) {
    const path = `answers.${field.var}`;
    if (Object.prototype.hasOwnProperty.call(given, field.var)) {
      const value = given[field.var];
      checkValue(field, value, path);
      entries.push([field.var, value]);
      continue;
    }
    if (field.type === 'secret') {
      if (sealed.has(field.var)) secretVars.push(field.var);
      else if (field.required) throw new SurveyError(path, `${path} is required and has no default`);
      continue;
    }
    if (field.default !== undefined) entries.push([field.var, field.default]);
    else if (field.required) throw new SurveyError(path, `${path} is required and has no default`);
  }
  // fromEntries defines own properties, whatever the key.
  return { extraVars: Object.fromEntries(entries), secretVars };
}

/**
 * The vars of required fields a launch without answers cannot fill: no default, or for a secret
 * field no stored sealed default. An unattended launch is refused naming these (spec part A 2.4
 * rules 5 and 6, `{questions}`); empty when the survey can be answered unattended.
 */
export function unansweredRequired(fields: readonly SurveyField[], options: CheckAnswersOptions = {}): string[] {
  const sealed = new Set(options.secretDefaults ?? []);
  return fields
    .filter((field) => field.required && (field.type === 'secret' ? !sealed.has(field.var) : field.default === undefined))
    .map((field) => field.var);
}

/** The vars whose answers are secret and must be sealed before storage. */
export function secretFieldVars(fields: readonly SurveyField[]): string[] {
  return fields.filter((field) => field.type === 'secret').map((field) => field.var);
}

/**
 * The survey as every read shows it, an admin's included: a secret field's default is
 * `[redacted]` when it has one (a non-empty default in `fields`, or a sealed default named in
 * `secretDefaults`) and absent otherwise. Returns copies; `fields` is not changed.
 */
export function redactSurvey(fields: readonly SurveyField[], options: CheckAnswersOptions = {}): SurveyField[] {
  const sealed = new Set(options.secretDefaults ?? []);
  return fields.map((field) => {
    if (field.type !== 'secret') return { ...field };
    const { default: stored, ...rest } = field;
    const hasDefault = (stored !== undefined && stored !== '') || sealed.has(field.var);
    return hasDefault ? { ...rest, default: REDACTED } : rest;
  });
}

/** What an edit does to a secret field's stored sealed default. */
export type SecretDefaultEdit =
  /** The mask came back unchanged: keep the stored sealed default as it is. */
  | { action: 'keep'; sealed: string }
  /** A new value: the caller seals `plaintext` and stores it in place of the old one. */
  | { action: 'replace'; plaintext: string }
  /** An empty string, or no default at all: the field has no default from now on. */
  | { action: 'clear' };

/**
 * The edit rule for a secret field's default (spec part A 2.4 rule 3): `[redacted]` keeps the
 * stored sealed default, a new string replaces it, and an empty string clears it. A survey is
 * replaced whole on edit, so an omitted default also clears. Sending the mask for a field with no
 * stored default is refused (there is nothing to keep, and storing the mask itself as the secret
 * would surprise), naming `field`.
 */
export function mergeSecretDefaultEdit(previousDefaultSealed: string | undefined, incoming: unknown, field = 'default'): SecretDefaultEdit {
  if (incoming !== undefined && typeof incoming !== 'string') throw new SurveyError(field, `${field} must be a string`);
  return writeOnlyEdit(incoming, previousDefaultSealed, SURVEY_DEFAULT_MEANINGS, () => {
    throw new SurveyError(field, `${field} is ${REDACTED}, which keeps a stored secret default, but this field has none; send the value, or omit it`);
  });
}

/** A secret default: the mask keeps it; an empty string, or none sent (a survey is replaced whole), clears it. */
const SURVEY_DEFAULT_MEANINGS = { keeps: (v: unknown) => v === REDACTED, clears: (v: unknown) => v === undefined || v === '' };
