import { z } from 'zod';

/**
 * `POST /v1/import/{format}`'s query: `apply=true` writes, anything else previews (spec part A
 * 4.14 rule 1); `name` names the inventory a fleet format makes, or the job of a single Jenkins
 * config.xml; `inventory` names the inventory whose hosts the jobs of `jobsched` and `ciserver`
 * target (rule 2). Another format given `inventory` (a fleet format brings its own) is refused
 * by services/imports.ts naming it; any other key is a 400 naming it.
 */
export const importQuery = z.strictObject({
  apply: z.enum(['true', 'false'], { message: 'apply must be true or false' }).optional(),
  inventory: z.string({ message: 'inventory must be a string' }).trim().min(1, 'inventory must not be empty').max(512, 'inventory must be at most 512 characters').optional(),
  name: z.string({ message: 'name must be a string' }).trim().min(1, 'name must not be empty').max(255, 'name must be at most 255 characters').optional(),
});
