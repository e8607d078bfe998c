import { z } from 'zod';
import { BLOCKERS } from '../../core/runs/attention';
import { pageQuery } from '../paging';

/** `GET /v1/attention`'s query (spec part A 4.2): a page, and optionally one blocker's items. */
export const attentionQuery = z.strictObject({
  ...pageQuery(200, 1000),
  blocker: z.enum(BLOCKERS, { message: `blocker must be one of ${BLOCKERS.join(', ')}` }).optional(),
});
