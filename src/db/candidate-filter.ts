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
