import type { ZodError } from 'zod';

/** An error with an HTTP status and a stable snake_case code; the only kind routes throw on purpose. */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: unknown = null,
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export const badRequest = (message: string, details: unknown = null) => new AppError(400, 'bad_request', message, details);
export const unauthorized = (message = 'Missing credentials') => new AppError(401, 'unauthorized', message);
export const forbidden = (message = 'Invalid credentials') => new AppError(403, 'forbidden', message);
export const notFound = (what = 'Resource') => new AppError(404, 'not_found', `${what} not found`);
export const conflict = (message: string, details: unknown = null) => new AppError(409, 'conflict', message, details);
export const unavailable = (message: string, details: unknown = null) => new AppError(503, 'dependency_unavailable', message, details);

/** A 400 whose details list each zod issue with its path. */
export function validationError(err: ZodError, where: string): AppError {
  const details = err.issues.map((i) => ({ path: [where, ...i.path.map(String)].join('.'), message: i.message, code: i.code }));
  return new AppError(400, 'validation_failed', `Invalid ${where}: ${details.map((d) => `${d.path}: ${d.message}`).join('; ')}`, details);
}
