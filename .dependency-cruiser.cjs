/**
 * The import graph's rules (npm run lint, CI): no cycles between files, and folders stacked in
 * layers — a module may import its own layer's leaf files and anything below, never above, so no
 * cycle between folders can form either (type-only imports count: they couple folders as much).
 */
const LAYERS = [
  ['src/config', 'src/errors.ts', 'src/logger.ts', 'src/timeout.ts', 'src/shutdown.ts', 'src/metrics.ts', 'src/process-guards.ts'],
  ['src/db', 'src/net'],
  ['src/vector'],
  ['src/embedding'],
  ['src/queue'],
  ['src/auth'],
  ['src/memory'],
  ['src/proxy'],
  ['src/backends'],
  ['src/services.ts'],
  ['src/http', 'src/mcp'],
  ['workers'],
  ['src/api.ts'],
  ['src/cli.ts'],
];

const re = (paths) => `^(${paths.map((p) => p.replace(/[.]/g, '\\.') + (p.endsWith('.ts') ? '$' : '/')).join('|')})`;

const layerRules = LAYERS.slice(0, -1).map((layer, i) => ({
  name: `layer-${i}-imports-up`,
  severity: 'error',
  comment: `${layer.join(', ')} may not import anything of a higher layer`,
  from: { path: re(layer) },
  to: { path: re(LAYERS.slice(i + 1).flat()) },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Files that import each other in a loop (type-only imports included).',
      from: {},
      to: { circular: true },
    },
    ...layerRules,
    {
      name: 'dashboard-is-browser-only',
      severity: 'error',
      comment: 'The dashboard (browser code, dashboard/src) talks to the server over HTTP only: it never imports server code, and server code never imports it.',
      from: { path: '^dashboard/' },
      to: { path: '^(src|workers|test|bench)/' },
    },
    {
      name: 'server-not-to-dashboard',
      severity: 'error',
      comment: 'The api serves the built dashboard as files; it never imports its sources.',
      from: { path: '^(src|workers)/' },
      to: { path: '^dashboard/' },
    },
    {
      name: 'src-not-to-tests',
      severity: 'error',
      comment: 'Production code never imports test helpers or benchmarks.',
      from: { path: '^(src|workers)/', pathNot: '\\.test\\.ts$' },
      to: { path: '^(test|bench)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(node_modules|dist)/|\\.test\\.ts$' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
