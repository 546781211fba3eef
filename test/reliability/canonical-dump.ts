import path from 'node:path';
import Database from 'better-sqlite3';
import * as sqliteVec from 'sqlite-vec';
import type { FakeQdrant } from '../helpers/fake-qdrant';

/**
 * A canonical dump of what an Engram holds, for comparing two runs of the same workload (a clean run and one
 * with faults): live memories by a stable identity, which are still flagged for embedding and which have a
 * sqlite-vec row, the Qdrant points of the fake (by the same identity), and the history as a multiset of
 * (identity, op, source). Left out, because two correct runs legitimately differ there: timestamps, random
 * ids (memory uuids of extracted/summary rows, job and request ids, API key ids → replaced by a label), and
 * the provenance fields in metadata (extractedAt, requestId, jobId, generatedAt, summarizedIds).
 */
export interface CanonicalDump {
  memories: string[];
  notEmbedded: string[];
  vectors: string[];
  qdrant: string[];
  history: string[];
}

const VOLATILE_METADATA = new Set(['extractedAt', 'requestId', 'jobId', 'generatedAt', 'summarizedIds']);

interface Row {
  memory_id: number;
  id: string;
  api_key_id: string;
  session_id: string | null;
  type: string;
  key: string | null;
  content: string;
  metadata: string;
  expires_at: string | null;
  needs_reindex: number;
}

function canonicalMetadata(raw: string): string {
  const m = JSON.parse(raw) as Record<string, unknown>;
  return JSON.stringify(Object.fromEntries(Object.entries(m).filter(([k]) => !VOLATILE_METADATA.has(k)).sort(([a], [b]) => (a < b ? -1 : 1))));
}

/**
 * @param owners maps API key ids to stable labels (ids of keys made through the API differ per run).
 * @param stableIds memory ids that are the same in every run (imported records keep theirs).
 */
export function canonicalDump(dataDir: string, opts: { owners: Record<string, string>; stableIds: ReadonlySet<string>; qdrant?: FakeQdrant; qdrantAlias?: string }): CanonicalDump {
  const db = new Database(path.join(dataDir, 'engram.db'), { readonly: true, fileMustExist: true });
  try {
    sqliteVec.load(db);
    const owner = (id: string) => opts.owners[id] ?? id;
    const rows = db.prepare('SELECT memory_id, id, api_key_id, session_id, type, key, content, metadata, expires_at, needs_reindex FROM memories').all() as Row[];
    const identity = (r: { id: string; api_key_id: string; key: string | null; content: string }) => {
      const key = r.key?.startsWith('summary:') ? 'summary:*' : r.key;
      const who = owner(r.api_key_id);
      if (opts.stableIds.has(r.id)) return `${who}#${r.id}`;
      return key ? `${who}/${key}` : `${who}~${r.content.slice(0, 80)}`;
    };
    const byUuid = new Map(rows.map((r) => [r.id, r]));
    const vecIds = new Set((db.prepare('SELECT memory_id FROM vec_memories').all() as { memory_id: number }[]).map((r) => r.memory_id));
    const memories = rows
      .map((r) => `${identity(r)} | ${r.type} | ${r.session_id ?? ''} | ${r.content} | ${canonicalMetadata(r.metadata)} | ${r.expires_at ?? ''}`)
      .sort();
    // Embedded = no longer flagged. A row whose embedding is all zeros (no word the model knows) is done
    // without a vector (vec0 cannot rank one), so which rows have vectors is compared as its own list.
    const notEmbedded = rows.filter((r) => r.needs_reindex !== 0).map(identity).sort();
    const vectors = rows.filter((r) => vecIds.has(r.memory_id)).map(identity).sort();

    // Events of memories that no longer exist are named from their own before/after image.
    const events = db.prepare('SELECT memory_uuid, api_key_id, op, source, before, after FROM memory_events').all() as {
      memory_uuid: string;
      api_key_id: string;
      op: string;
      source: string;
      before: string | null;
      after: string | null;
    }[];
    const history = events
      .map((e) => {
        const live = byUuid.get(e.memory_uuid);
        const image = JSON.parse(e.after ?? e.before ?? '{}') as { key?: string | null; content?: string };
        const who = identity(live ?? { id: e.memory_uuid, api_key_id: e.api_key_id, key: image.key ?? null, content: image.content ?? '' });
        return `${who} ${e.op} ${e.source}`;
      })
      .sort();

    let qdrant: string[] = [];
    if (opts.qdrant) {
      qdrant = opts.qdrant
        .points(opts.qdrantAlias ?? 'engram_memory')
        .map((p) => {
          const pl = p.payload as { memoryId: string; apiKeyId: string; key: string | null; content: string; rowId: number };
          const live = byUuid.get(pl.memoryId);
          const consistent = live && live.memory_id === p.id && live.content === pl.content ? '' : ' (STALE)';
          return `${identity({ id: pl.memoryId, api_key_id: pl.apiKeyId, key: pl.key, content: pl.content })}${consistent}`;
        })
        .sort();
    }
    return { memories, notEmbedded, vectors, qdrant, history };
  } finally {
    db.close();
  }
}

/** Lines of `a` not in `b` and of `b` not in `a` (multisets), how many, and at most `max` of each, for failure messages. */
export function dumpDiff(a: CanonicalDump, b: CanonicalDump, max = 8): string {
  const out: string[] = [];
  for (const part of ['memories', 'notEmbedded', 'vectors', 'qdrant', 'history'] as const) {
    const count = (xs: string[]) => xs.reduce((m, x) => m.set(x, (m.get(x) ?? 0) + 1), new Map<string, number>());
    const ca = count(a[part]);
    const cb = count(b[part]);
    const onlyA = [...ca].filter(([k, n]) => (cb.get(k) ?? 0) < n).map(([k, n]) => `${k} ×${n - (cb.get(k) ?? 0)}`);
    const onlyB = [...cb].filter(([k, n]) => (ca.get(k) ?? 0) < n).map(([k, n]) => `${k} ×${n - (ca.get(k) ?? 0)}`);
    const more = (xs: string[]) => (xs.length > max ? `; … ${xs.length - max} more` : '');
    if (onlyA.length || onlyB.length) out.push(`${part}: clean-only ${onlyA.length} [${onlyA.slice(0, max).join('; ')}${more(onlyA)}] faulty-only ${onlyB.length} [${onlyB.slice(0, max).join('; ')}${more(onlyB)}]`);
  }
  return out.join('\n');
}
