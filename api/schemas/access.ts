import { z } from 'zod';
import { PERMISSIONS } from '../../core/access/access';
import { fitsBytes } from './common';

/** An id a grant or membership names: at most 512 bytes (spec part B 8). */
export const namedId = (field: string) =>
  z
    .string({ message: `${field} must be a string` })
    .min(1, `${field} must not be empty`)
    .refine(fitsBytes(512), `${field} must be at most 512 bytes`);

/** `POST /v1/teams`, `POST /v1/orgs`. */
export const groupInput = z.strictObject({
  name: z.string({ message: 'name is required and must be a string' }).min(1, 'name must not be empty').refine(fitsBytes(255), 'name must be at most 255 bytes'),
});

/** `POST /v1/teams/{id}/members`. */
export const teamMemberInput = z.strictObject({ user_id: namedId('user_id') });

/** `POST /v1/orgs/{id}/members`: the organization role defaults to `member`. */
export const orgMemberInput = z.strictObject({
  user_id: namedId('user_id'),
  role: z.enum(['admin', 'member'], { message: 'role must be admin or member' }).optional(),
});

/** `POST /v1/grants`: a permission on one object to exactly one account or team. */
export const grantInput = z
  .strictObject({
    object: namedId('object'),
    permission: z.enum(PERMISSIONS, { message: `permission must be ${PERMISSIONS.join(', ')}` }),
    user_id: namedId('user_id').optional(),
    team_id: namedId('team_id').optional(),
  })
  .refine((input) => (input.user_id === undefined) !== (input.team_id === undefined), {
    message: 'a grant is to exactly one of user_id and team_id',
    path: ['user_id'],
  });
