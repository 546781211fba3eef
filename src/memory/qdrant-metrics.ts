import { Counter, type Registry } from 'prom-client';
import type { RetrievalService } from './retrieval.service';

/** engram_retrieval_qdrant_fallback_total{reason}: Qdrant searches that fell back to sqlite-vec/FTS5 (read from the retrieval service at scrape time). */
export function registerQdrantFallbackMetric(registry: Registry, retrieval: Pick<RetrievalService, 'qdrantFallbacks'>): Counter<'reason'> {
  return new Counter({
    name: 'engram_retrieval_qdrant_fallback_total',
    help: 'Retrievals where Qdrant was selected but could not serve (unhealthy, timeout, empty, …) and sqlite-vec or FTS5 answered',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, n] of retrieval.qdrantFallbacks) this.inc({ reason }, n);
    },
  });
}
