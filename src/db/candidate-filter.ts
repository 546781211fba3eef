/** The filters every retrieval tier applies: tenant (null = all, management preview), expiry, retention, session. */
export interface CandidateFilter {
  apiKeyId: string | null;
  nowIso: string;
  /** Retention: rows created or re-asserted (updated_at) at or after this instant; null = no window. */
  freshAfterIso: string | null;
  sessionId: string | null;
}

/**
 * The one SQL predicate for CandidateFilter over `memories` aliased `alias` (keyword, recency and
 * vector tiers all use it); binds named parameters into `params`. Only the filters that are set
 * appear, so each shape is its own cached statement and uses its index.
 */
export function candidateFilterSql(f: CandidateFilter, alias: string, params: Record<string, unknown>): string {
  const parts = [`(${alias}.expires_at IS NULL OR ${alias}.expires_at > @nowIso)`];
  params.nowIso = f.nowIso;
  if (f.apiKeyId !== null) {
    parts.push(`${alias}.api_key_id = @apiKeyId`);
    params.apiKeyId = f.apiKeyId;
  }
  if (f.freshAfterIso !== null) {
    parts.push(`${alias}.updated_at >= @freshAfterIso`);
    params.freshAfterIso = f.freshAfterIso;
  }
  if (f.sessionId !== null) {
    parts.push(`${alias}.session_id = @sessionId`);
    params.sessionId = f.sessionId;
  }
  return parts.join(' AND ');
}

/** The one token memory_fts indexes in its `fts_tenant` column for a key (migration 0007: `'t' || lower(hex(api_key_id))`). */
export function ftsTenantToken(apiKeyId: string): string {
  return 't' + Buffer.from(apiKeyId, 'utf8').toString('hex');
}

/**
 * A keyword MATCH expression restricted to one tenant inside the FTS5 index (0007): FTS5 then skips
 * other keys' rows while it intersects doclists, instead of ranking them and leaving the join to drop
 * them. The terms are confined to the content and key columns. `match` must be built by ftsMatchOf
 * (quoted tokens joined by OR). With no tenant (management preview over all keys) it is unchanged.
 */
export function tenantFtsMatch(match: string, apiKeyId: string | null): string {
  return apiKeyId === null ? match : `fts_tenant : "${ftsTenantToken(apiKeyId)}" AND {content key} : (${match})`;
}

/** bm25 over memory_fts with the tenant column weighted 0 (it only narrows the match, never scores). */
export const FTS_BM25 = 'bm25(memory_fts, 1.0, 1.0, 0.0)';
