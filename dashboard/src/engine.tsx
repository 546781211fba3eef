import { useEffect, useState } from 'preact/hooks';
import { ApiError, api } from './api';
import { QdrantCard } from './qdrant';
import { Chip, ErrorText, Field, JobProgress, Loading, usePoll, type KeyInfo } from './ui';

/** Engine status refresh (never faster than 2 s); reindex progress itself comes from the job's event stream. */
const STATUS_POLL_MS = 10_000;

interface EngineStatus {
  keyword: { available: boolean; backend: string; reason?: string };
  embedding: { source: string | null; model: string | null; dimensions: number | null; available: boolean; reason: string | null };
  vectorStore: { backend: string; available: boolean; rowCount: number; needsReindex: number; reason: string };
  qdrant: { enabled: boolean; healthy: boolean | null; latencyMs: number | null; error: string | null };
  rerank: { enabled: boolean; provider: string | null; model: string | null; available: boolean; reason: string };
}

interface MemorySettings {
  enabled: boolean;
  maxTokens: number;
  retentionDays: number;
  strategy: 'recent' | 'semantic' | 'hybrid';
  embeddingSource: 'auto' | 'remote' | 'static' | 'transformers';
  embeddingProviderModel: string | null;
  transformersEnabled: boolean;
  staticEnabled: boolean;
  rerankEnabled: boolean;
  rerankProviderModel: string | null;
  vectorStore: string;
  customBaseUrl: string | null;
  customModelId: string | null;
  extractFromAssistant: boolean;
}

interface Provider {
  provider: string;
  hasKey: boolean;
  models: { id: string; name: string; dimensions: number | null }[];
}

interface Job {
  jobId: string;
  queue: string;
}

const checked = (e: Event) => (e.target as HTMLInputElement).checked;
const value = (e: Event) => (e.target as HTMLInputElement).value;

/** Saves a part of the memory settings and reports in words. */
function useSettingsSave(onSaved: (s: MemorySettings) => void) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const save = async (patch: Partial<MemorySettings>, what: string) => {
    setBusy(true);
    setError(null);
    setSaved(null);
    try {
      const s = await api<MemorySettings>('PUT', '/api/settings/memory', patch);
      onSaved(s);
      setSaved(`${what} saved.`);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, saved, save };
}

function Saved({ text }: { text: string | null }) {
  return text ? (
    <p role="status" class="ok-text">
      {text}
    </p>
  ) : null;
}

function StatusChips({ status, error }: { status: EngineStatus | null; error: unknown }) {
  return (
    <section class="card" aria-labelledby="status-title">
      <h2 id="status-title">Engine status</h2>
      <ErrorText error={error} />
      {!status ? (
        error ? null : <Loading what="engine status" />
      ) : (
        <>
          <div class="chips">
            <Chip ok={status.keyword.available} label="FTS5" detail={status.keyword.reason} />
            <Chip ok={status.embedding.available} label={`Embedding${status.embedding.source ? ` (${status.embedding.source})` : ''}`} detail={status.embedding.reason} />
            <Chip ok={status.vectorStore.available} label={`Vector store (${status.vectorStore.backend})`} detail={status.vectorStore.reason} />
            <Chip ok={status.qdrant.enabled ? status.qdrant.healthy === true : null} label="Qdrant" detail={status.qdrant.error} />
            <Chip ok={status.rerank.enabled ? status.rerank.available : null} label="Rerank" detail={status.rerank.reason} />
          </div>
          <ul class="reasons">
            <li>Embedding: {status.embedding.model ? `${status.embedding.model}${status.embedding.dimensions ? `, ${status.embedding.dimensions} dimensions` : ''}` : (status.embedding.reason ?? 'none')}</li>
            <li>
              Vectors: {status.vectorStore.rowCount} indexed, {status.vectorStore.needsReindex} waiting — {status.vectorStore.reason}
            </li>
            <li>Qdrant: {status.qdrant.enabled ? (status.qdrant.healthy ? `healthy${status.qdrant.latencyMs !== null ? ` (${status.qdrant.latencyMs} ms)` : ''}` : `unhealthy: ${status.qdrant.error ?? 'unknown'}`) : 'off'}</li>
            <li>Rerank: {status.rerank.reason}</li>
          </ul>
        </>
      )}
    </section>
  );
}

function Reindex({ onDone }: { onDone: () => void }) {
  const [force, setForce] = useState(false);
  const [job, setJob] = useState<Job | null>(null);
  const [info, setInfo] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const start = async () => {
    setError(null);
    setInfo(null);
    try {
      const r = await api<{ jobId: string; queue: string; pending: number }>('POST', '/api/memory/reindex', { force });
      setInfo(`Reindex started for ${r.pending} ${r.pending === 1 ? 'memory' : 'memories'}.`);
      setJob({ jobId: r.jobId, queue: r.queue });
    } catch (err) {
      // Already running: follow that one instead.
      if (err instanceof ApiError && err.status === 409) {
        try {
          const running = await api<{ jobs: { id: string; queue: string; name: string }[] }>('GET', '/api/jobs/list?states=active,waiting&limit=5');
          const j = running.jobs.find((x) => x.name === 'reindex');
          if (j) {
            setInfo('A reindex is already running; following it.');
            setJob({ jobId: j.id, queue: j.queue });
            return;
          }
        } catch {
          // Fall through to the 409's own words.
        }
      }
      setError(err);
    }
  };
  return (
    <section class="card" aria-labelledby="reindex-title">
      <h2 id="reindex-title">Reindex</h2>
      <p class="muted">Embeds every memory that waits for a vector (or, forced, all of them) with the current embedding source.</p>
      <div class="row">
        <label class="check">
          <input type="checkbox" checked={force} onChange={(e) => setForce(checked(e))} /> Re-embed everything (force)
        </label>
        <button type="button" class="primary" onClick={start}>
          Reindex now
        </button>
      </div>
      {info ? <p class="muted">{info}</p> : null}
      <ErrorText error={error} />
      {job ? <JobProgress key={job.jobId} queue={job.queue} jobId={job.jobId} label="Reindex" onDone={onDone} /> : null}
    </section>
  );
}

function MemorySettingsCard({ s, onSaved }: { s: MemorySettings; onSaved: (s: MemorySettings) => void }) {
  const [f, setF] = useState({ enabled: s.enabled, maxTokens: s.maxTokens, retentionDays: s.retentionDays, strategy: s.strategy, extractFromAssistant: s.extractFromAssistant });
  const { busy, error, saved, save } = useSettingsSave(onSaved);
  const enabling = f.enabled && !s.enabled;
  return (
    <section class="card" aria-labelledby="ms-title">
      <h2 id="ms-title">Memory settings</h2>
      <form
        class="form"
        onSubmit={(e) => {
          e.preventDefault();
          void save(f, 'Memory settings');
        }}
      >
        <label class="check">
          <input type="checkbox" checked={f.enabled} onChange={(e) => setF({ ...f, enabled: checked(e) })} /> Memory enabled (retrieve, inject and extract on /v1 chats)
        </label>
        {enabling ? (
          <p class="warning" role="note">
            Enabling memory adds up to {f.maxTokens} prompt tokens to every chat request: at this budget, 1,000 requests can cost up to {(f.maxTokens * 1000).toLocaleString()} extra
            input tokens with your upstream provider. Lower the budget below to cap it.
          </p>
        ) : null}
        <div class="filters">
          <Field label="Token budget per request" id="ms-budget">
            <input id="ms-budget" type="number" min={0} max={16000} required value={f.maxTokens} onInput={(e) => setF({ ...f, maxTokens: Number(value(e)) })} />
          </Field>
          <Field label="Retention (days)" id="ms-retention">
            <input id="ms-retention" type="number" min={1} max={365} required value={f.retentionDays} onInput={(e) => setF({ ...f, retentionDays: Number(value(e)) })} />
          </Field>
          <Field label="Strategy" id="ms-strategy">
            <select id="ms-strategy" value={f.strategy} onChange={(e) => setF({ ...f, strategy: value(e) as MemorySettings['strategy'] })}>
              <option value="recent">recent</option>
              <option value="semantic">semantic</option>
              <option value="hybrid">hybrid</option>
            </select>
          </Field>
        </div>
        <label class="check">
          <input type="checkbox" checked={f.extractFromAssistant} onChange={(e) => setF({ ...f, extractFromAssistant: checked(e) })} /> Also extract facts from the assistant’s replies
        </label>
        <ErrorText error={error} />
        <Saved text={saved} />
        <div class="actions">
          <button type="submit" class="primary" disabled={busy}>
            Save memory settings
          </button>
        </div>
      </form>
    </section>
  );
}

function EmbeddingCard({ s, onSaved }: { s: MemorySettings; onSaved: (s: MemorySettings) => void }) {
  const [f, setF] = useState({
    embeddingSource: s.embeddingSource,
    embeddingProviderModel: s.embeddingProviderModel ?? '',
    staticEnabled: s.staticEnabled,
    transformersEnabled: s.transformersEnabled,
    customBaseUrl: s.customBaseUrl ?? '',
    customModelId: s.customModelId ?? '',
  });
  const [providers, setProviders] = useState<Provider[] | null>(null);
  const [provError, setProvError] = useState<unknown>(null);
  const { busy, error, saved, save } = useSettingsSave(onSaved);
  useEffect(() => {
    api<{ providers: Provider[] }>('GET', '/api/memory/embedding-providers')
      .then((r) => setProviders(r.providers))
      .catch(setProvError);
  }, []);
  return (
    <section class="card" aria-labelledby="emb-title">
      <h2 id="emb-title">Embedding source</h2>
      <form
        class="form"
        onSubmit={(e) => {
          e.preventDefault();
          void save(
            { ...f, embeddingProviderModel: f.embeddingProviderModel || null, customBaseUrl: f.customBaseUrl || null, customModelId: f.customModelId || null },
            'Embedding settings (a reindex starts when the model changes)',
          );
        }}
      >
        <fieldset class="radios">
          <legend>Source</legend>
          {(['auto', 'remote', 'static', 'transformers'] as const).map((src) => (
            <label key={src}>
              <input type="radio" name="emb-source" value={src} checked={f.embeddingSource === src} onChange={() => setF({ ...f, embeddingSource: src })} /> {src}
            </label>
          ))}
        </fieldset>
        <label class="check">
          <input type="checkbox" checked={f.staticEnabled} onChange={(e) => setF({ ...f, staticEnabled: checked(e) })} /> Static (model2vec) embeddings allowed
        </label>
        <label class="check">
          <input type="checkbox" checked={f.transformersEnabled} onChange={(e) => setF({ ...f, transformersEnabled: checked(e) })} /> Local transformers embeddings allowed
        </label>
        <Field label="Remote provider and model" id="emb-model">
          <select id="emb-model" value={f.embeddingProviderModel} onChange={(e) => setF({ ...f, embeddingProviderModel: value(e) })}>
            <option value="">None (auto picks)</option>
            {(providers ?? []).map((p) => (
              <optgroup key={p.provider} label={`${p.provider}${p.hasKey ? '' : ' (no API key set)'}`}>
                {p.models.map((m) => (
                  <option key={m.id} value={m.id}>
                    {m.name}
                    {m.dimensions ? ` · ${m.dimensions}d` : ''}
                  </option>
                ))}
              </optgroup>
            ))}
          </select>
        </Field>
        <ErrorText error={provError} />
        <div class="filters">
          <Field label="Custom endpoint (OpenAI-compatible /embeddings base URL)" id="emb-url">
            <input id="emb-url" type="url" placeholder="https://host/v1" value={f.customBaseUrl} onInput={(e) => setF({ ...f, customBaseUrl: value(e) })} />
          </Field>
          <Field label="Custom model id" id="emb-custom-model">
            <input id="emb-custom-model" value={f.customModelId} onInput={(e) => setF({ ...f, customModelId: value(e) })} />
          </Field>
        </div>
        <ErrorText error={error} />
        <Saved text={saved} />
        <div class="actions">
          <button type="submit" class="primary" disabled={busy}>
            Save embedding settings
          </button>
        </div>
      </form>
    </section>
  );
}

function RerankCard({ s, onSaved }: { s: MemorySettings; onSaved: (s: MemorySettings) => void }) {
  const [f, setF] = useState({ rerankEnabled: s.rerankEnabled, rerankProviderModel: s.rerankProviderModel ?? '' });
  const { busy, error, saved, save } = useSettingsSave(onSaved);
  return (
    <section class="card" aria-labelledby="rr-title">
      <h2 id="rr-title">Rerank</h2>
      <form
        class="form"
        onSubmit={(e) => {
          e.preventDefault();
          void save({ rerankEnabled: f.rerankEnabled, rerankProviderModel: f.rerankProviderModel || null }, 'Rerank settings');
        }}
      >
        <label class="check">
          <input type="checkbox" checked={f.rerankEnabled} onChange={(e) => setF({ ...f, rerankEnabled: checked(e) })} /> Rerank retrieved memories
        </label>
        <Field label="Rerank provider/model" id="rr-model" hint="provider/model, e.g. cohere/rerank-v3.5 (the provider's key comes from the environment)">
          <input id="rr-model" aria-describedby="rr-model-hint" value={f.rerankProviderModel} onInput={(e) => setF({ ...f, rerankProviderModel: value(e) })} />
        </Field>
        <ErrorText error={error} />
        <Saved text={saved} />
        <div class="actions">
          <button type="submit" class="primary" disabled={busy}>
            Save rerank settings
          </button>
        </div>
      </form>
    </section>
  );
}

export function EngineTab({ keys }: { keys: KeyInfo[] }) {
  const [status, setStatus] = useState<EngineStatus | null>(null);
  const [statusError, setStatusError] = useState<unknown>(null);
  const [settings, setSettings] = useState<MemorySettings | null>(null);
  const [settingsError, setSettingsError] = useState<unknown>(null);
  const [tick, setTick] = useState(0);
  usePoll(
    async () => {
      try {
        setStatus(await api<EngineStatus>('GET', '/api/memory/engine-status'));
        setStatusError(null);
      } catch (err) {
        setStatusError(err);
      }
    },
    STATUS_POLL_MS,
    true,
    [tick],
  );
  useEffect(() => {
    api<MemorySettings>('GET', '/api/settings/memory').then(setSettings).catch(setSettingsError);
  }, []);
  const refresh = () => setTick((n) => n + 1);
  const onSaved = (s: MemorySettings) => {
    setSettings(s);
    refresh();
  };
  return (
    <div class="stack">
      <StatusChips status={status} error={statusError} />
      <Reindex onDone={refresh} />
      <ErrorText error={settingsError} />
      {!settings ? (
        settingsError ? null : <Loading what="settings" />
      ) : (
        <>
          <MemorySettingsCard s={settings} onSaved={onSaved} />
          <EmbeddingCard s={settings} onSaved={onSaved} />
          <RerankCard s={settings} onSaved={onSaved} />
        </>
      )}
      <QdrantCard keys={keys} onChanged={refresh} />
    </div>
  );
}
