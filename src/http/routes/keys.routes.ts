import { Router } from 'express';
import { z } from 'zod';
import type { ApiContext } from '../api-context';
import { notFound } from '../../errors';
import { handle } from '../validate';

export const createKeyBody = z.strictObject({ name: z.string().trim().min(1).max(128).default('default') });
const idParams = z.object({ id: z.string().min(1).max(128) });

/** /api/keys: client API keys; the secret is in the create response and nowhere else. */
export function keysRoutes(ctx: ApiContext): Router {
  const r = Router();
  r.post(
    '/',
    handle({ body: createKeyBody }, ({ body }, _req, res) => {
      res.status(201);
      return ctx.apiKeys.create(body.name);
    }),
  );
  r.get('/', handle({}, () => ({ keys: ctx.apiKeys.list() })));
  r.delete(
    '/:id',
    handle({ params: idParams }, ({ params }) => {
      const rec = ctx.apiKeys.get(params.id);
      if (!rec) throw notFound('API key');
      ctx.apiKeys.revoke(params.id);
      return { success: true, key: ctx.apiKeys.get(params.id) };
    }),
  );
  return r;
}
