import { z } from 'zod';
import { gitUrlFault } from '../../core/project-paths';
import { namedId } from './access';
import { fitsBytes } from './common';

/**
 * The body of `POST /v1/projects` and `PUT /v1/projects/{id}` (spec part A 4.5). A PUT replaces
 * the project whole. The read-only fields of a read are accepted and ignored, so a read can be
 * sent back. `credential_id` names a source-control (`scm`) credential to clone with.
 */
const absent = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

export const projectInput = z
  .strictObject({
    name: z.string({ message: 'name is required and must be a string' }).min(1, 'name must not be empty').refine(fitsBytes(255), 'name must be at most 255 bytes'),
    url: z
      .string({ message: 'url is required and must be a string' })
      .refine(fitsBytes(2048), 'url must be at most 2048 bytes')
      .superRefine((value, ctx) => {
        const fault = gitUrlFault(value);
        if (fault) ctx.addIssue({ code: 'custom', message: fault });
      }),
    branch: absent(
      z
        .string({ message: 'branch must be a string' })
        .min(1, 'branch must not be empty')
        .refine(fitsBytes(255), 'branch must be at most 255 bytes')
        .refine((b) => !b.startsWith('-') && !/[\u0000-\u001f\u007f ~^:?*[\\]|\.\.|@\{/.test(b), 'branch is not a valid git ref name'),
    ),
    org_id: absent(namedId('org_id')),
    credential_id: absent(namedId('credential_id')),
    // Read-only fields of a read, ignored.
    id: z.unknown().optional(),
    status: z.unknown().optional(),
    commit: z.unknown().optional(),
    last_error: z.unknown().optional(),
    update_pending: z.unknown().optional(),
    last_updated_at: z.unknown().optional(),
    owner_id: z.unknown().optional(),
    created_by: z.unknown().optional(),
    created_at: z.unknown().optional(),
    updated_at: z.unknown().optional(),
  });

export type ProjectInput = z.output<typeof projectInput>;

/** `GET /v1/projects/{id}/files?path=` (optional: the root) and `GET /v1/projects/{id}/file?path=`. */
export const browseQuery = z.strictObject({
  path: z.string({ message: 'path must be a string' }).refine(fitsBytes(4096), 'path must be at most 4096 bytes').default(''),
});
