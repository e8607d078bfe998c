/**
 * An error a client may see: its status, a sentence the caller can act on, optional details (such
 * as the field at fault) that join the one JSON error shape `{error, ...details}`, and headers the
 * answer carries (a 429's `Retry-After`).
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly details: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export const badRequest = (message: string, details?: Record<string, unknown>) => new ApiError(400, message, details);
export const unauthorized = (message = 'a valid bearer token is required') => new ApiError(401, message);
export const forbidden = (message: string, details?: Record<string, unknown>) => new ApiError(403, message, details);
export const notFound = (what: string) => new ApiError(404, `${what} not found`);
export const conflict = (message: string, details?: Record<string, unknown>) => new ApiError(409, message, details);
