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
