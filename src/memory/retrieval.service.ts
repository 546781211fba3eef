import type { Env } from '../config/env';
import type { Db } from '../db/connection';
import { AccessRecorder } from './access-recorder';
import { RetrievalRepository, type CandidateFilter } from './retrieval.repository';
import { KeywordIndexCache, type TenantKeywordIndex } from './keyword-index';
import { KeywordIndexRepository } from './keyword-index.repository';
import type { EmbeddingService } from '../embedding/embedding.service';
import { sanitizeEmbeddingMessage } from '../embedding/embedding.service';
import type { Logger } from '../logger';
import type { QueueLayer } from '../queue/queues';
import { VectorUnavailableError } from '../vector/types';
import { QDRANT_INDEX_PENDING } from '../vector/qdrant.store';
import type { KnownLiveness, VectorStore } from '../vector/types';
import type { Reranker } from './rerank';
import type { FusionChoice, RetrievalResolution, RetrievalResult, RetrievalStrategy, RetrievedItem, RetrieveMode, RetrieveOptions, Retriever } from './retrieval.types';
import { bm25QueryScale, convexFuseRanking, withoutCommonTerms, fts5Idf, ftsMatchOf, minMaxNormalise, ftsQueryTerms, relevanceScorer, rrfFuse, selectWithinBudget, truncateToTokens } from './retrieval-scoring';
import type { QdrantSettingsService } from './qdrant-settings';
import { applyScoreFloor, boostInWindow, dateWindowOf, expansionTerms, extrasFor, inWindow, memoryDay, mergeById, relevanceModel, PRF_FEEDBACK_DOCS, type DateWindow, type RetrievalExtras } from './retrieval-extras';
import { RetrievalExtrasRepository } from './retrieval-extras.repository';
import { RecordCache, type CachedRecord } from './record-cache';
import type { MemorySettings, SettingsService } from './settings';
import { rowDuplicateKey } from './row-memo';
import { estimateTokens } from './tokens';
import { toPublic } from './types';

/** Keyword candidates per query: bm25-ranked over every row that passes the filters. */
const FTS_LIMIT = 100;
/**
 * A query term held by more than this share of the key's rows (of all rows in the all-keys preview) is left out of the keyword MATCH
 * while a rarer term remains (issue #14; bench/README.md): fewer candidates for FTS5 to score, and
 * on the quality bench a better ranking (R@10 and MRR up on every set).
 */
const COMMON_TERM_SHARE = 0.02;
/** Rows considered by recency (no query). */
const RECENT_LIMIT = 200;
/** Vector hits below this cosine similarity are not relevant to the query. */
const MIN_VECTOR_SCORE = 0.2;
/** ...and neither are hits far below the best one (weak models score everything ~0.3). */
const RELATIVE_VECTOR_FLOOR = 0.5;
/** Why the vector tier was not used: the index is not built for the embedding model in effect. */
const NOT_BUILT_FOR_MODEL = 'vector index not built for the current embedding model yet (reindex pending)';
/** Convex fusion's weights when the settings leave them null (bench/README.md, `quality`: the best pair on every set). */
export const CONVEX_DEFAULT_WEIGHTS = { fts: 1, vector: 0.2 } as const;

interface Candidate {
  record: CachedRecord;
  vecScore: number | null;
  /** −bm25, rounded (higher is better): what the API reports. */
  ftsScore: number | null;
}

/** A keyword candidate: bm25 unrounded (FTS5's sign: lower is better), for the fusion's normalisation. */
interface KeywordCandidate extends Candidate {
  bm25: number;
}

/** A bm25 (lower is better) as the API reports it: negated, rounded to 4 places. */
function ftsScoreOf(bm25: number): number {
  return Math.round(-bm25 * 1e4) / 1e4;
}

/** A keyword candidate of a row at `bm25`: ftsScore as the API reports it. */
function keywordCandidate(record: CachedRecord, bm25: number): KeywordCandidate {
  return { record, vecScore: null, ftsScore: ftsScoreOf(bm25), bm25 };
}

/** Rows read from FTS5 (or SQLite) as keyword candidates. */
function candidatesOf(rows: readonly { record: CachedRecord; bm25: number }[]): KeywordCandidate[] {
  return rows.map(({ record, bm25 }) => keywordCandidate(record, bm25));
}

/**
 * A ranked row with its memory as read; the public item is built only for the rows selected. Each
 * strategy builds these directly (one object per candidate, issue #14: a candidate, its ranked
 * entry and its budget-walk row were three); `score` is the strategy's until distinctRows rounds it
 * and `tokens` 0 until then.
 */
interface RankedRow {
  record: CachedRecord;
  /** The content as returned (cut to the budget when `truncated`). */
  content: string;
  score: number;
  tokens: number;
  tier: RetrievedItem['tier'];
  vecScore: number | null;
  ftsScore: number | null;
  truncated: boolean;
}

/** The caller's candidate filter plus the key's keyword index, caught up once for the whole retrieval. */
interface Scope extends CandidateFilter {
  index: TenantKeywordIndex | null;
}

/**
 * The original's relevance of each candidate to one query (the scorer tokenizes as FTS5 does: case, Latin
 * diacritics, so the raw text goes in). The row itself is scored: its haystacks are kept on it (row-memo.ts).
 */
function withRelevance(candidates: readonly KeywordCandidate[], query: string): RankedRow[] {
  const relevance = relevanceScorer(query);
  return candidates.map((c) => rankedRow(c.record, c.vecScore, c.ftsScore, relevance(c.record), 'fts5'));
}

/** A strategy's ranked row (distinctRows rounds its score and counts its tokens). */
function rankedRow(record: CachedRecord, vecScore: number | null, ftsScore: number | null, score: number, tier: RetrievedItem['tier']): RankedRow {
  return { record, content: record.content, score, tokens: 0, tier, vecScore, ftsScore, truncated: false };
}

/**
 * The ranked rows as budget-walk rows, keeping the first (best-ranked) of rows whose normalised
 * content is the same; the duplicate check's folded content is kept on the row (rowDuplicateKey).
 * The rows are this retrieval's own (each strategy builds them): kept ones are finished in place
 * (score rounded, tokens counted) and the array compacted, instead of a copy of each.
 */
function distinctRows(ranked: RankedRow[]): RankedRow[] {
  const seen = new Set<string>();
  let n = 0;
  for (let i = 0; i < ranked.length; i++) {
    const row = ranked[i]!;
    const k = rowDuplicateKey(row.record);
    if (seen.has(k)) continue;
    seen.add(k);
    row.score = Math.round(row.score * 1e6) / 1e6;
    row.tokens = estimateTokens(row.content);
    ranked[n++] = row;
  }
  ranked.length = n;
  return ranked;
}

export interface RetrievalDeps {
  env: Env;
  log: Logger;
  db: Db;
  settings: SettingsService;
  embedding: EmbeddingService;
  vectors: VectorStore;
  reranker: Reranker;
  /** For the access-count jobs (through an AccessRecorder built here); absent in tools that only preview. */
  queues?: QueueLayer;
  /** Overrides the recorder built from `queues`. */
  access?: AccessRecorder;
  /** The Qdrant tier, consulted first when the settings select it (memoryVectorStore=qdrant, enabled). */
  qdrant?: VectorStore;
  qdrantSettings?: Pick<QdrantSettingsService, 'selected'>;
  /**
   * The per-key keyword indexes; built here from `db` and MEMORY_KEYWORD_INDEX_CACHE_MB when absent.
   * One given here has no record cache beside it (MEMORY_RECORD_CACHE_MB is then not used).
   */
  keywordIndex?: KeywordIndexCache;
}

/** Why a Qdrant search was not used, as a bounded metric label. */
export type QdrantFallbackLabel = VectorUnavailableError['reason'] | 'empty' | 'error';

type VectorOutcome = { hits: { id: string; score: number }[]; reason: null; store?: 'sqlite-vec' | 'qdrant'; note?: string } | { hits: null; reason: string };

/**
 * Retrieval on the request path (DESIGN §4): exact / semantic / hybrid with keyword fallback,
 * tenant, expiry, retention and session applied in every tier, optional rerank, then the
 * budget walk. It only reads SQLite and embeds the query; access counts go through a job.
 */
export class RetrievalService implements Retriever {
  private readonly repo: RetrievalRepository;
  private readonly extrasRepo: RetrievalExtrasRepository;
  private readonly access: AccessRecorder | null;
  /** Qdrant searches that fell back to sqlite-vec, by reason (engram_retrieval_qdrant_fallback_total). */
  readonly qdrantFallbacks = new Map<QdrantFallbackLabel, number>();
  private lastTermStats: { key: string; at: number; value: { rows: number; docFreqs: number[] } } | null = null;
  /** Per-key keyword ranking (keyword-index.ts): every statistic bm25 uses is the key's own. */
  readonly keywordIndex: KeywordIndexCache;
  /** Per-key memory rows (record-cache.ts), invalidated by the keyword index's catch-up. */
  readonly records: RecordCache;

  constructor(private readonly d: RetrievalDeps) {
    this.repo = new RetrievalRepository(d.db);
    // The row cache is only as current as the index copy that invalidates it, so it exists only beside an index built here.
    this.records = new RecordCache(d.keywordIndex ? 0 : (d.env.MEMORY_RECORD_CACHE_MB ?? 0) * 1_048_576);
    this.keywordIndex =
      d.keywordIndex ??
      new KeywordIndexCache(new KeywordIndexRepository(d.db), d.env.MEMORY_KEYWORD_INDEX_CACHE_MB * 1_048_576, {
        changed: (apiKeyId, rowIds) => this.records.invalidate(apiKeyId, rowIds),
        reset: (apiKeyId) => this.records.drop(apiKeyId),
      });
    this.extrasRepo = new RetrievalExtrasRepository(d.db);
    this.access = d.access ?? (d.queues ? new AccessRecorder({ queues: d.queues, log: d.log }) : null);
  }

  /** Sends the access counts still pending (shutdown: before the queues close). */
  async close(): Promise<void> {
    await this.access?.close();
  }

  async retrieve(apiKeyId: string | null, opts: RetrieveOptions, mode: RetrieveMode = {}): Promise<RetrievalResult> {
    const { signal } = mode;
    signal?.throwIfAborted();
    const settings = this.d.settings.memory();
    const budget = Math.min(16000, Math.max(1, Math.floor(opts.maxTokens)));
    const now = Date.now();
    const filter: Scope = {
      apiKeyId,
      nowIso: new Date(now).toISOString(),
      freshAfterIso: opts.retentionDays > 0 ? new Date(now - opts.retentionDays * 86_400_000).toISOString() : null,
      sessionId: opts.scope === 'session' && opts.sessionId ? opts.sessionId : null,
      index: null,
    };
    const query = (opts.query ?? '').trim();
    const embedRes = this.d.embedding.resolve(settings);
    const resolution: RetrievalResolution = {
      embeddingSource: embedRes.source,
      embeddingModel: embedRes.model,
      vectorStore: this.d.vectors.available() ? this.d.vectors.kind : 'none',
      strategyUsed: opts.strategy,
      rerankApplied: false,
      rerankReason: null,
      fallbackReason: null,
      fusion: null,
    };

    let ranked: RankedRow[];
    if (opts.strategy === 'exact' || !query) {
      // The key's own statistics score the matches (their reported ftsScore); the newest rows need none.
      if (apiKeyId !== null && query) {
        await this.catchUpIndex(apiKeyId, filter, this.keywordIndex.holds(apiKeyId) ? null : this.keywordIndex.warm(apiKeyId));
        // A first query of a large key loads its index in slices: a caller that gave up meanwhile gets nothing (nor counts).
        signal?.throwIfAborted();
      }
      ranked = this.exact(filter, query);
      resolution.strategyUsed = 'exact';
      if (opts.strategy !== 'exact' && !query) resolution.fallbackReason = 'empty query: newest memories first';
    } else {
      // The key's keyword index, loaded in slices the first time (keyword-index.ts warm) so a large key does not stall other
      // requests. A held copy is caught up after the embedding instead (current(), below or in knownLiveness): one read of the log head.
      const warming = apiKeyId !== null && !this.keywordIndex.holds(apiKeyId) ? this.keywordIndex.warm(apiKeyId) : null;
      // A warm that fails is retried below; the vector search must not make it an unhandled rejection meanwhile.
      warming?.catch(() => undefined);
      const vec =
        apiKeyId === null
          ? ({ hits: null, reason: 'vector search is per API key; an all-tenant preview uses keywords' } as const)
          : await this.vectorHits(apiKeyId, query, filter, settings, signal);
      // A cancelled embedding looks like a failed one: stop here rather than fall back for nobody.
      signal?.throwIfAborted();
      if (apiKeyId !== null) await this.catchUpIndex(apiKeyId, filter, warming);
      if (vec.hits !== null && vec.store) resolution.vectorStore = vec.store;
      if (vec.hits !== null && vec.note) resolution.fallbackReason = vec.note;
      if (vec.hits === null) {
        resolution.fallbackReason = vec.reason;
        ranked = withRelevance(this.keyword(filter, query), query);
      } else if (opts.strategy === 'semantic') {
        // Vector hits exist only for a key (the all-keys preview has none).
        ranked = this.semantic(vec.hits, filter as Scope & { apiKeyId: string }, query);
      } else {
        resolution.fusion = this.fusionFor(settings, opts.fusion);
        ranked = this.hybrid(vec.hits, filter as Scope & { apiKeyId: string }, query, resolution.fusion, extrasFor(settings, opts.extras));
      }
    }

    // The same text under several keys would spend the budget (and the reranker's documents) on repeats.
    let items: RankedRow[] = distinctRows(ranked);

    if (settings.rerankEnabled && settings.rerankProviderModel && query && items.length > 0) {
      const r = await this.d.reranker.rerank(
        query,
        items.map((it) => ({ content: it.content, it })),
        settings.rerankProviderModel,
        signal,
      );
      signal?.throwIfAborted();
      resolution.rerankApplied = r.applied;
      resolution.rerankReason = r.reason;
      if (r.applied) items = r.items.map((x, i) => ({ ...x.it, score: r.scores[i] ?? x.it.score }));
    }

    const walk = selectWithinBudget(items, budget, {
      truncate: (it, max) => {
        const content = truncateToTokens(it.content, max);
        return { ...it, content, tokens: estimateTokens(content), truncated: true };
      },
    });
    const chosen = opts.limit ? walk.selected.slice(0, opts.limit) : walk.selected;
    const selected = this.publicItems(chosen, mode.contentOnly === true);
    const totalTokens = selected.reduce((a, it) => a + it.tokens, 0);

    // Access counts are bookkeeping: batched in memory and sent as jobs by a timer, never a write on the request path.
    // Counted on the rows (the record cache's, the same objects chat after chat), not looked up by id string.
    if (!mode.preview && apiKeyId !== null && chosen.length > 0) this.access?.recordRows(chosen.map((r) => r.record));
    // Distinct: the duplicate check above ran on the whole list, and rerank, the budget walk and the cut only drop or reorder.
    return { items: selected, resolution, totalTokens, budgetMaxTokens: budget, distinctContent: true };
  }

  /**
   * The public items of the selected rows. A row may come from the record cache, whose access
   * count and last access lag (they change without a change-log entry): they are re-read here,
   * unless the caller only reads the content (`contentOnly`, the chat's injection).
   */
  private publicItems(rows: RankedRow[], contentOnly: boolean): RetrievedItem[] {
    const access = !contentOnly && this.records.enabled && rows.length > 0 ? this.repo.accessOf(rows.map((r) => r.record.id)) : null;
    return rows.map((r) => {
      const memory = toPublic(r.record);
      if (r.truncated) memory.content = r.content;
      const a = access?.get(memory.id);
      if (a) {
        memory.accessCount = a.accessCount;
        memory.lastAccessedAt = a.lastAccessedAt;
      }
      return { memory, score: r.score, tokens: r.tokens, tier: r.tier, vecScore: r.vecScore, ftsScore: r.ftsScore, truncated: r.truncated };
    });
  }

  /**
   * Brings the key's keyword index up to date for this retrieval and puts it in the scope (`warming`: the
   * load this retrieval started, if any). Never loads a whole key on the event loop: a key not held is
   * loaded in slices (warm) first.
   */
  private async catchUpIndex(apiKeyId: string, filter: Scope, warming: Promise<unknown> | null): Promise<void> {
    await warming;
    // Whether this retrieval loaded the key: then what landed during the load is caught up synchronously (index()),
    // never by another load, or a worker importing faster than a load takes would have it reload for as long as it imports.
    let loaded = warming !== null;
    for (;;) {
      // Another key's load may have evicted this one while the embedding was awaited: warm again, so the
      // synchronous code below never loads a whole key on the event loop (nothing below awaits before it is used).
      while (!this.keywordIndex.holds(apiKeyId)) {
        await this.keywordIndex.warm(apiKeyId);
        loaded = true;
      }
      // The one change-log catch-up of this retrieval: everything below (ranking, and the rows read
      // through the record cache it invalidates) sees the key as of this point. The vector tier
      // already caught up (knownLiveness) when the key was held then: that copy, still held, is it.
      if (filter.index && this.keywordIndex.held(apiKeyId) === filter.index) break;
      const index = loaded ? this.keywordIndex.index(apiKeyId) : this.keywordIndex.current(apiKeyId);
      if (index) {
        filter.index = index;
        break;
      }
      // Pruned entries missed, or more changes than a synchronous catch-up should apply: reloaded in slices, once.
      await this.keywordIndex.warm(apiKeyId);
      loaded = true;
    }
    this.records.touch(apiKeyId);
  }

  /** Newest first; with a query, only rows relevant to it (keyword candidates over all rows, not the newest 100). */
  private exact(filter: Scope, query: string) {
    if (!query) {
      return this.repo.recent(filter, RECENT_LIMIT).map((r) => rankedRow(r, null, null, 0, 'recent'));
    }
    // The original's meaning: only rows holding a query word by its own reckoning.
    // Candidates are the newest matching rows (not the bm25 top-N: a weak but newest match must not be cut).
    const candidates = this.keyword(filter, query, false, 'newest');
    // FTS5 found them over every key's rows; a key's reported keyword score is over its own rows, as in the
    // other strategies (null for a row that landed after the index caught up: not scored).
    if (filter.index) {
      const own = filter.index.bm25Of(ftsQueryTerms(query), candidates.map((c) => c.record.rowId));
      for (const c of candidates) {
        const bm25 = own.get(c.record.rowId);
        c.ftsScore = bm25 === undefined ? null : ftsScoreOf(bm25);
      }
    }
    return withRelevance(candidates, query)
      .filter((x) => x.score > 0)
      .sort((a, b) => (a.record.createdAt < b.record.createdAt ? 1 : a.record.createdAt > b.record.createdAt ? -1 : b.record.rowId - a.record.rowId));
  }

  /**
   * Keyword tier: the query's tokens, ranked by bm25 over every row that passes the filters (tenant,
   * session, expiry, retention apply before the ranking and its limit). A key's rows are ranked by
   * its own in-memory index (keyword-index.ts), whose statistics are the key's alone; the all-keys
   * preview (no key) and `newest` (the exact strategy, no statistics) ask FTS5. The original's
   * relevance score is kept as the reported score of the keyword fallback (and as exact's filter),
   * computed by those callers only, but no longer decides the order: it grows with length and
   * repeats, so long chatty rows beat short exact ones.
   */
  private keyword(filter: Scope, query: string, onlyUnembedded = false, order: 'bm25' | 'newest' = 'bm25'): KeywordCandidate[] {
    // Candidates built where the rows are read (ranked(), rowsOf), not copied here (issue #14).
    let rows: KeywordCandidate[];
    const terms = ftsQueryTerms(query);
    if (terms.length === 0) return [];
    if (order === 'newest') {
      rows = candidatesOf(this.repo.fts(ftsMatchOf(terms), filter, FTS_LIMIT, onlyUnembedded, order));
    } else if (filter.apiKeyId === null) {
      // The all-keys preview: the collection is every key's rows, so FTS5's own statistics are the right ones.
      const used = this.discriminatingTerms(filter, terms);
      let found = this.repo.fts(ftsMatchOf(used), filter, FTS_LIMIT, onlyUnembedded);
      if (found.length === 0 && used.length < terms.length) found = this.repo.fts(ftsMatchOf(terms), filter, FTS_LIMIT, onlyUnembedded);
      rows = candidatesOf(found);
    } else {
      const used = this.discriminatingTerms(filter, terms);
      rows = this.ranked(filter, used, FTS_LIMIT, undefined, onlyUnembedded);
      // With per-key statistics a kept term is one this key holds, so this only fires when the
      // filters (session, expiry, retention) leave none of its rows: then the query's own words decide.
      if (rows.length === 0 && used.length < terms.length) rows = this.ranked(filter, terms, FTS_LIMIT, undefined, onlyUnembedded);
    }
    return rows;
  }

  /**
   * Rows matching any of `terms`, best bm25 first, at most `limit`, read whole; `keep` (a predicate
   * beyond the candidate filter) is applied in rank order. A key's rows come from its own index; the
   * all-keys preview (no `keep` there) from FTS5.
   */
  private ranked(
    filter: Scope,
    terms: readonly string[],
    limit: number,
    keep?: (r: CachedRecord) => boolean,
    onlyUnembedded = false,
  ): KeywordCandidate[] {
    if (terms.length === 0) return [];
    if (filter.apiKeyId === null) return candidatesOf(this.repo.fts(ftsMatchOf(terms), filter, limit, onlyUnembedded));
    let hits = this.indexOf(filter, filter.apiKeyId).search(terms, filter, keep || onlyUnembedded ? Infinity : limit);
    // Rows still waiting for their vector are usually a handful among thousands of matches: one
    // statement picks them by the narrow column instead of reading every match whole.
    if (onlyUnembedded) hits = this.repo.unembeddedAmong(hits, limit);
    if (!keep) return this.rowsOf(filter.apiKeyId, hits);
    const out: KeywordCandidate[] = [];
    // Read in pages: most rows pass, so the first page usually fills the list.
    for (let at = 0; at < hits.length && out.length < limit; at += limit * 2) {
      for (const c of this.rowsOf(filter.apiKeyId, hits.slice(at, at + limit * 2))) {
        if (keep(c.record)) out.push(c);
        if (out.length === limit) break;
      }
    }
    return out;
  }

  /** The key's keyword index: the one the retrieval caught up, else caught up now. */
  private indexOf(scope: Scope, apiKeyId: string): TenantKeywordIndex {
    return scope.index ?? this.keywordIndex.index(apiKeyId);
  }

  /**
   * The key's ranked rows, whole, in rank order (gone ones dropped), through the record cache. Every
   * caller caught the key's index (which invalidates the cache) up before, so a row held is as current as the index.
   */
  private rowsOf(apiKeyId: string, hits: readonly { rowId: number; bm25: number }[]): KeywordCandidate[] {
    if (!this.records.enabled) return candidatesOf(this.repo.byRowIds(hits));
    // The usual case once a key is warm: every row held, read through one view of the key's rows.
    const view = this.records.view(apiKeyId);
    if (view) {
      const out: KeywordCandidate[] = new Array(hits.length);
      let i = 0;
      for (; i < hits.length; i++) {
        const record = view.byRowId(hits[i].rowId);
        if (!record) break;
        out[i] = keywordCandidate(record, hits[i].bm25);
      }
      if (i === hits.length) return out;
    }
    const rows = this.throughCache(
      apiKeyId,
      hits.map((h) => h.rowId),
      (rowId) => this.records.byRowId(apiKeyId, rowId),
      (missing) => this.repo.rowsByRowIds(missing),
      (r) => r.rowId,
    );
    const out: KeywordCandidate[] = [];
    for (let i = 0; i < hits.length; i++) {
      const record = rows[i];
      if (record) out.push(keywordCandidate(record, hits[i].bm25));
    }
    return out;
  }

  /** The key's rows by public id (the vector hits), in the given order, missing and other keys' ids dropped; through the record cache. */
  private recordsByIds(apiKeyId: string, ids: readonly string[]): CachedRecord[] {
    const rows = this.throughCache(
      apiKeyId,
      ids,
      (id) => this.records.byId(apiKeyId, id),
      (missing) => this.repo.rowsByIds(missing),
      (r) => r.id,
    );
    return rows.filter((r): r is CachedRecord => r !== undefined);
  }

  /**
   * The key's rows for `keys` (row ids or public ids), position for position (undefined: gone): those
   * the record cache holds, the rest read in one statement and kept there.
   */
  private throughCache<K extends number | string>(
    apiKeyId: string,
    keys: readonly K[],
    held: (k: K) => CachedRecord | undefined,
    read: (missing: K[]) => { record: CachedRecord; metadataChars: number }[],
    keyOf: (r: CachedRecord) => K,
  ): Array<CachedRecord | undefined> {
    const out: Array<CachedRecord | undefined> = new Array(keys.length);
    let missing: K[] | null = null;
    for (let i = 0; i < keys.length; i++) {
      const r = this.records.enabled ? held(keys[i]) : undefined;
      out[i] = r;
      if (!r) (missing ??= []).push(keys[i]);
    }
    // The usual case once a key is warm: every row held.
    if (!missing) return out;
    const found = new Map<K, CachedRecord>();
    for (const { record, metadataChars } of read(missing)) {
      // The index is the key's own, so a row of another key is one that moved since: never served.
      if (record.apiKeyId !== apiKeyId) continue;
      found.set(keyOf(record), record);
      this.records.put(apiKeyId, record, metadataChars);
    }
    for (let i = 0; i < keys.length; i++) out[i] ??= found.get(keys[i]);
    return out;
  }

  /** bm25's collection statistics of the terms: the key's own (its index), or FTS5's over all keys for the all-keys preview. */
  private termStats(scope: Scope, terms: readonly string[]): { rows: number; docFreqs: number[] } {
    if (scope.apiKeyId !== null) return this.indexOf(scope, scope.apiKeyId).stats(terms);
    // The keyword tier and the fusion ask for the same terms in one request, so the last answer is kept.
    const key = terms.join('\u0000');
    if (this.lastTermStats?.key !== key || performance.now() - this.lastTermStats.at > 1000) {
      this.lastTermStats = { key, at: performance.now(), value: this.repo.termStats(terms) };
    }
    return this.lastTermStats.value;
  }

  /** The query terms the keyword ranking uses: common ones dropped (retrieval-scoring.ts withoutCommonTerms). */
  private discriminatingTerms(scope: Scope, terms: string[]): string[] {
    if (terms.length < 2) return terms;
    const stats = this.termStats(scope, terms);
    return withoutCommonTerms(terms, stats.rows, stats.docFreqs, COMMON_TERM_SHARE);
  }

  /** The fusion in effect: the call's overrides, else the settings, else the method's defaults (rrf: env). */
  private fusionFor(settings: MemorySettings, override: RetrieveOptions['fusion']): FusionChoice {
    const method = override?.method ?? settings.hybridFusion;
    const def =
      method === 'rrf'
        ? { fts: this.d.env.MEMORY_RRF_FTS_WEIGHT, vector: this.d.env.MEMORY_RRF_VECTOR_WEIGHT }
        : CONVEX_DEFAULT_WEIGHTS;
    const ftsWeight = override?.ftsWeight ?? settings.hybridFtsWeight ?? def.fts;
    const vectorWeight = override?.vectorWeight ?? settings.hybridVectorWeight ?? def.vector;
    // Two zero weights would rank nothing (validation refuses them together; a stored one plus an override can still meet).
    if (ftsWeight === 0 && vectorWeight === 0) return { method, ftsWeight: def.fts, vectorWeight: def.vector };
    return { method, ftsWeight, vectorWeight };
  }

  private async vectorHits(
    apiKeyId: string,
    query: string,
    filter: Scope,
    settings: ReturnType<SettingsService['memory']>,
    signal: AbortSignal | undefined,
  ): Promise<VectorOutcome> {
    if (!this.d.vectors.available()) return { hits: null, reason: 'sqlite-vec not available (degraded to FTS5)' };
    let embedded;
    try {
      // Cached per key: a shared cache's hit would tell a key that another one just asked the same text.
      embedded = await this.d.embedding.embedOne(query, settings, signal, apiKeyId);
    } catch (err) {
      return { hits: null, reason: `embedding failed: ${sanitizeEmbeddingMessage((err as Error).message)}` };
    }
    if (!embedded.resolution.source) return { hits: null, reason: embedded.resolution.reason || 'no embedding source configured' };
    if (!embedded.vector) return { hits: null, reason: 'the query has no words the embedding model knows' };
    const signature = this.d.vectors.signatureFor(embedded.resolution);
    if (!signature) return { hits: null, reason: NOT_BUILT_FOR_MODEL };
    const qdrant = this.d.qdrant && this.d.qdrantSettings?.selected() ? this.d.qdrant : null;
    // The store's search reads the index's signature in the statement it reads anyway and refuses another: then
    // the check below is left to its error path (sqliteVecHits), one statement less per chat (issue 14).
    const checkInSearch = !qdrant && this.d.vectors.searchChecksSignature === true;
    if (!checkInSearch && this.d.vectors.activeSignature() !== signature) return { hits: null, reason: NOT_BUILT_FOR_MODEL };
    // Qdrant first when selected; unhealthy, erroring, timing out or empty → sqlite-vec (then FTS5), with the reason.
    let qdrantNote: string | null = null;
    if (qdrant) {
      const q = await this.qdrantHits(apiKeyId, embedded.vector, filter, signature, signal);
      signal?.throwIfAborted();
      if (q.hits) return { hits: q.hits, reason: null, store: 'qdrant' };
      qdrantNote = q.reason;
    }
    const fromSqlite = await this.sqliteVecHits(apiKeyId, embedded.vector, filter, signature, signal, checkInSearch);
    if (!qdrantNote) return fromSqlite;
    if (fromSqlite.hits === null) return { hits: null, reason: `${qdrantNote}; ${fromSqlite.reason}` };
    return { ...fromSqlite, store: 'sqlite-vec', note: `${qdrantNote}; served by sqlite-vec` };
  }

  private countQdrantFallback(label: QdrantFallbackLabel): void {
    this.qdrantFallbacks.set(label, (this.qdrantFallbacks.get(label) ?? 0) + 1);
  }

  /** The Qdrant tier's hits, or why it cannot serve this query (counted for the metric). */
  private async qdrantHits(apiKeyId: string, vector: Float32Array, filter: CandidateFilter, signature: string, signal: AbortSignal | undefined): Promise<VectorOutcome> {
    try {
      const hits = await this.d.qdrant!.search({
        apiKeyId,
        vector,
        k: this.d.env.MEMORY_VEC_TOP_K,
        filter: { nowIso: filter.nowIso, freshAfterIso: filter.freshAfterIso, sessionId: filter.sessionId, signature },
        signal,
      });
      if (hits.length === 0) {
        this.countQdrantFallback('empty');
        return { hits: null, reason: 'qdrant returned no hits for this key' };
      }
      return { hits: hits.filter((h) => h.score >= MIN_VECTOR_SCORE).map((h) => ({ id: h.id, score: h.score })), reason: null };
    } catch (err) {
      if (err instanceof VectorUnavailableError) {
        this.countQdrantFallback(err.reason);
        // No alias yet (or none behind it): the first backfill has not completed.
        if (err.reason === 'index_not_built') return { hits: null, reason: QDRANT_INDEX_PENDING };
        return { hits: null, reason: `qdrant unavailable (${err.reason})` };
      }
      this.countQdrantFallback('error');
      this.d.log.warn({ err: { message: (err as Error).message } }, 'qdrant search failed; using sqlite-vec');
      return { hits: null, reason: 'qdrant search failed' };
    }
  }

  /** `checkInSearch`: the caller left the index's signature to the search (searchChecksSignature); its refusal is answered as that check would have. */
  private async sqliteVecHits(apiKeyId: string, vector: Float32Array, filter: Scope, signature: string, signal: AbortSignal | undefined, checkInSearch = false): Promise<VectorOutcome> {
    const embedded = { vector };
    try {
      const hits = await this.d.vectors.search({
        apiKeyId,
        vector: embedded.vector,
        k: this.d.env.MEMORY_VEC_TOP_K,
        filter: { nowIso: filter.nowIso, freshAfterIso: filter.freshAfterIso, sessionId: filter.sessionId, signature },
        signal,
        known: this.knownLiveness(apiKeyId, filter),
      });
      if (hits.length === 0) return { hits: null, reason: 'vector index has no rows for this key yet' };
      return { hits: hits.filter((h) => h.score >= MIN_VECTOR_SCORE).map((h) => ({ id: h.id, score: h.score })), reason: null };
    } catch (err) {
      // What the skipped check would have answered before the search (the rebuild for another model, or none yet).
      if (checkInSearch && this.d.vectors.activeSignature() !== signature) return { hits: null, reason: NOT_BUILT_FOR_MODEL };
      if (err instanceof VectorUnavailableError) return { hits: null, reason: `vector search unavailable: ${err.reason}` };
      this.d.log.warn({ err: { message: (err as Error).message } }, 'vector search failed; using keywords');
      return { hits: null, reason: 'vector search failed (degraded to FTS5)' };
    }
  }

  /**
   * The vector tier's liveness answers from the record cache (issue #14: the scan's top rows were
   * joined to memories by one SQL statement per search, ~5 % of a memory-on chat), or undefined when
   * the cache cannot vouch for the key. The key's index is caught up here first, which drops every
   * row changed since from the cache (memory_kw_log logs each insert, delete and change of owner,
   * session, expiry or updated_at, whichever process writes); a row still held is then as current as
   * SQLite, and its filters are compared as `candidateFilterSql` compares them. Expiry needs no log
   * entry to pass: it is compared with the search's own instant. A row not held, or holding a value
   * SQLite would compare otherwise (not text), is left to the store's SQL.
   */
  private knownLiveness(apiKeyId: string, filter: Scope): KnownLiveness | undefined {
    // The cache is only as current as a held index copy; while the key loads (or without a cache) the store asks SQLite.
    if (!this.records.enabled) return undefined;
    // The retrieval's catch-up (retrieve reuses it while this copy stays held); null when the key is not
    // held or has more changes than a synchronous catch-up should apply (retrieve reloads it in slices).
    const index = this.keywordIndex.current(apiKeyId);
    if (!index) return undefined;
    filter.index = index;
    const { nowIso, freshAfterIso, sessionId } = filter;
    // The key's rows as held now (the store asks synchronously, in this turn); a view finds nothing once they are dropped.
    const view = this.records.view(apiKeyId);
    if (!view) return undefined;
    return (rowId) => {
      const r = view.byRowId(rowId);
      if (!r) return undefined;
      // Both sides are text, and the instants are ASCII: JavaScript's order is SQLite's BINARY order.
      const expires: unknown = r.expiresAt;
      if (expires !== null) {
        if (typeof expires !== 'string') return undefined;
        if (!(expires > nowIso)) return null;
      }
      if (freshAfterIso !== null) {
        const updated: unknown = r.updatedAt;
        if (typeof updated !== 'string') return undefined;
        if (!(updated >= freshAfterIso)) return null;
      }
      if (sessionId !== null && r.sessionId !== sessionId) return null;
      return r.id;
    };
  }

  /** Vector ranking; rows not embedded yet are still reachable through keywords, after the vector hits. */
  private semantic(all: { id: string; score: number }[], filter: Scope & { apiKeyId: string }, query: string) {
    // Alone, the vector tier needs a relevance floor relative to its best hit (hybrid lets RRF weigh them instead).
    const floor = all.length ? all[0].score * RELATIVE_VECTOR_FLOOR : 0;
    const hits = all.filter((h) => h.score >= floor);
    const records = new Map(this.recordsByIds(filter.apiKeyId, hits.map((h) => h.id)).map((r) => [r.id, r]));
    const out: RankedRow[] = [];
    for (const h of hits) {
      const record = records.get(h.id);
      if (record) out.push(rankedRow(record, h.score, null, h.score, 'vector'));
    }
    if (this.repo.hasUnembedded(filter)) {
      const seen = new Set(out.map((o) => o.record.id));
      for (const c of this.keyword(filter, query, true)) if (!seen.has(c.record.id)) out.push(rankedRow(c.record, c.vecScore, c.ftsScore, 0, 'fts5'));
    }
    return out;
  }

  /**
   * Fuses the vector and keyword rankings. `rrf`: weighted reciprocal rank fusion (ranks only).
   * `convex` (Bruch et al. 2023): (w_fts·kw + w_vec·vec) / (w_fts + w_vec) where kw = bm25 divided
   * by the query's own scale Σ idf(t) over the key's own statistics (its keyword index), capped at 1 — a list of name-only
   * matches stays near 0 instead of being stretched to 1 by min-max over the list — and vec = the
   * cosine min-max normalised over the vector hits: static models score everything 0.4–0.7, so raw
   * cosine would hand every vector hit a bonus a keyword-only candidate (its cosine unknown, below
   * the k-th hit) never gets.
   */
  private hybrid(hits: { id: string; score: number }[], filter: Scope & { apiKeyId: string }, query: string, fusion: FusionChoice, extras: RetrievalExtras): RankedRow[] {
    // Issue #10 item 4: a temporal question also draws the keyword matches dated in its window (setting hybridTemporalBoost).
    const window = extras.temporalBoost ? dateWindowOf(query, new Date(filter.nowIso)) : null;
    const kw = window ? mergeById(this.keyword(filter, query), this.keywordInWindow(filter, query, window), (c) => c.record.id) : this.keyword(filter, query);
    // The fused order: ids best first and their scores (convexFuseRanking: convexFuse's without its per-hit objects).
    let ids: string[];
    let scores: number[];
    if (fusion.method === 'convex') {
      const terms = ftsQueryTerms(query);
      const stats = kw.length ? this.termStats(filter, terms) : { rows: 0, docFreqs: [] };
      const scale = kw.length ? bm25QueryScale(stats.rows, stats.docFreqs) : 1;
      const kwList = kw.map((c) => ({ id: c.record.id, score: scale > 0 ? -c.bm25 / scale : 0 }));
      ({ ids, scores } = convexFuseRanking<string>(
        [
          // Issue #10 item 4: relevance floors and the RM3 expansion list, each a setting (retrieval-extras.ts).
          applyScoreFloor(minMaxNormalise(hits), extras.vectorFloor),
          applyScoreFloor(kwList, extras.keywordFloor, window ? new Set(kw.filter((c) => inWindow(window, memoryDay(c.record.metadata, c.record.createdAt))).map((c) => c.record.id)) : undefined),
          extras.prfWeight ? this.expansionList(kw, kwList, terms, filter) : [],
        ],
        [fusion.vectorWeight, fusion.ftsWeight, fusion.ftsWeight * (extras.prfWeight ?? 0)],
      ));
    } else {
      const fused = rrfFuse<string>(
        [hits.map((h, i) => ({ id: h.id, rank: i + 1 })), kw.map((c, i) => ({ id: c.record.id, rank: i + 1 }))],
        { k: this.d.env.MEMORY_RRF_K, weights: [fusion.vectorWeight, fusion.ftsWeight] },
      );
      ids = fused.map((f) => f.id);
      scores = fused.map((f) => f.score);
    }
    const tier = fusion.method === 'convex' ? ('hybrid-convex' as const) : ('hybrid-rrf' as const);
    // Built by loops, as new Map(entries) builds them (a later duplicate id wins), without an entry array per hit.
    const vecScore = new Map<string, number>();
    for (const h of hits) vecScore.set(h.id, h.score);
    const kwById = new Map<string, KeywordCandidate>();
    for (const c of kw) kwById.set(c.record.id, c);
    let missing: string[] | null = null;
    for (const id of ids) if (!kwById.has(id)) (missing ??= []).push(id);
    const records = new Map<string, CachedRecord>();
    if (missing) for (const r of this.recordsByIds(filter.apiKeyId, missing)) records.set(r.id, r);
    const out: RankedRow[] = [];
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      const k = kwById.get(id);
      const record = k?.record ?? records.get(id);
      if (!record) continue;
      out.push(rankedRow(record, vecScore.get(id) ?? null, k?.ftsScore ?? null, scores[i]!, tier));
    }
    // Issue #10 item 4: the window's memories move up by the boost (retrieval-extras.ts).
    return boostInWindow(out, (x) => memoryDay(x.record.metadata, x.record.createdAt), window, extras.temporalBoost);
  }

  /** Issue #10 item 4: RM3 — the keyword matches of the top keyword hits' expansion terms, bm25 ÷ their own Σ idf. */
  private expansionList(kw: KeywordCandidate[], kwList: { id: string; score: number }[], terms: string[], filter: Scope) {
    const feedback = kw.slice(0, PRF_FEEDBACK_DOCS).map((c, i) => ({ text: c.record.content, weight: kwList[i].score }));
    const model = relevanceModel(feedback, new Set(terms));
    if (model.length === 0) return [];
    const stats = this.termStats(filter, model.map((m) => m.term));
    const idf = new Map(model.map((m, i) => [m.term, fts5Idf(stats.rows, stats.docFreqs[i])]));
    const exp = expansionTerms(model, (t) => idf.get(t) ?? 0);
    if (exp.length === 0) return [];
    const scale = exp.reduce((a, t) => a + (idf.get(t) ?? 0), 0);
    return this.ranked(filter, exp, FTS_LIMIT).map((r) => ({ id: r.record.id, score: scale > 0 ? -r.bm25 / scale : 0 }));
  }

  /** Issue #10 item 4: keyword candidates dated inside a temporal question's window. */
  private keywordInWindow(filter: Scope, query: string, window: DateWindow): KeywordCandidate[] {
    const terms = ftsQueryTerms(query);
    if (terms.length === 0) return [];
    return filter.apiKeyId === null
      ? candidatesOf(this.extrasRepo.ftsInWindow(ftsMatchOf(terms), filter, window, FTS_LIMIT))
      : this.ranked(filter, terms, FTS_LIMIT, (r) => inWindow(window, memoryDay(r.metadata, r.createdAt)));
  }
}

export type { RetrievalStrategy };
