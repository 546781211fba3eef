import type { ServerResponse } from 'node:http';

type Tracked = ServerResponse & { [slot: symbol]: number | undefined };

/**
 * The api's responses not finished yet, for the shutdown (each one's head is told `connection: close`). An array
 * with swap-remove and each response's slot on the response, not a Set: a Set that every request enters and leaves
 * rehashes into a new table every few dozen requests, and V8 leaves each obsolete table pointing at the next one
 * and at the responses it held. Once one obsolete table reached the old space (a scavenge under load after an idle
 * gap shrank the new space is enough), each later table and its finished requests were kept alive through it until
 * the next full collection: ~0.3 more mark-compacts per 1k memory-off chats than a bare proxy (bench/README.md,
 * "Fifteenth pass"). The array's backing store is reused in place, and a removed slot is cleared.
 */
export class OpenResponses {
  private readonly items: Tracked[] = [];
  /** Each tracker's own property: a response held by two trackers keeps a slot in each. */
  private readonly slot = Symbol('engram.openResponses.slot');

  get size(): number {
    return this.items.length;
  }

  add(res: ServerResponse): void {
    const r = res as Tracked;
    const at = r[this.slot];
    if (at !== undefined && this.items[at] === r) return;
    r[this.slot] = this.items.length;
    this.items.push(r);
  }

  delete(res: ServerResponse): void {
    const r = res as Tracked;
    const i = r[this.slot];
    if (i === undefined || this.items[i] !== r) return;
    const last = this.items.pop()!;
    if (last !== r) {
      this.items[i] = last;
      last[this.slot] = i;
    }
    // Kept as a property (undefined), so a response's shape does not change when it leaves.
    r[this.slot] = undefined;
  }

  /** A copy: what a caller does with each response may finish it (and remove it) while it walks them. */
  list(): ServerResponse[] {
    return this.items.slice();
  }
}
