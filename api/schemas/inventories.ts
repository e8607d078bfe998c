import { z } from 'zod';
import { INVENTORY_FORMATS } from '../../core/ansible/inventory';
import { namedId } from './access';
import { fitsBytes } from './common';
import { composedPreviewInput } from './inventory-sources';
import { ansibleFields, queue } from './run-fields';

/**
 * The body of `POST /v1/inventories` and `PUT /v1/inventories/{id}` (spec part A 4.12): a PUT
 * replaces the inventory whole. `format` is `ini` or `yaml`, read from the content when omitted.
 * The read-only fields of a read are accepted and ignored, so a read can be sent back; its masked
 * content cannot: `content` must be sent whole.
 */
const absent = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

export const inventoryInput = z.strictObject({
  name: z.string({ message: 'name is required and must be a string' }).min(1, 'name must not be empty').refine(fitsBytes(255), 'name must be at most 255 bytes'),
  content: z.string({ message: 'content is required and must be a string' }),
  format: absent(z.enum(INVENTORY_FORMATS, { message: `format must be one of ${INVENTORY_FORMATS.join(', ')}` })),
  kind: absent(z.literal('static', { message: 'kind must be static: stored inventories hold their content' })),
  org_id: absent(namedId('org_id')),
  // The worker queue a run over it executes on when it names none (Team tier, spec part A 1.2).
  queue: absent(queue),
  // Read-only fields of a read, ignored.
  id: z.unknown().optional(),
  owner_id: z.unknown().optional(),
  size_bytes: z.unknown().optional(),
  host_count: z.unknown().optional(),
  content_masked: z.unknown().optional(),
  created_by: z.unknown().optional(),
  created_at: z.unknown().optional(),
  updated_at: z.unknown().optional(),
});

export type InventoryInput = z.output<typeof inventoryInput>;

/**
 * The body of `POST /v1/inventories` and `PUT /v1/inventories/{id}` for a smart or constructed
 * inventory (spec part A 4.12): `kind`, `inputs` and `host_filter` or `source_vars` as a preview
 * takes them (api/schemas/inventory-sources.ts), with `name` and `org_id`. The read-only fields of
 * a read are accepted and ignored.
 */
const savedFields = {
  name: inventoryInput.shape.name,
  org_id: inventoryInput.shape.org_id,
  queue: inventoryInput.shape.queue,
  id: z.unknown().optional(),
  owner_id: z.unknown().optional(),
  format: z.unknown().optional(),
  content: z.unknown().optional(),
  size_bytes: z.unknown().optional(),
  host_count: z.unknown().optional(),
  content_masked: z.unknown().optional(),
  created_by: z.unknown().optional(),
  created_at: z.unknown().optional(),
  updated_at: z.unknown().optional(),
};
export const composedInventoryInput = z.discriminatedUnion(
  'kind',
  [composedPreviewInput.options[0].extend(savedFields), composedPreviewInput.options[1].extend({ ...savedFields, source_vars: composedPreviewInput.options[1].shape.source_vars.nullable() })],
  { message: 'kind must be static, smart or constructed' },
);
export type ComposedInventoryInput = z.output<typeof composedInventoryInput>;

/** `POST /v1/inventories/preview`: unsaved content, and the limit a launch would apply. */
export const previewInput = z.strictObject({
  content: z.string({ message: 'content is required and must be a string' }),
  format: absent(z.enum(INVENTORY_FORMATS, { message: `format must be one of ${INVENTORY_FORMATS.join(', ')}` })),
  limit: absent(ansibleFields.limit),
});

/** `POST /v1/inventories/{id}/preview`: the limit a launch would apply. */
export const storedPreviewInput = z.strictObject({ limit: absent(ansibleFields.limit) });
