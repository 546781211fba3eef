import { useState } from 'preact/hooks';
import { api } from './api';
import { ErrorText, Field, KeySelect, type KeyInfo } from './ui';

interface PreviewItem {
  id: string;
  apiKeyId: string;
  type: string;
  key: string;
  content: string;
  score: number;
  tokens: number;
  tier: string;
  vecScore: number | null;
  ftsScore: number | null;
  truncated?: boolean;
}

interface PreviewAnswer {
  memories: PreviewItem[];
  resolution: {
    embeddingSource: string | null;
    embeddingModel: string | null;
    vectorStore: string;
    strategyUsed: string;
    rerankApplied: boolean;
    rerankReason?: string | null;
    fallbackReason: string | null;
  };
  totalTokensUsed: number;
  budgetMaxTokens: number;
}

const fmt = (n: number | null | undefined, digits = 4) => (typeof n === 'number' ? n.toFixed(digits) : '—');

/** Playground: what retrieval would inject for a query, and how it decided (POST /api/memory/retrieve-preview). */
export function PlaygroundTab({ keys }: { keys: KeyInfo[] }) {
  const [query, setQuery] = useState('');
  const [strategy, setStrategy] = useState<'exact' | 'semantic' | 'hybrid'>('hybrid');
  const [maxTokens, setMaxTokens] = useState(2000);
  const [apiKeyId, setApiKeyId] = useState('');
  const [answer, setAnswer] = useState<PreviewAnswer | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const simulate = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      setAnswer(await api<PreviewAnswer>('POST', '/api/memory/retrieve-preview', { query, strategy, maxTokens, ...(apiKeyId ? { apiKeyId } : {}) }));
    } catch (err) {
      setError(err);
      setAnswer(null);
    } finally {
      setBusy(false);
    }
  };
  const r = answer?.resolution;
  return (
    <div class="stack">
      <section class="card" aria-labelledby="pg-title">
        <h2 id="pg-title">Retrieval playground</h2>
        <p class="muted">Runs the same retrieval a chat request would, without side effects (no access counts).</p>
        <form onSubmit={simulate} class="form">
          <Field label="Query" id="pg-query">
            <textarea id="pg-query" required rows={2} value={query} onInput={(e) => setQuery((e.target as HTMLTextAreaElement).value)} />
          </Field>
          <div class="filters">
            <fieldset class="radios">
              <legend>Strategy</legend>
              {(['exact', 'semantic', 'hybrid'] as const).map((s) => (
                <label key={s}>
                  <input type="radio" name="pg-strategy" value={s} checked={strategy === s} onChange={() => setStrategy(s)} /> {s[0].toUpperCase() + s.slice(1)}
                </label>
              ))}
            </fieldset>
            <Field label="Token budget" id="pg-budget">
              <input id="pg-budget" type="number" min={1} max={16000} required value={maxTokens} onInput={(e) => setMaxTokens(Number((e.target as HTMLInputElement).value))} />
            </Field>
            <Field label="API key" id="pg-key">
              <KeySelect id="pg-key" value={apiKeyId} onChange={setApiKeyId} keys={keys} />
            </Field>
          </div>
          <div class="actions">
            <button type="submit" class="primary" disabled={busy}>
              {busy ? 'Simulating…' : 'Simulate'}
            </button>
          </div>
        </form>
        <ErrorText error={error} />
      </section>

      {r ? (
        <section class="card" aria-labelledby="res-title">
          <h2 id="res-title">Resolution</h2>
          <dl class="kv">
            <dt>Embedding source</dt>
            <dd>{r.embeddingSource ? `${r.embeddingSource}${r.embeddingModel ? ` (${r.embeddingModel})` : ''}` : 'none'}</dd>
            <dt>Vector store</dt>
            <dd>{r.vectorStore}</dd>
            <dt>Strategy used</dt>
            <dd>{r.strategyUsed}</dd>
            <dt>Rerank</dt>
            <dd>{r.rerankApplied ? 'applied' : `not applied${r.rerankReason ? `: ${r.rerankReason}` : ''}`}</dd>
            <dt>Fallback</dt>
            <dd>{r.fallbackReason ?? 'none'}</dd>
            <dt>Tokens</dt>
            <dd>
              {answer!.totalTokensUsed} of {answer!.budgetMaxTokens}
            </dd>
          </dl>
        </section>
      ) : null}

      {answer ? (
        <section class="card" aria-labelledby="results-title">
          <h2 id="results-title">Ranked results ({answer.memories.length})</h2>
          {answer.memories.length === 0 ? (
            <p class="empty" role="status">
              Nothing would be injected for this query{apiKeyId ? ' and key' : ''}.
            </p>
          ) : (
            <ol class="results" aria-label="Ranked results">
              {answer.memories.map((m, i) => (
                <li key={m.id} class="result">
                  <div class="memory-head">
                    <h3>
                      <span class="rank">#{i + 1}</span> {m.key}
                    </h3>
                    <span class={`badge t-${m.type}`}>{m.type}</span>
                  </div>
                  <p class="content">{m.content}</p>
                  <dl class="scores">
                    <div>
                      <dt>score</dt>
                      <dd>{fmt(m.score)}</dd>
                    </div>
                    <div>
                      <dt>tier</dt>
                      <dd>{m.tier}</dd>
                    </div>
                    <div>
                      <dt>tokens</dt>
                      <dd>
                        {m.tokens}
                        {m.truncated ? ' (truncated)' : ''}
                      </dd>
                    </div>
                    <div>
                      <dt>vecScore</dt>
                      <dd>{fmt(m.vecScore)}</dd>
                    </div>
                    <div>
                      <dt>ftsScore</dt>
                      <dd>{fmt(m.ftsScore)}</dd>
                    </div>
                  </dl>
                </li>
              ))}
            </ol>
          )}
        </section>
      ) : null}
    </div>
  );
}
