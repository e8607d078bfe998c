import { z } from 'zod';
import { INVENTORY_BODY_LIMIT } from '../../core/ansible/inventory';
import { namedId } from './access';
import { fitsBytes } from './common';
import { hostPatternCheck } from './run-fields';

/**
 * The body of `POST /v1/inventory-sources` and `PUT /v1/inventory-sources/{id}` (spec part A
 * 4.12): a PUT replaces the source whole. `kind` `script` takes `script` (at most 1 MiB);
 * `project_file` takes `project_id` and `path`. The read-only fields of a read are accepted and
 * ignored, so a read can be sent back (a below-admin read withholds the script: send it whole).
 */
const absent = <T extends z.ZodType>(schema: T) => schema.nullable().optional();
export const MAX_SCRIPT_BYTES = 1024 * 1024;
const SOURCE_KINDS = ['script', 'project_file'] as const;

export const inventorySourceInput = z.strictObject({
  inventory_id: namedId('inventory_id'),
  name: z.string({ message: 'name is required and must be a string' }).min(1, 'name must not be empty').refine(fitsBytes(255), 'name must be at most 255 bytes'),
  kind: z.enum(SOURCE_KINDS, { message: `kind must be one of ${SOURCE_KINDS.join(', ')}` }),
  script: absent(z.string({ message: 'script must be a string' }).min(1, 'script must not be empty').refine(fitsBytes(Math.min(MAX_SCRIPT_BYTES, INVENTORY_BODY_LIMIT)), `script must be at most ${MAX_SCRIPT_BYTES} bytes`)),
  project_id: absent(namedId('project_id')),
  path: absent(z.string({ message: 'path must be a string' }).min(1, 'path must not be empty').refine(fitsBytes(4096), 'path must be at most 4096 bytes')),
  timeout_seconds: absent(z.number({ message: 'timeout_seconds must be a whole number of seconds' }).int('timeout_seconds must be a whole number of seconds').min(1, 'timeout_seconds must be at least 1').max(3600, 'timeout_seconds must be at most 3600')),
  // Read-only fields of a read, ignored.
  id: z.unknown().optional(),
  status: z.unknown().optional(),
  last_error: z.unknown().optional(),
  last_refreshed_at: z.unknown().optional(),
  host_count: z.unknown().optional(),
  script_withheld: z.unknown().optional(),
  created_by: z.unknown().optional(),
  created_at: z.unknown().optional(),
  updated_at: z.unknown().optional(),
});

/**
 * `POST /v1/inventories/preview` of an unsaved composed inventory (spec part A 4.12): `smart`, a
 * host filter (an Ansible host pattern) over the hosts of `inputs`; `constructed`, Ansible's
 * `constructed` inventory plugin over `inputs` with `source_vars` as its options.
 */
const composedInputs = z
  .array(namedId('inputs[]'), { message: 'inputs must be a list of inventory ids' })
  .min(1, 'inputs must name at least one inventory')
  .max(20, 'inputs may name at most 20 inventories');
export const composedPreviewInput = z.discriminatedUnion(
  'kind',
  [
    z.strictObject({
      kind: z.literal('smart'),
      inputs: composedInputs,
      host_filter: z
        .string({ message: 'host_filter is required: an Ansible host pattern' })
        .min(1, 'host_filter must not be empty')
        .refine(fitsBytes(4096), 'host_filter must be at most 4096 bytes')
        .superRefine(hostPatternCheck('host_filter')),
    }),
    z.strictObject({
      kind: z.literal('constructed'),
      inputs: composedInputs,
      source_vars: z.record(z.string(), z.unknown(), { message: "source_vars must be an object: the constructed plugin's options" }).optional(),
    }),
  ],
  { message: 'kind must be smart or constructed' },
);
export type ComposedPreviewInput = z.output<typeof composedPreviewInput>;
