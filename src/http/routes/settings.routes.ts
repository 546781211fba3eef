import { Router } from 'express';
import type { ApiContext } from '../../context';
import { memorySettingsUpdateSchema } from '../../memory/settings';
import { handle } from '../validate';

/** /api/settings/memory: the original's fields, defaults and clamps, stored under its keys. */
export function settingsRoutes(ctx: ApiContext): Router {
  const r = Router();
  r.get('/memory', handle({}, () => ctx.settings.memory()));
  r.put('/memory', handle({ body: memorySettingsUpdateSchema }, ({ body }) => ctx.settings.updateMemory(body)));
  return r;
}
