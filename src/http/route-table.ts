import type { Express } from 'express';

export interface RouteEntry {
  method: string;
  /** As declared, with mount prefixes: `/api/memory/:id`. */
  path: string;
  /** The route's own handlers, in order (route metadata is read from them). */
  handlers: unknown[];
}

interface Layer {
  route?: { path: string; methods: Record<string, boolean>; stack?: { handle?: unknown }[] };
  handle?: { stack?: Layer[]; mountPath?: string };
  name?: string;
}

/**
 * Every route the app serves, walked from express' own router stack. A nested router must carry
 * `mountPath` (set by app.ts' mount helper); one without it fails the walk, so a router mounted
 * some other way cannot hide from the auth test or from the OpenAPI document.
 */
export function walkRoutes(app: Express): RouteEntry[] {
  const out: RouteEntry[] = [];
  const join = (a: string, b: string) => (a + b).replace(/\/+$/, '') || '/';
  const visit = (stack: Layer[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route) {
        const handlers = (layer.route.stack ?? []).map((l) => l.handle);
        for (const [m, on] of Object.entries(layer.route.methods)) if (on && m !== '_all') out.push({ method: m.toUpperCase(), path: join(prefix, layer.route.path), handlers });
      } else if (layer.handle?.stack) {
        const mount = layer.handle.mountPath;
        if (mount === undefined) throw new Error(`nested router without mountPath under ${prefix || '/'}`);
        visit(layer.handle.stack, prefix + mount);
      }
    }
  };
  const root = (app as unknown as { router: { stack: Layer[] } }).router;
  visit(root.stack, '');
  return out;
}
