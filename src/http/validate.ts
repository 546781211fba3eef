import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { z } from 'zod';
import { validationError } from '../errors';

type Schemas = { body?: z.ZodType; query?: z.ZodType; params?: z.ZodType };
type Out<S, K extends keyof Schemas> = S extends Record<K, infer T> ? (T extends z.ZodType ? z.infer<T> : undefined) : undefined;
export type Input<S extends Schemas> = { body: Out<S, 'body'>; query: Out<S, 'query'>; params: Out<S, 'params'> };

/**
 * The one validation middleware: parses body/query/params with zod (400 with the zod paths on
 * failure, before anything changes), then calls the handler with typed input. A returned value
 * is sent as JSON; handlers that stream or set a status themselves return undefined.
 */
export function handle<S extends Schemas>(
  schemas: S,
  fn: (input: Input<S>, req: Request, res: Response) => unknown | Promise<unknown>,
): RequestHandler {
  return async (req: Request, res: Response, next: NextFunction) => {
    try {
      const input: Record<string, unknown> = {};
      for (const where of ['params', 'query', 'body'] as const) {
        const schema = schemas[where];
        if (!schema) continue;
        const raw = where === 'body' ? (req.body ?? {}) : req[where];
        const r = schema.safeParse(raw);
        if (!r.success) throw validationError(r.error, where);
        input[where] = r.data;
      }
      const out = await fn(input as Input<S>, req, res);
      if (out !== undefined && !res.headersSent) res.json(out);
    } catch (err) {
      next(err);
    }
  };
}
