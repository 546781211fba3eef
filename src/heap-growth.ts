import v8 from 'node:v8';

/**
 * Caps how far V8 lets the old generation grow past what its last full collection left live: the next full
 * collection starts at live × (1 + percent/100). V8's own factor reaches 4 on a machine with a large heap limit,
 * and under the memory-on chat load the api's old space grew from ~60 MB live to ~150 MB of mostly garbage before
 * it was collected (bench/README.md, "Fifth pass, api RSS"). 0 leaves V8's own factor. It is a process-wide V8
 * setting, read at every collection, so it also applies to a process that is already running.
 */
export function limitHeapGrowth(percent: number): boolean {
  if (!(percent > 0)) return false;
  v8.setFlagsFromString(`--heap-growing-percent=${Math.floor(percent)}`);
  return true;
}

/**
 * The api's largest V8 semi-space, MB (the young generation is two of them). V8's own is 16 on a 64-bit machine:
 * under the memory-on chat load the api's young generation sat at 32 MB, resident; at 8 its peak RSS was ~25 MB
 * lower with no more CPU per chat, while 4 cost ~10 % more CPU for no further gain (bench/README.md, "Seventh pass").
 * V8 sizes the young generation when the process starts: a flag given later changes nothing.
 */
export const API_MAX_SEMI_SPACE_MB = 8;

/**
 * The environment `engram up` gives a child, `api` or `worker`: the parent's, with glibc's MALLOC_ARENA_MAX set
 * to 2 unless the operator set it, and for the api `--max-semi-space-size` (API_MAX_SEMI_SPACE_MB) added to
 * NODE_OPTIONS unless NODE_OPTIONS already sets one. glibc otherwise keeps up to 8 malloc arenas per core, one per
 * thread that allocates (V8's GC helpers, libuv's pool), and memory freed into one arena is not reused by another.
 * Under the memory-on chat load, 2 arenas left the api ~12 MB less native memory after two full collections
 * (bench/README.md, "Sixth pass", malloc arenas). Both are read once at start, so they must be in a process's
 * environment before it starts; other C libraries ignore MALLOC_ARENA_MAX. The role defaults to the api, which the
 * proxy-targets bench starts with this function.
 */
export function childMemoryEnv(parent: NodeJS.ProcessEnv, role: 'api' | 'worker' = 'api'): NodeJS.ProcessEnv {
  const env = { ...parent };
  if (env.MALLOC_ARENA_MAX === undefined || env.MALLOC_ARENA_MAX === '') env.MALLOC_ARENA_MAX = '2';
  const options = env.NODE_OPTIONS ?? '';
  if (role === 'api' && !/(^|\s)--max-semi-space-size\b/.test(options)) {
    env.NODE_OPTIONS = `${options} --max-semi-space-size=${API_MAX_SEMI_SPACE_MB}`.trim();
  }
  return env;
}
