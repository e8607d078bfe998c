import { z } from 'zod';

/**
 * `POST /v1/import/{format}`'s query: `apply=true` writes, anything else previews (spec part A
 * 4.14 rule 1); `name` names the inventory a fleet format makes. A fleet format takes no
 * `inventory` (rule 2): like any key the route does not know, it is a 400 naming it.
 */
export const importQuery = z.strictObject({
  apply: z.enum(['true', 'false'], { message: 'apply must be true or false' }).optional(),
  name: z.string({ message: 'name must be a string' }).trim().min(1, 'name must not be empty').max(255, 'name must be at most 255 characters').optional(),
});
