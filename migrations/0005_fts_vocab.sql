-- Document frequency per term of the keyword index (issue #10): the keyword tier normalises a row's
-- bm25 by the query's own upper bound Σ idf(t)·(k1+1), and idf needs each term's row count — the
-- same statistics FTS5's bm25() uses. A read-only view of memory_fts's index: nothing to backfill.
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts_vocab USING fts5vocab('memory_fts', 'row');
