/** True when the text fits in `max` UTF-8 bytes: the spec bounds names and keys in bytes, not characters. */
export const fitsBytes = (max: number) => (value: string): boolean => Buffer.byteLength(value) <= max;
