/**
 * The keyword tier's ranking, per API key (issue #15 §2, issue #14): an in-memory inverted index of
 * one key's memories, scored with FTS5's own bm25 formula over THAT key's statistics.
 *
 * FTS5's bm25() takes the row count, the average row length and each term's document frequency
 * over the whole index, i.e. over every key's rows: another key's writes changed the order of this
 * key's results, and the common-term drop (a term in more than 2% of the rows leaves the MATCH)
 * let other keys decide which of this key's query words count. Here every statistic is the key's
 * own, so nothing another key stores can change what this key sees. For a database holding one key
 * the scores equal FTS5's (same tokenizer, same constants, the same row length: content + key + the
 * tenant token), which the tests check.
 *
 * A copy is loaded whole at the key's first query and brought up to date before every query from
 * memory_kw_log (migration 0009: triggers on memories log every insert, delete and change of an
 * indexed column, whichever process writes). Copies past the byte budget are dropped least recently
 * used first; the key being queried is always kept, so a key larger than the budget is still ranked
 * by its own statistics (it then holds the memory alone).
 */
import { catchUp, RELOAD } from '../db/change-log';
import { FTS5_BM25, fts5Idf } from './retrieval-scoring';
import { tokenize } from './tokenize';
import type { KeywordIndexRepository, KeywordRow } from './keyword-index.repository';

/** The candidate filter in the form the index applies it (the same predicate as candidateFilterSql). */
export interface KeywordFilter {
  nowIso: string;
  freshAfterIso: string | null;
  sessionId: string | null;
}

export interface KeywordHit {
  rowId: number;
  /** FTS5's sign: negative, lower is better. */
  bm25: number;
}

/** A growable Int32Array. */
class IntList {
  data: Int32Array;
  length = 0;
  constructor(capacity = 4) {
    this.data = new Int32Array(capacity);
  }
  push(v: number): void {
    if (this.length === this.data.length) {
      const next = new Int32Array(this.data.length * 2);
      next.set(this.data);
      this.data = next;
    }
    this.data[this.length++] = v;
  }
}

/**
 * The `limit` best of the first `count` slots in `slots`, best first, in the keyword tier's order (higher
 * score, i.e. lower bm25, first; ties: lower row id first, as FTS5's `ORDER BY bm25, rowid`), without an object per candidate: a sort of
 * the slots themselves when they are few, else a bounded heap of slot numbers. Reorders `slots`.
 */
export function bestSlots(slots: Int32Array, count: number, limit: number, scores: Float64Array, rowIds: readonly number[]): Int32Array {
  // The sign of `bm25(a) - bm25(c)` with bm25 = -score (negation is exact), then the row ids. Returned as
  // ±1 (a zero or NaN difference falls through to the row ids, as `||` did): a fractional difference
  // returned from the comparator is a heap number per comparison.
  const cmp = (a: number, c: number) => {
    const d = scores[c]! - scores[a]!;
    return d > 0 ? 1 : d < 0 ? -1 : rowIds[a]! - rowIds[c]!;
  };
  if (count <= limit * 4) return slots.subarray(0, count).sort(cmp).subarray(0, Math.min(count, limit));
  // Max-heap (by cmp) of the best `limit` so far: its root is the worst of them.
  const heap = new Int32Array(limit);
  let size = 0;
  // The root's score and row id, so most slots (worse than the root) are passed over without a call of cmp.
  let rootScore = 0;
  let rootRow = 0;
  for (let k = 0; k < count; k++) {
    const s = slots[k]!;
    if (size < limit) {
      let i = size++;
      heap[i] = s;
      while (i > 0) {
        const p = (i - 1) >> 1;
        if (cmp(heap[i]!, heap[p]!) <= 0) break;
        const t = heap[i]!;
        heap[i] = heap[p]!;
        heap[p] = t;
        i = p;
      }
      rootScore = scores[heap[0]!]!;
      rootRow = rowIds[heap[0]!]!;
      continue;
    }
    // cmp(s, root) < 0, written out: a higher score, or the same score and a lower row id.
    const score = scores[s]!;
    if (score > rootScore || (score === rootScore && rowIds[s]! < rootRow)) {
      heap[0] = s;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let w = i;
        if (l < size && cmp(heap[l]!, heap[w]!) > 0) w = l;
        if (r < size && cmp(heap[r]!, heap[w]!) > 0) w = r;
        if (w === i) break;
        const t = heap[i]!;
        heap[i] = heap[w]!;
        heap[w] = t;
        i = w;
      }
      rootScore = scores[heap[0]!]!;
      rootRow = rowIds[heap[0]!]!;
    }
  }
  return heap.subarray(0, size).sort(cmp);
}

/**
 * The instant of a canonical ISO string (`YYYY-MM-DDTHH:mm:ss.sssZ`, what toISOString writes), else NaN.
 * Canonical strings have one fixed width with the most significant field first, so two of them compare
 * as their instants do: the filter compares these numbers where both sides are canonical, and the
 * strings themselves (SQLite's BINARY order) otherwise.
 */
export function canonicalIsoMs(s: unknown): number {
  if (typeof s !== 'string' || s.length !== 24) return NaN;
  const ms = Date.parse(s);
  return ms === ms && new Date(ms).toISOString() === s ? ms : NaN;
}

/** Rough bytes of a JS string of this length (header + UTF-16 worst case is not needed: one byte per Latin char). */
const strBytes = (s: string | null) => (s === null ? 0 : 24 + s.length);

/**
 * One key's index. Documents live in slots (never reused until a compaction renumbers them);
 * postings hold (slot, tf) pairs per term, and a removed slot's postings are skipped until then.
 */
export class TenantKeywordIndex {
  private slotOf = new Map<number, number>();
  private rowIds: number[] = [];
  private lens: number[] = [];
  private alive: boolean[] = [];
  private expiresAt: (string | null)[] = [];
  private updatedAt: string[] = [];
  /**
   * The same two columns as instants (canonicalIsoMs; expiry Infinity when none): a chat's filter compared a
   * few thousand timestamp strings (issue 14); NaN where a string is not canonical, compared as a string then.
   */
  private expiresMs: number[] = [];
  private updatedMs: number[] = [];
  private sessions: (string | null)[] = [];
  /** Each slot's term ids, for the document frequencies when it is removed. */
  private slotTerms: Int32Array[] = [];
  private readonly termIds = new Map<string, number>();
  private postings: IntList[] = [];
  private df: number[] = [];
  private readonly sessionNames = new Map<string, string>();
  private live = 0;
  private dead = 0;
  private totalLen = 0;
  private textBytes = 0;
  private postingEntries = 0;
  private scores = new Float64Array(0);
  /** Scratch of search(): the slots a query matched (sized with `scores`). */
  private touched = new Int32Array(0);

  /** Rows of the key. */
  get rows(): number {
    return this.live;
  }

  /** Estimated bytes held (for the cache's budget). */
  get bytes(): number {
    // Postings grow by doubling (~1.5× their entries on average); each term also costs a map entry and a list.
    return this.postingEntries * 12 + this.termIds.size * 160 + this.rowIds.length * 64 + this.textBytes + this.scores.byteLength;
  }

  has(rowId: number): boolean {
    return this.slotOf.has(rowId);
  }

  /** Adds or replaces a memory. */
  put(row: KeywordRow): void {
    this.remove(row.rowId);
    const tokens = tokenize(row.content);
    const keyTokens = row.key ? tokenize(row.key) : [];
    const counts = new Map<string, number>();
    for (const t of tokens) counts.set(t, (counts.get(t) ?? 0) + 1);
    for (const t of keyTokens) counts.set(t, (counts.get(t) ?? 0) + 1);
    const slot = this.rowIds.length;
    // FTS5's row size counts every column: content, key and the one tenant token (migration 0007).
    const len = tokens.length + keyTokens.length + 1;
    const terms = new Int32Array(counts.size);
    let i = 0;
    for (const [term, tf] of counts) {
      let id = this.termIds.get(term);
      if (id === undefined) {
        id = this.postings.length;
        this.termIds.set(term, id);
        this.postings.push(new IntList());
        this.df.push(0);
      }
      this.postings[id]!.push(slot);
      this.postings[id]!.push(tf);
      this.postingEntries += 2;
      this.df[id]!++;
      terms[i++] = id;
    }
    let session = row.sessionId;
    if (session !== null) {
      const interned = this.sessionNames.get(session);
      if (interned === undefined) this.sessionNames.set(session, session);
      else session = interned;
    }
    this.slotOf.set(row.rowId, slot);
    this.rowIds.push(row.rowId);
    this.lens.push(len);
    this.alive.push(true);
    this.expiresAt.push(row.expiresAt);
    this.updatedAt.push(row.updatedAt);
    this.expiresMs.push(row.expiresAt === null ? Infinity : canonicalIsoMs(row.expiresAt));
    this.updatedMs.push(canonicalIsoMs(row.updatedAt));
    this.sessions.push(session);
    this.slotTerms.push(terms);
    this.live++;
    this.totalLen += len;
    this.textBytes += strBytes(row.expiresAt) + strBytes(row.updatedAt) + terms.byteLength + 64;
  }

  /** Removes a memory (no-op when absent). */
  remove(rowId: number): void {
    const slot = this.slotOf.get(rowId);
    if (slot === undefined) return;
    this.slotOf.delete(rowId);
    this.alive[slot] = false;
    for (const id of this.slotTerms[slot]!) this.df[id]!--;
    this.textBytes -= strBytes(this.expiresAt[slot]!) + strBytes(this.updatedAt[slot]!) + this.slotTerms[slot]!.byteLength + 64;
    this.slotTerms[slot] = new Int32Array(0);
    this.expiresAt[slot] = null;
    this.updatedAt[slot] = '';
    this.expiresMs[slot] = Infinity;
    this.updatedMs[slot] = NaN;
    this.sessions[slot] = null;
    this.live--;
    this.dead++;
    this.totalLen -= this.lens[slot]!;
    if (this.dead > 1024 && this.dead > this.live) this.compact();
  }

  /** The key's row count and each term's document frequency (what bm25's idf and the common-term drop use). */
  stats(terms: readonly string[]): { rows: number; docFreqs: number[] } {
    return {
      rows: this.live,
      docFreqs: terms.map((t) => {
        const id = this.termIds.get(t);
        return id === undefined ? 0 : this.df[id]!;
      }),
    };
  }

  /**
   * The rows matching any of `terms` that pass the filter, best bm25 first (ties: older row first),
   * at most `limit` (Infinity for all). The score is FTS5's: Σ idf(t)·tf·(k1+1) / (tf + k1·(1 − b +
   * b·len/avglen)), with tf counted over content and key (both weight 1), negated.
   */
  search(terms: readonly string[], filter: KeywordFilter, limit: number): KeywordHit[] {
    if (this.live === 0 || terms.length === 0) return [];
    const n = this.accumulate(terms);
    // Read after accumulate(), which may have grown them.
    const scores = this.scores;
    const touched = this.touched;
    let m = 0;
    const nowMs = canonicalIsoMs(filter.nowIso);
    const freshMs = filter.freshAfterIso === null ? NaN : canonicalIsoMs(filter.freshAfterIso);
    for (let i = 0; i < n; i++) {
      const slot = touched[i]!;
      if (this.passes(slot, filter, nowMs, freshMs)) touched[m++] = slot;
      else scores[slot] = 0;
    }
    const best = bestSlots(touched, m, limit, scores, this.rowIds);
    const hits: KeywordHit[] = new Array(best.length);
    for (let i = 0; i < best.length; i++) hits[i] = { rowId: this.rowIds[best[i]!]!, bm25: -scores[best[i]!]! };
    for (let i = 0; i < m; i++) scores[touched[i]!] = 0;
    return hits;
  }

  /**
   * FTS5's bm25 of the given rows for `terms`, as search() scores them (negative, lower is better),
   * over this key's statistics; 0 for a row matching none of them; rows not held are left out. For
   * rows chosen by something else (the exact strategy's newest matches) whose score is reported.
   */
  bm25Of(terms: readonly string[], rowIds: readonly number[]): Map<number, number> {
    const out = new Map<number, number>();
    if (this.live === 0) return out;
    const n = terms.length ? this.accumulate(terms) : 0;
    for (const rowId of rowIds) {
      const slot = this.slotOf.get(rowId);
      if (slot !== undefined && this.alive[slot]) out.set(rowId, this.scores[slot] === 0 ? 0 : -this.scores[slot]!);
    }
    for (let i = 0; i < n; i++) this.scores[this.touched[i]!] = 0;
    return out;
  }

  /**
   * Adds each live matching slot's score for `terms` into the scratch `scores` (FTS5's bm25, positive)
   * and lists the slots touched in `touched`; returns how many. The caller zeroes them again.
   */
  private accumulate(terms: readonly string[]): number {
    const { k1, b } = FTS5_BM25;
    const avg = this.totalLen / this.live;
    if (this.scores.length < this.rowIds.length) {
      this.scores = new Float64Array(Math.max(64, this.rowIds.length * 2));
      this.touched = new Int32Array(this.scores.length);
    }
    const scores = this.scores;
    // The matching slots, in a scratch array kept with the scores: a common word matches thousands of
    // rows, and an object per match (plus the array of them) was the largest allocation of a chat's
    // keyword tier; only the `limit` best become hit objects.
    const touched = this.touched;
    let n = 0;
    for (const term of new Set(terms)) {
      const id = this.termIds.get(term);
      if (id === undefined || this.df[id] === 0) continue;
      const idf = fts5Idf(this.live, this.df[id]!);
      const list = this.postings[id]!;
      const data = list.data;
      for (let i = 0; i < list.length; i += 2) {
        const slot = data[i]!;
        if (!this.alive[slot]) continue;
        const tf = data[i + 1]!;
        if (scores[slot] === 0) touched[n++] = slot;
        scores[slot] += (idf * (tf * (k1 + 1))) / (tf + k1 * (1 - b + (b * this.lens[slot]!) / avg));
      }
    }
    return n;
  }

  /**
   * candidateFilterSql's predicate on the slot's columns (ISO strings compare as SQLite compares them):
   * as instants where the slot's and the filter's strings are both canonical (the same order), else as strings.
   */
  private passes(slot: number, f: KeywordFilter, nowMs: number, freshMs: number): boolean {
    const expMs = this.expiresMs[slot]!;
    if (expMs !== Infinity) {
      if (expMs === expMs && nowMs === nowMs) {
        if (!(expMs > nowMs)) return false;
      } else if (!(this.expiresAt[slot]! > f.nowIso)) return false;
    }
    if (f.freshAfterIso !== null) {
      const updMs = this.updatedMs[slot]!;
      if (updMs === updMs && freshMs === freshMs) {
        if (!(updMs >= freshMs)) return false;
      } else if (!(this.updatedAt[slot]! >= f.freshAfterIso)) return false;
    }
    if (f.sessionId !== null && this.sessions[slot] !== f.sessionId) return false;
    return true;
  }

  /** Renumbers the live slots and drops removed ones from the postings. */
  private compact(): void {
    const remap = new Int32Array(this.rowIds.length).fill(-1);
    const keep: number[] = [];
    for (let s = 0; s < this.rowIds.length; s++) if (this.alive[s]) remap[s] = keep.push(s) - 1;
    const pick = <T>(a: T[]) => keep.map((s) => a[s]!);
    this.rowIds = pick(this.rowIds);
    this.lens = pick(this.lens);
    this.expiresAt = pick(this.expiresAt);
    this.updatedAt = pick(this.updatedAt);
    this.expiresMs = pick(this.expiresMs);
    this.updatedMs = pick(this.updatedMs);
    this.sessions = pick(this.sessions);
    this.slotTerms = pick(this.slotTerms);
    this.alive = keep.map(() => true);
    this.slotOf = new Map(this.rowIds.map((r, s) => [r, s]));
    this.postingEntries = 0;
    // Terms no live row holds any more are dropped (a key whose words churn would otherwise keep every word it ever held).
    const termRemap = new Int32Array(this.postings.length).fill(-1);
    const postings: IntList[] = [];
    const df: number[] = [];
    for (const [term, id] of this.termIds) {
      if (this.df[id] === 0) {
        this.termIds.delete(term);
        continue;
      }
      const list = this.postings[id]!;
      const next = new IntList(Math.max(4, this.df[id]! * 2));
      for (let i = 0; i < list.length; i += 2) {
        const to = remap[list.data[i]!]!;
        if (to < 0) continue;
        next.push(to);
        next.push(list.data[i + 1]!);
        this.postingEntries += 2;
      }
      termRemap[id] = postings.length;
      this.termIds.set(term, postings.length);
      postings.push(next);
      df.push(this.df[id]!);
    }
    this.postings = postings;
    this.df = df;
    // Session names no live row holds are dropped too (every chat is a new session: they only accumulate).
    this.sessionNames.clear();
    for (const session of this.sessions) if (session !== null) this.sessionNames.set(session, session);
    for (const terms of this.slotTerms) for (let i = 0; i < terms.length; i++) terms[i] = termRemap[terms[i]!]!;
    this.dead = 0;
    this.scores = new Float64Array(0);
    this.touched = new Int32Array(0);
  }
}

interface TenantCopy {
  index: TenantKeywordIndex;
  /** The change-log sequence number this copy reflects. */
  seq: number;
}

/** Rows a background load reads and indexes between two turns of the event loop (~10–20 ms of work). */
const LOAD_SLICE_ROWS = 2000;

/**
 * Told what a key's copy applied, so a cache kept beside it (record-cache.ts) stays exactly as
 * current: `changed` with the row ids of the log entries a catch-up applied, `reset` when the
 * key's copy is installed fresh or dropped (changes may have been missed).
 */
export interface KeywordIndexListener {
  changed(apiKeyId: string, rowIds: readonly number[]): void;
  reset(apiKeyId: string): void;
}

/** Per-key copies of the keyword index, kept current from memory_kw_log, within a byte budget (least recently used dropped first). */
export class KeywordIndexCache {
  private readonly copies = new Map<string, TenantCopy>();
  private readonly loading = new Map<string, Promise<void>>();

  constructor(
    private readonly repo: KeywordIndexRepository,
    private readonly budgetBytes: number,
    private readonly listener?: KeywordIndexListener,
  ) {}

  get tenants(): number {
    return this.copies.size;
  }

  get bytesHeld(): number {
    let n = 0;
    for (const c of this.copies.values()) n += c.index.bytes;
    return n;
  }

  /** The key's index, current as of now (the catch-up rule: db/change-log.ts). */
  index(apiKeyId: string): TenantKeywordIndex {
    const log = this.repo.log;
    let copy = this.copies.get(apiKeyId);
    const step = copy ? catchUp(log, apiKeyId, copy.seq, log.head()) : RELOAD;
    if (copy && step.kind === 'current') {
      this.copies.delete(apiKeyId); // re-inserted: Map order is the LRU order
      this.copies.set(apiKeyId, copy);
      return copy.index;
    }
    if (copy && step.kind === 'apply') {
      this.copies.delete(apiKeyId); // re-inserted below: Map order is the LRU order
      for (const rowId of step.rowIds) {
        const row = this.repo.row(apiKeyId, rowId);
        if (row) copy.index.put(row);
        else copy.index.remove(rowId);
      }
      copy.seq = step.head;
      if (step.rowIds.length) this.listener?.changed(apiKeyId, step.rowIds);
    } else {
      if (copy) this.drop(apiKeyId); // entries it has not seen were pruned
      copy = log.snapshot((head) => {
        const index = new TenantKeywordIndex();
        for (const r of this.repo.rows(apiKeyId)) index.put(r);
        return { index, seq: head };
      });
      this.listener?.reset(apiKeyId);
    }
    this.copies.set(apiKeyId, copy);
    this.evict(apiKeyId);
    return copy.index;
  }

  /**
   * The key's index as last caught up, without reading the log (null when not held): for the
   * rest of a retrieval after its one index() call, with no await between them.
   */
  held(apiKeyId: string): TenantKeywordIndex | null {
    return this.copies.get(apiKeyId)?.index ?? null;
  }

  /** Whether the key's copy is held (a retrieval re-warms after its awaits: another key's load may have evicted it). */
  holds(apiKeyId: string): boolean {
    return this.copies.has(apiKeyId);
  }

  clear(): void {
    for (const key of [...this.copies.keys()]) this.drop(key);
  }

  /**
   * Loads the key's index in slices, yielding to the event loop between them, when it is not held:
   * a 100k-row key takes about a second of CPU to index, and a synchronous load would stall every
   * other request meanwhile. Callers await this before index(); concurrent callers share one load.
   * The log head is read first, so a row written during the load is applied again after it (a put
   * replaces, a remove of an absent row is a no-op).
   */
  warm(apiKeyId: string): Promise<void> {
    const held = this.copies.get(apiKeyId);
    // The usual case, a held copy and nothing logged since: one read of the head.
    if (held && this.repo.log.head() === held.seq) return Promise.resolve();
    if (held && this.fewPending(apiKeyId, held)) return Promise.resolve();
    if (held) this.drop(apiKeyId); // missed pruned entries or too many changes: reloaded in slices, not synchronously by index()
    let p = this.loading.get(apiKeyId);
    if (!p) {
      p = this.loadInSlices(apiKeyId).finally(() => this.loading.delete(apiKeyId));
      this.loading.set(apiKeyId, p);
    }
    return p;
  }

  /**
   * The key's index caught up as index() does, when that is cheap: the copy is held, and nothing
   * was logged since (one read of the head) or fewer changes than a slice and none pruned. Else
   * null, and the caller awaits warm(), which reloads the key in slices. What warm() then index()
   * do for a held key, with one read of the log head instead of two (issue 14: once per chat).
   */
  current(apiKeyId: string): TenantKeywordIndex | null {
    const copy = this.copies.get(apiKeyId);
    if (!copy) return null;
    if (this.repo.log.head() === copy.seq) {
      this.copies.delete(apiKeyId); // re-inserted: Map order is the LRU order
      this.copies.set(apiKeyId, copy);
      return copy.index;
    }
    return this.fewPending(apiKeyId, copy) ? this.index(apiKeyId) : null;
  }

  /**
   * Catching up reads one row per changed id on the event loop: past a slice's worth (a worker importing
   * into the key), reloading in slices is the cheaper and non-blocking way.
   */
  private fewPending(apiKeyId: string, copy: TenantCopy): boolean {
    return copy.seq >= this.repo.log.prunedBelow() && this.repo.log.pendingAtMost(apiKeyId, copy.seq, LOAD_SLICE_ROWS) < LOAD_SLICE_ROWS;
  }

  private async loadInSlices(apiKeyId: string): Promise<void> {
    // The head before the first slice (change-log.ts): a row written during the load is applied again after it.
    const seq = this.repo.log.head();
    const index = new TenantKeywordIndex();
    for (let after = 0; ; ) {
      const rows = this.repo.page(apiKeyId, after, LOAD_SLICE_ROWS);
      for (const r of rows) index.put(r);
      if (rows.length < LOAD_SLICE_ROWS) break;
      after = rows[rows.length - 1]!.rowId;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    if (!this.copies.has(apiKeyId)) {
      this.copies.set(apiKeyId, { index, seq });
      this.listener?.reset(apiKeyId);
    }
    this.evict(apiKeyId);
  }

  /** Forgets the key's copy (and tells the listener). */
  private drop(apiKeyId: string): void {
    this.copies.delete(apiKeyId);
    this.listener?.reset(apiKeyId);
  }

  private evict(keep: string): void {
    if (this.copies.size < 2) return;
    let held = this.bytesHeld;
    if (held <= this.budgetBytes) return;
    for (const [key, c] of this.copies) {
      if (held <= this.budgetBytes) break;
      if (key === keep) continue;
      held -= c.index.bytes;
      this.drop(key);
    }
  }
}
