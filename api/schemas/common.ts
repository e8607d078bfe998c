import { z } from 'zod';

/** True when the text fits in `max` UTF-8 bytes: the spec bounds names and keys in bytes, not characters. */
export const fitsBytes = (max: number) => (value: string): boolean => Buffer.byteLength(value) <= max;

/**
 * The body of an action that takes no fields (cancel, rerun, a stream ticket, …): absent, or an
 * empty object. A key sent is refused by name, as every other body refuses an unknown key, so a
 * client that believes it is passing something learns that it is not.
 */
export const noFields = z.strictObject({}, { message: 'the body must be a JSON object with no fields, or absent' });
