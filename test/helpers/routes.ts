export { walkRoutes, type RouteEntry } from '../../src/http/route-table';

/** A concrete path for a route pattern (params filled with plausible values). */
export function concretePath(pattern: string): string {
  return pattern
    .replace(/\*[A-Za-z_]+/g, 'x')
    .replace(/:queue/g, 'maintenance')
    .replace(/:[A-Za-z_]+/g, '00000000-0000-4000-8000-000000000000')
    .replace(/[{}]/g, '');
}
