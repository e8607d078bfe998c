import { builtInKind } from '../credentials/credential-kinds';

/**
 * Value readers the import formats share: variables given as JSON or YAML text, and a
 * credential's non-secret inputs for a built-in kind.
 */

/** The mask other systems export in place of a secret. */
export const EXPORTED_SECRET = '$encrypted$';

/**
 * Variables given as an object, JSON text, or YAML text of flat `key: scalar` lines (the usual
 * shape of extra vars). Anything else (nested YAML) is not read: `undefined` says so and the
 * caller notes it. Blank text, `---` or `{}` is none (null).
 */
export function varsOf(value: unknown): Record<string, unknown> | null | undefined {
  if (value === undefined || value === null) return null;
  if (typeof value === 'object' && !Array.isArray(value)) return Object.keys(value).length ? (value as Record<string, unknown>) : null;
  if (typeof value !== 'string') return undefined;
  const text = value.replace(/^---\s*$/m, '').trim();
  if (text === '' || text === '{}') return null;
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    // Not JSON: flat YAML lines.
  }
  const vars: Record<string, unknown> = {};
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.trim().startsWith('#')) continue;
    const match = /^([A-Za-z_][A-Za-z0-9_]*):\s*(.*)$/.exec(line);
    if (!match || match[2] === '') return undefined;
    vars[match[1]] = yamlScalar(match[2].trim());
  }
  return Object.keys(vars).length ? vars : null;
}

function yamlScalar(text: string): unknown {
  if (/^".*"$/.test(text)) {
    try {
      return JSON.parse(text);
    } catch {
      return text.slice(1, -1);
    }
  }
  if (/^'.*'$/.test(text)) return text.slice(1, -1).replace(/''/g, "'");
  if (/^(true|yes)$/i.test(text)) return true;
  if (/^(false|no)$/i.test(text)) return false;
  if (/^-?\d+(\.\d+)?$/.test(text)) return Number(text);
  if (text === '~' || text === 'null') return null;
  return text;
}

/**
 * Variables as a YAML block indented under a key of a YAML inventory: JSON or block YAML text is
 * valid there once indented. Blank is `{}`.
 */
export function indentedVars(value: unknown, indent: string): string {
  let text = typeof value === 'string' ? value : value && typeof value === 'object' && Object.keys(value).length ? JSON.stringify(value) : '';
  text = text.replace(/^---\s*$/m, '').trim();
  if (text === '' || text === '{}') return ' {}';
  return '\n' + text.split('\n').map((line) => indent + line).join('\n');
}

/** A name as a YAML key, quoted. */
export const yamlKey = (name: string) => JSON.stringify(name);

/**
 * A credential's inputs as Cairn keeps them for `kind`: the non-secret fields the kind has, never
 * a secret (an imported credential waits for its secret, spec part A 2.9 rule 5). Returns what is
 * kept, what was dropped, and a required non-secret field that is missing, if any.
 */
export function credentialInputs(kind: string, given: Record<string, unknown>): { inputs: Record<string, string>; dropped: string[]; missing: string | null } {
  const definition = builtInKind(kind);
  const inputs: Record<string, string> = {};
  const dropped: string[] = [];
  if (!definition) return { inputs, dropped: Object.keys(given), missing: null };
  for (const [name, value] of Object.entries(given)) {
    const field = definition.fields.find((f) => f.id === name);
    if (!field || field.secret || value === EXPORTED_SECRET) {
      if (field && !field.secret && value === EXPORTED_SECRET) dropped.push(name);
      else if (!field) dropped.push(name);
      continue;
    }
    if (value === null || value === undefined || value === '') continue;
    if (field.choices && !field.choices.includes(String(value))) {
      dropped.push(name);
      continue;
    }
    inputs[name] = String(value);
  }
  const missing = definition.fields.find((f) => f.required && !f.secret && inputs[f.id] === undefined)?.id ?? null;
  return { inputs, dropped, missing };
}
