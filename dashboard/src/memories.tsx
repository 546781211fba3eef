import { useEffect, useRef, useState } from 'preact/hooks';
import { api, download, raw } from './api';
import { Confirm, ErrorText, Field, JobProgress, KeySelect, Loading, Modal, message, type KeyInfo } from './ui';

export const MEMORY_TYPES = ['factual', 'episodic', 'procedural', 'semantic'] as const;
const PAGE_SIZE = 20;
const SEARCH_DEBOUNCE_MS = 300;

export interface Memory {
  id: string;
  apiKeyId: string;
  sessionId: string;
  type: string;
  key: string;
  content: string;
  metadata: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
  expiresAt: string | null;
  accessCount: number;
}

interface ListAnswer {
  data: Memory[];
  total: number;
  page: number;
  totalPages: number;
  stats: { total: number; tokensUsed: number; hitRate: number; byType: Record<string, number> };
}

interface HistoryEvent {
  eventId: number;
  op: string;
  source: string;
  createdAt: string;
  before: Memory | null;
  after: Memory | null;
}

/** Where a bulk job of another issue runs when its 202 does not say (DESIGN §3). */
const QUEUE_OF = { summarize: 'summarize', import: 'import' } as const;

interface Started {
  jobId: string;
  queue: string;
}

const keyName = (keys: KeyInfo[], id: string) => (id ? (keys.find((k) => k.id === id)?.name ?? id) : 'no key');

function StatCard({ label, value }: { label: string; value: string }) {
  return (
    <div class="stat">
      <span class="stat-value">{value}</span>
      <span class="stat-label">{label}</span>
    </div>
  );
}

function AddMemory({ keys, defaultKey, onClose, onSaved }: { keys: KeyInfo[]; defaultKey: string; onClose: () => void; onSaved: () => void }) {
  const [f, setF] = useState({ key: '', content: '', type: 'factual', apiKeyId: defaultKey, sessionId: '' });
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const set = (k: keyof typeof f) => (e: Event) => setF({ ...f, [k]: (e.target as HTMLInputElement).value });
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api('POST', '/api/memory', f);
      onSaved();
      onClose();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal title="Add a memory" onClose={onClose} id="add-memory">
      <form onSubmit={submit} class="form">
        <Field label="Key" id="add-key">
          <input id="add-key" required maxLength={512} value={f.key} onInput={set('key')} />
        </Field>
        <Field label="Content" id="add-content">
          <textarea id="add-content" required rows={4} value={f.content} onInput={set('content')} />
        </Field>
        <Field label="Type" id="add-type">
          <select id="add-type" value={f.type} onChange={set('type')}>
            {MEMORY_TYPES.map((t) => (
              <option key={t}>{t}</option>
            ))}
          </select>
        </Field>
        <Field label="API key" id="add-apikey">
          <KeySelect id="add-apikey" value={f.apiKeyId} onChange={(v) => setF({ ...f, apiKeyId: v })} keys={keys} noneLabel="No key (global)" />
        </Field>
        <Field label="Session id (optional)" id="add-session">
          <input id="add-session" maxLength={256} value={f.sessionId} onInput={set('sessionId')} />
        </Field>
        <ErrorText error={error} />
        <div class="actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={busy}>
            {busy ? 'Saving…' : 'Save memory'}
          </button>
        </div>
      </form>
    </Modal>
  );
}

function History({ id }: { id: string }) {
  const [events, setEvents] = useState<HistoryEvent[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    api<{ events: HistoryEvent[] }>('GET', `/api/memory/${encodeURIComponent(id)}/history`)
      .then((r) => setEvents(r.events))
      .catch(setError);
  }, [id]);
  if (error) return <ErrorText error={error} />;
  if (!events) return <Loading what="history" />;
  return (
    <ol class="history" aria-label="History of this memory">
      {events.map((e) => (
        <li key={e.eventId}>
          <strong>{e.op}</strong> by {e.source} at <time dateTime={e.createdAt}>{new Date(e.createdAt).toLocaleString()}</time>
          {e.after && e.before && e.after.content !== e.before.content ? (
            <div class="diff">
              <del>{e.before.content}</del> → <ins>{e.after.content}</ins>
            </div>
          ) : e.after ? (
            <div class="muted">{e.after.content}</div>
          ) : e.before ? (
            <div class="muted">
              <del>{e.before.content}</del>
            </div>
          ) : null}
        </li>
      ))}
    </ol>
  );
}

function MemoryItem({ m, keys, onChanged }: { m: Memory; keys: KeyInfo[]; onChanged: () => void }) {
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState({ key: m.key, content: m.content, type: m.type });
  const [confirming, setConfirming] = useState(false);
  const [showHistory, setShowHistory] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const editBtn = useRef<HTMLButtonElement>(null);
  const save = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      // Only what was edited: a memory without a key keeps none (the API takes no empty key), and a save that changed
      // nothing sends nothing.
      const patch = Object.fromEntries(Object.entries(draft).filter(([field, value]) => value !== m[field as keyof typeof draft]));
      if (Object.keys(patch).length > 0) {
        await api('PUT', `/api/memory/${encodeURIComponent(m.id)}`, patch);
        onChanged();
      }
      setEditing(false);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const remove = async () => {
    setConfirming(false);
    setError(null);
    try {
      await api('DELETE', `/api/memory/${encodeURIComponent(m.id)}`);
      onChanged();
    } catch (err) {
      setError(err);
    }
  };
  const idp = `m-${m.id}`;
  return (
    <li class="card memory" aria-labelledby={`${idp}-key`}>
      {editing ? (
        <form onSubmit={save} class="form" aria-label={`Edit memory ${m.key}`}>
          <Field label="Key" id={`${idp}-edit-key`}>
            <input id={`${idp}-edit-key`} required={m.key !== ''} value={draft.key} onInput={(e) => setDraft({ ...draft, key: (e.target as HTMLInputElement).value })} />
          </Field>
          <Field label="Content" id={`${idp}-edit-content`}>
            <textarea id={`${idp}-edit-content`} required rows={3} value={draft.content} onInput={(e) => setDraft({ ...draft, content: (e.target as HTMLTextAreaElement).value })} />
          </Field>
          <Field label="Type" id={`${idp}-edit-type`}>
            <select id={`${idp}-edit-type`} value={draft.type} onChange={(e) => setDraft({ ...draft, type: (e.target as HTMLSelectElement).value })}>
              {MEMORY_TYPES.map((t) => (
                <option key={t}>{t}</option>
              ))}
            </select>
          </Field>
          <ErrorText error={error} />
          <div class="actions">
            <button
              type="button"
              onClick={() => {
                setEditing(false);
                setDraft({ key: m.key, content: m.content, type: m.type });
                setTimeout(() => editBtn.current?.focus());
              }}
            >
              Cancel
            </button>
            <button type="submit" class="primary" disabled={busy}>
              {busy ? 'Saving…' : 'Save changes'}
            </button>
          </div>
        </form>
      ) : (
        <>
          <div class="memory-head">
            <h3 id={`${idp}-key`}>{m.key}</h3>
            <span class={`badge t-${m.type}`}>{m.type}</span>
          </div>
          <p class="content">{m.content}</p>
          <p class="meta">
            {keyName(keys, m.apiKeyId)}
            {m.sessionId ? ` · session ${m.sessionId}` : ''} · updated <time dateTime={m.updatedAt}>{new Date(m.updatedAt).toLocaleString()}</time>
            {m.expiresAt ? ` · expires ${new Date(m.expiresAt).toLocaleString()}` : ''} · used {m.accessCount}×
          </p>
          <ErrorText error={error} />
          <div class="actions">
            <button
              type="button"
              ref={editBtn}
              onClick={() => {
                // From the memory as shown now (the list may have refreshed since): a stale draft would undo others' edits.
                setDraft({ key: m.key, content: m.content, type: m.type });
                setEditing(true);
              }}
              aria-label={`Edit ${m.key}`}
            >
              Edit
            </button>
            <button type="button" onClick={() => setShowHistory(!showHistory)} aria-expanded={showHistory} aria-label={`History of ${m.key}`}>
              History
            </button>
            <button type="button" class="danger" onClick={() => setConfirming(true)} aria-label={`Delete ${m.key}`}>
              Delete
            </button>
          </div>
          {showHistory ? <History id={m.id} /> : null}
        </>
      )}
      {confirming ? (
        <Confirm title="Delete this memory?" confirmLabel="Delete" danger onConfirm={remove} onCancel={() => setConfirming(false)}>
          <p>
            “{m.key}” will be removed from retrieval. Its text stays in the history (restorable where the server supports it).
          </p>
        </Confirm>
      ) : null}
    </li>
  );
}

/** Summarise old: dry run → count and confirm → job with live progress. */
function SummarizeOld({ apiKeyId, onDone }: { apiKeyId: string; onDone: () => void }) {
  const [days, setDays] = useState(30);
  const [dry, setDry] = useState<{ candidates: number | unknown[]; candidateCount?: number; totalTokens: number } | null>(null);
  const [job, setJob] = useState<Started | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const body = () => ({ olderThanDays: days, dryRun: true, ...(apiKeyId ? { apiKeyId } : {}) });
  const dryRun = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setBusy(true);
    setJob(null);
    try {
      setDry(await api('POST', '/api/memory/summarize', body()));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  // The dry run lists at most 1000 candidates; candidateCount is how many there are.
  const count = (d: { candidates: number | unknown[]; candidateCount?: number }) => d.candidateCount ?? (Array.isArray(d.candidates) ? d.candidates.length : d.candidates);
  const run = async () => {
    setDry(null);
    try {
      const r = await api<{ jobId: string; queue?: string }>('POST', '/api/memory/summarize', { ...body(), dryRun: false });
      setJob({ jobId: r.jobId, queue: r.queue ?? QUEUE_OF.summarize });
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section class="card" aria-labelledby="summarize-title">
      <h2 id="summarize-title">Summarize old memories</h2>
      <form onSubmit={dryRun} class="inline-form">
        <Field label="Older than (days)" id="sum-days">
          <input id="sum-days" type="number" min={1} max={365} required value={days} onInput={(e) => setDays(Number((e.target as HTMLInputElement).value))} />
        </Field>
        <button type="submit" disabled={busy}>
          {busy ? 'Counting…' : 'Summarize old…'}
        </button>
      </form>
      <p class="muted">A dry run counts the candidates first{apiKeyId ? ' for the selected API key' : ' across all API keys'}; nothing changes until you confirm.</p>
      <ErrorText error={error} />
      {dry ? (
        count(dry) === 0 ? (
          <p role="status">No memory is older than {days} days: nothing to summarize.</p>
        ) : (
          <Confirm title="Summarize these memories?" confirmLabel={`Summarize ${count(dry)}`} onConfirm={run} onCancel={() => setDry(null)}>
            <p>
              {count(dry)} memories older than {days} days ({dry.totalTokens} tokens) will be folded into one summary per API key; the originals stay in history.
            </p>
          </Confirm>
        )
      ) : null}
      {job ? <JobProgress queue={job.queue} jobId={job.jobId} label="Summarize" onDone={onDone} /> : null}
    </section>
  );
}

/** JSON of the current page, JSON import through a file picker, NDJSON export/import (a job with progress). */
function ImportExport({ page, apiKeyId, onChanged }: { page: Memory[]; apiKeyId: string; onChanged: () => void }) {
  const [status, setStatus] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [job, setJob] = useState<Started | null>(null);
  const [busy, setBusy] = useState(false);
  const jsonInput = useRef<HTMLInputElement>(null);
  const ndjsonInput = useRef<HTMLInputElement>(null);

  const exportPage = () => {
    download(`engram-memories-page-${new Date().toISOString().slice(0, 19).replace(/:/g, '')}.json`, JSON.stringify(page, null, 2));
    setStatus(`Exported ${page.length} memories of this page as JSON.`);
  };
  const importJson = async (e: Event) => {
    const input = e.target as HTMLInputElement;
    const file = input.files?.[0];
    input.value = '';
    if (!file) return;
    setError(null);
    setBusy(true);
    try {
      let rows: unknown;
      try {
        rows = JSON.parse(await file.text());
      } catch (err) {
        throw new Error(`${file.name} is not JSON: ${message(err)}`);
      }
      if (!Array.isArray(rows)) throw new Error(`${file.name} must hold a JSON array of memories (as “Export page (JSON)” writes)`);
      let ok = 0;
      const failures: string[] = [];
      for (const [i, r] of rows.entries()) {
        const m = r as Partial<Memory>;
        setStatus(`Importing ${i + 1} of ${rows.length}…`);
        try {
          await api('POST', '/api/memory', { key: m.key, content: m.content, type: m.type, apiKeyId: m.apiKeyId ?? '', sessionId: m.sessionId ?? '', metadata: m.metadata ?? {}, ...(m.expiresAt ? { expiresAt: m.expiresAt } : {}) });
          ok++;
        } catch (err) {
          failures.push(`item ${i + 1}: ${message(err)}`);
        }
      }
      setStatus(`Imported ${ok} of ${rows.length} memories from ${file.name}.`);
      if (failures.length) setError(new Error(`${failures.length} not imported — ${failures.slice(0, 5).join('; ')}${failures.length > 5 ? '; …' : ''}`));
      onChanged();
    } catch (err) {
      setError(err);
      setStatus(null);
    } finally {
      setBusy(false);
    }
  };
  const exportNdjson = async () => {
    setError(null);
    if (!apiKeyId) {
      setError(new Error('Choose an API key in the filters above: the NDJSON export is one key’s memories.'));
      return;
    }
    setBusy(true);
    setStatus('Exporting…');
    try {
      const res = await raw('GET', `/api/memory/export?apiKeyId=${encodeURIComponent(apiKeyId)}`, { accept: 'application/x-ndjson' });
      const blob = await res.blob();
      download(`engram-export-${apiKeyId}.ndjson`, blob, 'application/x-ndjson');
      setStatus(`Exported ${(await blob.text()).split('\n').filter(Boolean).length} memories as NDJSON.`);
    } catch (err) {
      setError(err);
      setStatus(null);
    } finally {
      setBusy(false);
    }
  };
  const importNdjson = async (e: Event) => {
    const input = e.target as HTMLInputElement;
    const file = input.files?.[0];
    input.value = '';
    if (!file) return;
    setError(null);
    setJob(null);
    setStatus(`Uploading ${file.name}…`);
    try {
      const res = await raw('POST', '/api/memory/import', { body: file, contentType: file.name.endsWith('.ndjson') || file.name.endsWith('.jsonl') ? 'application/x-ndjson' : 'application/octet-stream' });
      const r = (await res.json()) as { jobId: string; queue?: string };
      setStatus(`Uploaded ${file.name}; importing.`);
      setJob({ jobId: r.jobId, queue: r.queue ?? QUEUE_OF.import });
    } catch (err) {
      setError(err);
      setStatus(null);
    }
  };
  return (
    <section class="card" aria-labelledby="io-title">
      <h2 id="io-title">Export and import</h2>
      <div class="actions wrap">
        <button type="button" onClick={exportPage} disabled={page.length === 0}>
          Export page (JSON)
        </button>
        <button type="button" onClick={() => jsonInput.current?.click()} disabled={busy}>
          Import JSON…
        </button>
        <input ref={jsonInput} type="file" accept="application/json,.json" class="sr-only" tabIndex={-1} aria-label="JSON file to import" onChange={importJson} />
        <button type="button" onClick={exportNdjson} disabled={busy}>
          Export key (NDJSON)
        </button>
        <button type="button" onClick={() => ndjsonInput.current?.click()} disabled={busy}>
          Import NDJSON…
        </button>
        <input ref={ndjsonInput} type="file" accept=".ndjson,.jsonl,.sqlite,.db,application/x-ndjson" class="sr-only" tabIndex={-1} aria-label="NDJSON export or original database to import" onChange={importNdjson} />
      </div>
      {status ? (
        <p role="status" class="muted">
          {status}
        </p>
      ) : null}
      <ErrorText error={error} />
      {job ? <JobProgress queue={job.queue} jobId={job.jobId} label="Import" onDone={onChanged} /> : null}
    </section>
  );
}

export function MemoriesTab({ keys }: { keys: KeyInfo[] }) {
  const [q, setQ] = useState('');
  const [query, setQuery] = useState('');
  const [type, setType] = useState('');
  const [apiKeyId, setApiKeyId] = useState('');
  const [page, setPage] = useState(1);
  const [list, setList] = useState<ListAnswer | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const [adding, setAdding] = useState(false);
  const [reload, setReload] = useState(0);

  // Live search: the query is applied 300 ms after the last keystroke.
  useEffect(() => {
    const t = setTimeout(() => {
      setQuery(q.trim());
      setPage(1);
    }, SEARCH_DEBOUNCE_MS);
    return () => clearTimeout(t);
  }, [q]);

  useEffect(() => {
    const ac = new AbortController();
    setLoading(true);
    const params = new URLSearchParams({ page: String(page), limit: String(PAGE_SIZE) });
    if (query) params.set('q', query);
    if (type) params.set('type', type);
    if (apiKeyId) params.set('apiKeyId', apiKeyId);
    api<ListAnswer>('GET', `/api/memory?${params}`, undefined, ac.signal)
      .then((r) => {
        setList(r);
        setError(null);
        // A page emptied by a delete: step back.
        if (r.data.length === 0 && page > 1 && r.totalPages < page) setPage(Math.max(1, r.totalPages));
      })
      .catch((err) => {
        if ((err as Error).name !== 'AbortError') setError(err);
      })
      .finally(() => {
        if (!ac.signal.aborted) setLoading(false);
      });
    return () => ac.abort();
  }, [query, type, apiKeyId, page, reload]);
  const refresh = () => setReload((n) => n + 1);
  const stats = list?.stats;

  return (
    <div class="stack">
      <details class="card how">
        <summary>How it works</summary>
        <p>
          Engram keeps short facts (“memories”) per API key and optionally per session. On every chat request through <code>/v1/chat/completions</code> it retrieves the
          relevant ones — keywords (FTS5), vectors (sqlite-vec or Qdrant) or both — and injects them into the prompt within the token budget. Facts are extracted from
          conversations by background jobs; you can also add, edit and delete them here. Every change is kept in the memory’s history.
        </p>
      </details>

      <div class="stats" aria-label="Statistics of the listed memories">
        <StatCard label="Total entries" value={stats ? String(stats.total) : '—'} />
        <StatCard label="Tokens used" value={stats ? String(stats.tokensUsed) : '—'} />
        <StatCard label="Cache hit rate" value={stats ? `${Math.round(stats.hitRate * 1000) / 10}%` : '—'} />
      </div>

      <section class="card" aria-labelledby="list-title">
        <div class="row spread">
          <h2 id="list-title">Memories</h2>
          <button type="button" class="primary" onClick={() => setAdding(true)}>
            Add memory
          </button>
        </div>
        <div class="filters">
          <Field label="Search" id="mem-search">
            <input id="mem-search" type="search" placeholder="words in key or content" value={q} onInput={(e) => setQ((e.target as HTMLInputElement).value)} />
          </Field>
          <Field label="Type" id="mem-type">
            <select
              id="mem-type"
              value={type}
              onChange={(e) => {
                setType((e.target as HTMLSelectElement).value);
                setPage(1);
              }}
            >
              <option value="">All types</option>
              {MEMORY_TYPES.map((t) => (
                <option key={t}>{t}</option>
              ))}
            </select>
          </Field>
          <Field label="API key" id="mem-key">
            <KeySelect
              id="mem-key"
              value={apiKeyId}
              onChange={(v) => {
                setApiKeyId(v);
                setPage(1);
              }}
              keys={keys}
            />
          </Field>
        </div>
        <ErrorText error={error} />
        {loading && !list ? <Loading what="memories" /> : null}
        {list && list.data.length === 0 ? (
          <p class="empty" role="status">
            {query || type || apiKeyId ? 'No memory matches these filters.' : 'No memories yet. Add one, import a file, or let chats through /v1 create them.'}
          </p>
        ) : null}
        {list && list.data.length > 0 ? (
          <ul class="memories" aria-busy={loading} aria-label="Memories">
            {list.data.map((m) => (
              <MemoryItem key={`${m.id}-${m.updatedAt}`} m={m} keys={keys} onChanged={refresh} />
            ))}
          </ul>
        ) : null}
        {list && list.totalPages > 1 ? (
          <nav class="pager" aria-label="Pages">
            <button type="button" disabled={page <= 1} onClick={() => setPage(page - 1)}>
              Previous page
            </button>
            <span aria-live="polite">
              Page {list.page} of {list.totalPages} ({list.total} memories)
            </span>
            <button type="button" disabled={page >= list.totalPages} onClick={() => setPage(page + 1)}>
              Next page
            </button>
          </nav>
        ) : null}
      </section>

      <ImportExport page={list?.data ?? []} apiKeyId={apiKeyId} onChanged={refresh} />
      <SummarizeOld apiKeyId={apiKeyId} onDone={refresh} />
      {adding ? <AddMemory keys={keys} defaultKey={apiKeyId} onClose={() => setAdding(false)} onSaved={refresh} /> : null}
    </div>
  );
}
