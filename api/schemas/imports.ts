import { z } from 'zod';

/** `POST /v1/import/{format}`'s query: `apply=true` writes, anything else previews (spec part A 4.14 rule 1). */
export const importQuery = z.strictObject({
  apply: z.enum(['true', 'false'], { message: 'apply must be true or false' }).optional(),
});
