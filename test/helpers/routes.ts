import type { Express } from 'express';

export interface RouteEntry {
  method: string;
  path: string;
}

interface Layer {
  route?: { path: string; methods: Record<string, boolean> };
  handle?: { stack?: Layer[]; mountPath?: string };
  name?: string;
}

/**
 * Every route the app serves, walked from express' own router stack. A nested router must carry
 * `mountPath` (set by app.ts' mount helper); one without it fails the walk, so a router mounted
 * some other way cannot hide from the auth test.
 */
export function walkRoutes(app: Express): RouteEntry[] {
  const out: RouteEntry[] = [];
  const join = (a: string, b: string) => (a + b).replace(/\/+$/, '') || '/';
  const visit = (stack: Layer[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route) {
        for (const [m, on] of Object.entries(layer.route.methods)) if (on && m !== '_all') out.push({ method: m.toUpperCase(), path: join(prefix, layer.route.path) });
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

/** A concrete path for a route pattern (params filled with plausible values). */
export function concretePath(pattern: string): string {
  return pattern
    .replace(/\*[A-Za-z_]+/g, 'x')
    .replace(/:queue/g, 'maintenance')
    .replace(/:[A-Za-z_]+/g, '00000000-0000-4000-8000-000000000000')
    .replace(/[{}]/g, '');
}
