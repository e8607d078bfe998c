import { z } from 'zod';
import { ESTATE_PAGE_DEFAULT, ESTATE_PAGE_MAX } from '../../core/ansible/estate';
import { pageQuery } from '../paging';
import { storableTime } from '../validate';

/** `GET /v1/estate`: `at` (RFC 3339, default now), and a page of hosts. */
export const estateQuery = z.strictObject({
  at: storableTime('at').optional(),
  ...pageQuery(ESTATE_PAGE_DEFAULT, ESTATE_PAGE_MAX),
});

/** `GET /v1/estate/diff`: `from` (required), `to` (default now), `from` not after `to`; a page of listed hosts. */
export const estateDiffQuery = z
  .strictObject({
    from: storableTime('from').optional(),
    to: storableTime('to').optional(),
    ...pageQuery(ESTATE_PAGE_DEFAULT, ESTATE_PAGE_MAX),
  })
  .superRefine((input, ctx) => {
    if (input.from === undefined) ctx.addIssue({ code: 'custom', path: ['from'], message: 'from is required: the instant the diff starts from (RFC 3339)' });
    else if (input.to !== undefined && input.from.getTime() > input.to.getTime()) ctx.addIssue({ code: 'custom', path: ['from'], message: 'from must not be after to' });
  });

/** `GET /v1/changes`: no query. */
export const changesQuery = z.strictObject({});
