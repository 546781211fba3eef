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
 * The environment `engram up` gives its api and worker: the parent's, with glibc's MALLOC_ARENA_MAX set to 2
 * unless the operator set it. glibc otherwise keeps up to 8 malloc arenas per core, one per thread that
 * allocates (V8's GC helpers, libuv's pool), and memory freed into one arena is not reused by another. Under the
 * memory-on chat load, 2 arenas left the api ~12 MB less native memory after two full collections (bench/README.md,
 * "Sixth pass", malloc arenas). glibc reads it once at start, so it must be in a process's environment before it starts; other C libraries
 * ignore it.
 */
export function childMemoryEnv(parent: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return parent.MALLOC_ARENA_MAX === undefined || parent.MALLOC_ARENA_MAX === '' ? { ...parent, MALLOC_ARENA_MAX: '2' } : { ...parent };
}
