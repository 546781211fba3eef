import { useEffect, useState } from 'preact/hooks';
import { ApiError, api } from './api';
import { Chip, ErrorText, Field, JobProgress, KeySelect, Loading, type KeyInfo } from './ui';

/** GET/PUT /api/settings/qdrant (src/memory/qdrant-settings.ts MaskedQdrantSettings): the key itself never comes back. */
interface QdrantSettings {
  enabled: boolean;
  host: string;
  port: number;
  collection: string;
  embeddingModel: string;
  quantization: 'none' | 'int8' | 'binary';
  hasApiKey: boolean;
  apiKeyMasked: string | null;
}

/** GET /api/settings/qdrant/health (src/vector/qdrant.store.ts QdrantHealth). */
interface QdrantHealth {
  ok: boolean;
  reason: string;
  enabled: boolean;
  reachable: boolean;
  latencyMs: number | null;
  alias: string;
  aliasTarget: string | null;
  collectionExists: boolean;
  dimension: number | null;
  expectedDimension: number | null;
  pointCount: number | null;
  quantization: string;
}

/** POST /api/settings/qdrant/search: `ok: false` carries the reason (Qdrant down, no embedding) in `error`. */
interface SearchAnswer {
  ok: boolean;
  latencyMs: number;
  error?: string;
  results: { id: string; rowId: number; score: number; payload: { apiKeyId?: string; key?: string | null; content?: string; type?: string; memoryId?: string } | null }[];
}

/** The 202 of the backfill and cleanup routes: the job and the queue it runs on. */
interface Started {
  jobId: string;
  queue: string;
}

type JobKind = 'backfill' | 'cleanup';

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** The backfill's return value (src/memory/qdrant-sync.service.ts BackfillProgress) in words. */
function backfillResult(r: unknown): string | null {
  const o = (r ?? {}) as { phase?: string; reason?: string; done?: number; total?: number; failed?: number; collection?: string; dropped?: string[] };
  if (o.phase === 'skipped') return `skipped: ${o.reason ?? 'no reason given'}`;
  if (typeof o.done !== 'number') return null;
  const dropped = o.dropped?.length ? `; dropped the old ${plural(o.dropped.length, 'collection', 'collections')} ${o.dropped.join(', ')}` : '';
  return `${o.done} of ${plural(o.total ?? o.done, 'memory', 'memories')} copied into ${o.collection ?? 'Qdrant'}, ${o.failed ?? 0} failed; the alias points there${dropped}.`;
}

/** The cleanup's return value in words. */
function cleanupResult(r: unknown): string | null {
  const o = (r ?? {}) as { phase?: string; reason?: string; expired?: number; orphans?: number; scanned?: number; deletedCount?: number; collections?: string[] };
  if (o.phase === 'skipped') return `skipped: ${o.reason ?? 'no reason given'}`;
  if (typeof o.deletedCount !== 'number') return null;
  return `deleted ${plural(o.deletedCount, 'point', 'points')} (${o.expired ?? 0} expired, ${o.orphans ?? 0} without a memory) after scanning ${plural(o.scanned ?? 0, 'point', 'points')} in ${plural(o.collections?.length ?? 0, 'collection', 'collections')}.`;
}

const JOB_ROUTES: Record<JobKind, { path: string; label: string; name: string; result: (r: unknown) => string | null }> = {
  backfill: { path: '/api/memory/qdrant/backfill', label: 'Backfill', name: 'qdrant-backfill', result: backfillResult },
  cleanup: { path: '/api/settings/qdrant/cleanup', label: 'Cleanup', name: 'qdrant-cleanup', result: cleanupResult },
};

const checked = (e: Event) => (e.target as HTMLInputElement).checked;
const value = (e: Event) => (e.target as HTMLInputElement).value;

/** One async action with its own busy flag, error and message (so each answer shows next to its button). */
function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = async (fn: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, setError, run };
}

function HealthView({ h }: { h: QdrantHealth }) {
  return (
    <div class="stack" role="status" aria-label="Qdrant connection test">
      <p>
        <Chip ok={h.reachable} label="Connection" detail={h.reachable ? null : h.reason} />{' '}
        {h.reachable ? `Qdrant answered in ${h.latencyMs ?? '?'} ms.` : `Cannot reach Qdrant: ${h.reason === 'not_configured' ? 'no host is configured' : h.reason}`}
      </p>
      {h.reachable ? (
        <>
          <dl class="kv">
            <dt>Alias</dt>
            <dd>{h.alias}</dd>
            <dt>Collection behind it</dt>
            <dd>{h.aliasTarget ?? 'none yet'}</dd>
            <dt>Dimensions</dt>
            <dd>
              {h.dimension ?? '—'} (the active embedding has {h.expectedDimension ?? 'no vectors yet'})
            </dd>
            <dt>Points</dt>
            <dd>{h.pointCount ?? '—'}</dd>
            <dt>Quantization</dt>
            <dd>{h.quantization}</dd>
          </dl>
          <p class={h.ok ? 'ok-text' : 'warning'}>{h.ok ? h.reason : `Not serving searches yet: ${h.reason}`}</p>
        </>
      ) : null}
    </div>
  );
}

function SearchResults({ answer, keys }: { answer: SearchAnswer; keys: KeyInfo[] }) {
  if (!answer.ok) {
    return (
      <p class="error" role="alert">
        The test search failed: {answer.error ?? 'no reason given'}
      </p>
    );
  }
  const keyName = (id: string | undefined) => {
    const k = keys.find((x) => x.id === id);
    return k ? `${k.name} (${k.prefix}…)` : (id ?? 'unknown');
  };
  if (answer.results.length === 0) {
    return (
      <p role="status" class="empty">
        Qdrant returned no point for this query and key ({answer.latencyMs} ms).
      </p>
    );
  }
  return (
    <>
      <p role="status" class="muted">
        {answer.results.length} {answer.results.length === 1 ? 'hit' : 'hits'} from Qdrant in {answer.latencyMs} ms, each re-checked in SQLite.
      </p>
      <ol class="results" aria-label="Qdrant test search results">
        {answer.results.map((r, i) => (
          <li key={r.id} class="result">
            <div class="memory-head">
              <h3>
                <span class="rank">#{i + 1}</span> {r.payload?.key ?? r.payload?.memoryId ?? r.id}
              </h3>
              {r.payload?.type ? <span class={`badge t-${r.payload.type}`}>{r.payload.type}</span> : null}
            </div>
            {r.payload?.content ? <p class="content">{r.payload.content}</p> : null}
            <dl class="scores">
              <div>
                <dt>score</dt>
                <dd>{r.score.toFixed(4)}</dd>
              </div>
              <div>
                <dt>API key</dt>
                <dd>{keyName(r.payload?.apiKeyId)}</dd>
              </div>
              <div>
                <dt>point</dt>
                <dd>{r.rowId}</dd>
              </div>
            </dl>
          </li>
        ))}
      </ol>
    </>
  );
}

/**
 * Qdrant, the second vector tier (issue 11's API): settings with the key masked, a connection test
 * (health), a tenant-scoped test search, and the backfill and cleanup jobs followed through their
 * event streams on the queue each 202 names.
 */
export function QdrantCard({ keys, onChanged }: { keys: KeyInfo[]; onChanged: () => void }) {
  const [loaded, setLoaded] = useState<QdrantSettings | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [f, setF] = useState({ enabled: false, host: '', port: 6333, collection: '', quantization: 'none' as QdrantSettings['quantization'], apiKey: '', removeKey: false });
  const [saved, setSaved] = useState<string | null>(null);
  const [health, setHealth] = useState<QdrantHealth | null>(null);
  const [search, setSearch] = useState({ query: '', apiKeyId: '', topK: 5 });
  const [answer, setAnswer] = useState<SearchAnswer | null>(null);
  const [jobs, setJobs] = useState<Partial<Record<JobKind, Started & { note?: string }>>>({});
  const saving = useAction();
  const testing = useAction();
  const searching = useAction();
  const starting = useAction();

  const apply = (q: QdrantSettings) => {
    setLoaded(q);
    setF({ enabled: q.enabled, host: q.host, port: q.port, collection: q.collection, quantization: q.quantization, apiKey: '', removeKey: false });
  };
  useEffect(() => {
    api<QdrantSettings>('GET', '/api/settings/qdrant').then(apply).catch(setLoadError);
  }, []);

  const saveSettings = (e: Event) => {
    e.preventDefault();
    setSaved(null);
    void saving.run(async () => {
      // Only what changed: an untouched key field keeps the stored key; "Remove" sends "" (the API's way to delete it).
      const patch: Record<string, unknown> = {};
      if (!loaded || f.enabled !== loaded.enabled) patch.enabled = f.enabled;
      if (!loaded || f.host !== loaded.host) patch.host = f.host;
      if (!loaded || f.port !== loaded.port) patch.port = f.port;
      if (!loaded || f.collection !== loaded.collection) patch.collection = f.collection;
      if (!loaded || f.quantization !== loaded.quantization) patch.quantization = f.quantization;
      if (f.removeKey) patch.apiKey = '';
      else if (f.apiKey) patch.apiKey = f.apiKey;
      const wasEnabled = loaded?.enabled ?? false;
      // Turning Qdrant on queues the backfill that builds the index searches use (`backfill`: that job).
      const next = await api<QdrantSettings & { backfill?: Started | null }>('PUT', '/api/settings/qdrant', patch);
      apply(next);
      setHealth(null);
      const notes = ['Qdrant settings saved.'];
      if (next.enabled && !next.host) notes.push('Enabled, but without a host nothing is written to Qdrant.');
      else if (next.enabled && !wasEnabled && next.backfill) {
        const started = next.backfill;
        notes.push('New memories now go to Qdrant as well; a backfill copies the ones already stored (progress below). Searches use Qdrant once it completes.');
        setJobs((j) => ({ ...j, backfill: { jobId: started.jobId, queue: started.queue } }));
      } else if (next.enabled && !wasEnabled) notes.push('New memories now go to Qdrant as well; run “Backfill existing memories” to copy the ones already stored (searches use Qdrant once it completes).');
      setSaved(notes.join(' '));
      onChanged();
    });
  };

  const testConnection = () =>
    testing.run(async () => {
      setHealth(await api<QdrantHealth>('GET', '/api/settings/qdrant/health'));
    });

  const testSearch = (e: Event) => {
    e.preventDefault();
    void searching.run(async () => {
      setAnswer(null);
      // The search is tenant-scoped by design: there is no "all keys" search.
      if (!search.apiKeyId) throw new Error('Choose the API key to search as: a test search only ever sees one key’s memories.');
      setAnswer(await api<SearchAnswer>('POST', '/api/settings/qdrant/search', { query: search.query, apiKeyId: search.apiKeyId, topK: search.topK }));
    });
  };

  const startJob = (kind: JobKind) =>
    starting.run(async () => {
      const route = JOB_ROUTES[kind];
      setJobs((j) => ({ ...j, [kind]: undefined }));
      try {
        const r = await api<Started>('POST', route.path, {});
        setJobs((j) => ({ ...j, [kind]: { jobId: r.jobId, queue: r.queue } }));
      } catch (err) {
        // A backfill already running (409): follow that one instead of only saying so.
        if (err instanceof ApiError && err.status === 409 && /already running/.test(err.message)) {
          const live = await api<{ jobs: { id: string; queue: string; name: string }[] }>('GET', '/api/jobs/list?states=active,waiting,delayed&limit=20').catch(() => null);
          const j = live?.jobs.find((x) => x.name === route.name);
          if (j) {
            setJobs((s) => ({ ...s, [kind]: { jobId: j.id, queue: j.queue, note: `A ${route.label.toLowerCase()} is already running; following it.` } }));
            return;
          }
        }
        throw err;
      }
    });

  const jobDone = () => {
    onChanged();
    // A shown connection test would be stale (point count, alias target): run it again.
    if (health) void testConnection();
  };

  const keyHint = loaded?.hasApiKey ? `A key is stored (${loaded.apiKeyMasked ?? 'hidden'}). Type a new one to replace it; leave empty to keep it.` : 'No key stored. Qdrant Cloud needs one; a local Qdrant usually not.';

  return (
    <section class="card" aria-labelledby="qd-title">
      <h2 id="qd-title">Qdrant</h2>
      <p class="muted">
        A second vector tier for large stores. Engram copies the memory embedding’s own vectors into Qdrant (through jobs) and searches it per API key; when Qdrant is
        down, slow or empty, retrieval answers from sqlite-vec with a reason.
      </p>
      {loadError ? <ErrorText error={loadError} /> : !loaded ? <Loading what="Qdrant settings" /> : null}

      {/* Only once the stored settings are in: a form shown before would let the answer overwrite what was typed. */}
      {loaded ? (
        <form class="form" onSubmit={saveSettings} aria-label="Qdrant settings">
          <label class="check">
            <input type="checkbox" checked={f.enabled} onChange={(e) => setF({ ...f, enabled: checked(e) })} /> Use Qdrant as the vector tier
          </label>
          <div class="filters">
            <Field label="Host" id="qd-host" hint="A host name or URL, e.g. qdrant or https://xyz.cloud.qdrant.io">
              <input id="qd-host" aria-describedby="qd-host-hint" placeholder="http://qdrant" autocomplete="off" value={f.host} onInput={(e) => setF({ ...f, host: value(e) })} />
            </Field>
            <Field label="Port" id="qd-port">
              <input id="qd-port" type="number" min={1} max={65535} required value={f.port} onInput={(e) => setF({ ...f, port: Number(value(e)) })} />
            </Field>
            <Field label="Collection (alias)" id="qd-collection">
              <input id="qd-collection" required pattern="[A-Za-z0-9_\-]+" title="letters, digits, _ and - only" value={f.collection} onInput={(e) => setF({ ...f, collection: value(e) })} />
            </Field>
            <Field label="Quantization" id="qd-quant" hint="Applies to collections created afterwards">
              <select id="qd-quant" aria-describedby="qd-quant-hint" value={f.quantization} onChange={(e) => setF({ ...f, quantization: value(e) as QdrantSettings['quantization'] })}>
                <option value="none">none</option>
                <option value="int8">int8 (scalar)</option>
                <option value="binary">binary</option>
              </select>
            </Field>
            <Field label="Qdrant API key" id="qd-key" hint={keyHint}>
              <input
                id="qd-key"
                type="password"
                autocomplete="new-password"
                aria-describedby="qd-key-hint"
                disabled={f.removeKey}
                value={f.apiKey}
                onInput={(e) => setF({ ...f, apiKey: value(e) })}
              />
            </Field>
          </div>
          {loaded.hasApiKey ? (
            <label class="check">
              <input type="checkbox" checked={f.removeKey} onChange={(e) => setF({ ...f, removeKey: checked(e), apiKey: '' })} /> Remove the stored API key
            </label>
          ) : null}
          <ErrorText error={saving.error} />
          {saved ? (
            <p role="status" class="ok-text">
              {saved}
            </p>
          ) : null}
          <div class="actions wrap">
            <button type="submit" class="primary" disabled={saving.busy}>
              {saving.busy ? 'Saving…' : 'Save Qdrant settings'}
            </button>
            <button type="button" onClick={testConnection} disabled={testing.busy}>
              {testing.busy ? 'Testing…' : 'Test connection'}
            </button>
          </div>
        </form>
      ) : null}
      <ErrorText error={testing.error} />
      {health ? <HealthView h={health} /> : null}

      <h3>Jobs</h3>
      <p class="muted">Backfill copies the memories stored before Qdrant was enabled (it resumes after a crash); cleanup deletes expired points and points whose memory is gone.</p>
      <div class="actions wrap">
        <button type="button" onClick={() => startJob('backfill')} disabled={starting.busy}>
          Backfill existing memories
        </button>
        <button type="button" onClick={() => startJob('cleanup')} disabled={starting.busy}>
          Clean up points
        </button>
      </div>
      <ErrorText error={starting.error} />
      {(['backfill', 'cleanup'] as const).map((kind) => {
        const j = jobs[kind];
        return j ? (
          <div key={`${kind}-${j.jobId}`}>
            {j.note ? <p class="muted">{j.note}</p> : null}
            <JobProgress queue={j.queue} jobId={j.jobId} label={JOB_ROUTES[kind].label} onDone={jobDone} describeResult={JOB_ROUTES[kind].result} />
          </div>
        ) : null;
      })}

      <h3>Test search</h3>
      <form class="inline-form" onSubmit={testSearch} aria-label="Qdrant test search">
        <Field label="Query" id="qd-query">
          <input id="qd-query" required maxLength={4000} value={search.query} onInput={(e) => setSearch({ ...search, query: value(e) })} />
        </Field>
        <Field label="Search as API key" id="qd-search-key">
          <KeySelect id="qd-search-key" value={search.apiKeyId} onChange={(v) => setSearch({ ...search, apiKeyId: v })} keys={keys} noneLabel="Choose a key" />
        </Field>
        <Field label="Hits (top K)" id="qd-topk">
          <input id="qd-topk" type="number" min={1} max={100} required value={search.topK} onInput={(e) => setSearch({ ...search, topK: Number(value(e)) })} />
        </Field>
        <button type="submit" disabled={searching.busy}>
          {searching.busy ? 'Searching…' : 'Test search'}
        </button>
      </form>
      <ErrorText error={searching.error} />
      {answer ? <SearchResults answer={answer} keys={keys} /> : null}
    </section>
  );
}
