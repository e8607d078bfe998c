/**
 * What a caller may be told went wrong: a code naming the kind of fault, a sentence the caller can
 * act on, optional details (such as the field at fault) that join the one JSON error shape
 * `{error, ...details}`, and headers the answer carries (a 429's `Retry-After`). Services throw
 * it and branch on its code; the HTTP status is the edge's reading of the code (statusOf), made
 * where an answer is written (api/middleware/errors.ts) or recorded (an audit entry's status).
 */
export type ErrorCode =
  | 'invalid'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'gone'
  | 'too_large'
  | 'unprocessable'
  | 'rate_limited'
  | 'bad_gateway'
  | 'unavailable';

const STATUS: Record<ErrorCode, number> = {
  invalid: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  gone: 410,
  too_large: 413,
  unprocessable: 422,
  rate_limited: 429,
  bad_gateway: 502,
  unavailable: 503,
};

/** The HTTP status an error of this code is answered with (spec part B 7). */
export const statusOf = (code: ErrorCode): number => STATUS[code];

export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export const badRequest = (message: string, details?: Record<string, unknown>) => new DomainError('invalid', message, details);
export const unauthorized = (message = 'a valid bearer token is required') => new DomainError('unauthorized', message);
export const forbidden = (message: string, details?: Record<string, unknown>) => new DomainError('forbidden', message, details);
export const notFound = (what: string) => new DomainError('not_found', `${what} not found`);
export const conflict = (message: string, details?: Record<string, unknown>) => new DomainError('conflict', message, details);
