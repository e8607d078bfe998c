import { z } from 'zod';
import { namedId } from './access';
import { fitsBytes } from './common';

/**
 * Bodies of the credential and credential type routes (spec part A 2.9, 4.9). Which fields a kind
 * or type has, and which are required or secret, is checked by services/credentials.ts once the
 * kind is known. A read sent back is accepted: its read-only fields are ignored, and its
 * `[redacted]` secrets keep the stored ones.
 */

const name = z.string({ message: 'name is required and must be a string' }).min(1, 'name must not be empty').refine(fitsBytes(255), 'name must be at most 255 bytes');
const description = z.string({ message: 'description must be a string' }).refine(fitsBytes(2000), 'description must be at most 2000 bytes').nullable().optional();

const inputValue = z.union([z.string().refine(fitsBytes(64 * 1024), 'a value is at most 64 KiB'), z.number(), z.boolean(), z.null()], {
  message: 'a field value is a string, number, true, false or null',
});
const inputs = z.record(z.string(), inputValue, { message: 'inputs must be an object of field values' });

/** `POST` and `PUT /v1/credentials`. `fields` is another name for `inputs` (spec part A 2.9). */
export const credentialInput = z
  .strictObject({
    name,
    description,
    kind: z.string({ message: 'kind must be a string' }).nullable().optional(),
    type_id: namedId('type_id').nullable().optional(),
    inputs: inputs.nullable().optional(),
    fields: inputs.nullable().optional(),
    org_id: namedId('org_id').nullable().optional(),
    secret_sources: z
      .record(
        z.string(),
        z.strictObject({
          source: z.string({ message: 'source must be a string' }).min(1, 'source must not be empty').refine(fitsBytes(255), 'source must be at most 255 bytes'),
          ref: z.string({ message: 'ref must be a string' }).refine(fitsBytes(1024), 'ref must be at most 1024 bytes'),
        }),
        { message: 'secret_sources must be an object of field -> {source, ref}' },
      )
      .nullable()
      .optional(),
    // Read-only fields of a read, ignored.
    id: z.unknown().optional(),
    secrets_set: z.unknown().optional(),
    status: z.unknown().optional(),
    owner_id: z.unknown().optional(),
    created_by: z.unknown().optional(),
    created_at: z.unknown().optional(),
    updated_at: z.unknown().optional(),
  })
  .superRefine((input, ctx) => {
    if (input.inputs && input.fields) ctx.addIssue({ code: 'custom', path: ['fields'], message: 'send the values as inputs or as fields, not both' });
    if (input.type_id && input.kind && input.kind !== 'custom') {
      ctx.addIssue({ code: 'custom', path: ['kind'], message: 'a credential of a custom type (type_id) has kind custom or none' });
    }
  })
  .transform(({ fields, ...rest }) => ({ ...rest, inputs: rest.inputs ?? fields ?? null }));

export type CredentialInput = z.output<typeof credentialInput>;

const fieldDefinition = z.strictObject({
  id: z.string({ message: 'id is required and must be a string' }),
  label: z.string({ message: 'label must be a string' }).refine(fitsBytes(255), 'label must be at most 255 bytes').optional(),
  secret: z.boolean({ message: 'secret must be true or false' }).default(false),
  required: z.boolean({ message: 'required must be true or false' }).default(false),
  multiline: z.boolean({ message: 'multiline must be true or false' }).optional(),
  choices: z.array(z.string(), { message: 'choices must be a list of strings' }).max(100).optional(),
  help: z.string({ message: 'help must be a string' }).refine(fitsBytes(2000), 'help must be at most 2000 bytes').optional(),
});

const templates = (what: string) =>
  z.record(z.string(), z.string({ message: `each ${what} is a template string` }).refine(fitsBytes(64 * 1024), `a ${what} template is at most 64 KiB`), {
    message: `${what} must be an object of templates`,
  });

/** `POST /v1/credential-types` and `PUT /v1/credential-types/{id}` (a whole replacement). */
export const credentialTypeInput = z.strictObject({
  name,
  description,
  fields: z.array(fieldDefinition, { message: 'fields must be a list of field definitions' }).min(1, 'fields must define at least one field').max(50, 'fields holds at most 50 fields'),
  injectors: z
    .strictObject({ env: templates('env').optional(), extra_vars: templates('extra_vars').optional(), files: templates('files').optional() }, { message: 'injectors must be an object' })
    .default({}),
  // Read-only fields of a read, ignored.
  id: z.unknown().optional(),
  kind: z.unknown().optional(),
  created_by: z.unknown().optional(),
  created_at: z.unknown().optional(),
  updated_at: z.unknown().optional(),
});

export type CredentialTypeInput = z.output<typeof credentialTypeInput>;

/** Credential ids a template, run or launch names. */
export const credentialIds = (field: string) =>
  z.array(namedId(field), { message: `${field} must be a list of credential ids` }).max(20, `${field} names at most 20 credentials`);
