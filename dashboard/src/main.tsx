import { render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, onSignedOut, signIn, signOut } from './api';
import { EngineTab } from './engine';
import { JobsTab } from './jobs';
import { MemoriesTab } from './memories';
import { PlaygroundTab } from './playground';
import { ErrorText, Loading, type KeyInfo } from './ui';
import './styles.css';

const TABS = [
  { id: 'memories', label: 'Memories' },
  { id: 'playground', label: 'Playground' },
  { id: 'jobs', label: 'Jobs' },
  { id: 'engine', label: 'Engine' },
] as const;
type TabId = (typeof TABS)[number]['id'];

const tabFromHash = (): TabId => {
  const h = location.hash.replace(/^#\/?/, '');
  return (TABS.find((t) => t.id === h)?.id ?? 'memories') as TabId;
};

function SignIn({ onDone }: { onDone: () => void }) {
  const [token, setToken] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await signIn(token);
      setToken('');
      onDone();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <form onSubmit={submit} class="card" aria-labelledby="signin-title">
        <h1 id="signin-title">Engram · Memory Studio</h1>
        <p>Sign in with the management token. The browser keeps only a session cookie (HttpOnly); the token itself is not stored.</p>
        <label for="token">Management token</label>
        <input id="token" type="password" autocomplete="current-password" required value={token} onInput={(e) => setToken((e.target as HTMLInputElement).value)} />
        <ErrorText error={error} />
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        <p class="muted">
          The token is <code>MANAGEMENT_TOKEN</code>, or the file <code>DATA_DIR/management-token</code>.
        </p>
      </form>
    </main>
  );
}

function Health() {
  const [h, setH] = useState<{ working: boolean; latencyMs: number; error?: string } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const check = async () => {
    try {
      setH(await api('GET', '/api/memory/health'));
      setError(null);
    } catch (err) {
      setError(err);
    }
  };
  useEffect(() => {
    void check();
  }, []);
  const ok = h?.working === true && !error;
  const text = error ? `Memory store: error (${(error as Error).message})` : h ? (h.working ? `Memory store healthy (${h.latencyMs} ms)` : `Memory store failing: ${h.error ?? 'self-test failed'}`) : 'Checking memory store…';
  return (
    <button type="button" class={`health ${h || error ? (ok ? 'ok' : 'bad') : ''}`} onClick={check} aria-label={`${text}. Check again`}>
      <span class="dot" aria-hidden="true" /> {ok ? 'Healthy' : h || error ? 'Unhealthy' : 'Checking'}
      <span class="sr-only">{text}</span>
    </button>
  );
}

function Studio({ onSignOut }: { onSignOut: () => void }) {
  const [tab, setTab] = useState<TabId>(tabFromHash());
  const [keys, setKeys] = useState<KeyInfo[] | null>(null);
  const [keysError, setKeysError] = useState<unknown>(null);
  const tabRefs = useRef<Record<string, HTMLButtonElement | null>>({});
  useEffect(() => {
    const on = () => setTab(tabFromHash());
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  const loadKeys = async () => {
    try {
      setKeys((await api<{ keys: KeyInfo[] }>('GET', '/api/keys')).keys);
      setKeysError(null);
    } catch (err) {
      setKeysError(err);
      setKeys([]);
    }
  };
  useEffect(() => {
    void loadKeys();
  }, []);
  const select = (id: TabId, focus = false) => {
    history.replaceState(null, '', `#/${id}`);
    setTab(id);
    if (focus) tabRefs.current[id]?.focus();
  };
  // Arrow keys, Home and End move between tabs (WAI-ARIA tabs pattern).
  const onKey = (e: KeyboardEvent) => {
    const i = TABS.findIndex((t) => t.id === tab);
    const to = e.key === 'ArrowRight' ? (i + 1) % TABS.length : e.key === 'ArrowLeft' ? (i - 1 + TABS.length) % TABS.length : e.key === 'Home' ? 0 : e.key === 'End' ? TABS.length - 1 : -1;
    if (to < 0) return;
    e.preventDefault();
    select(TABS[to].id, true);
  };
  return (
    <>
      <header class="top">
        <h1>Memory Studio</h1>
        <Health />
        <nav aria-label="Operator tools" class="top-links">
          <a href="/admin/queues" target="_blank" rel="noopener">
            Queues (bull-board)
          </a>
          <button
            type="button"
            onClick={async () => {
              await signOut();
              onSignOut();
            }}
          >
            Sign out
          </button>
        </nav>
      </header>
      <nav aria-label="Studio sections" class="tabs">
      <div role="tablist" aria-label="Studio sections" class="tablist" onKeyDown={onKey}>
        {TABS.map((t) => (
          <button
            key={t.id}
            ref={(el) => {
              tabRefs.current[t.id] = el;
            }}
            type="button"
            role="tab"
            id={`tab-${t.id}`}
            aria-selected={tab === t.id}
            aria-controls={`panel-${t.id}`}
            tabIndex={tab === t.id ? 0 : -1}
            onClick={() => select(t.id)}
          >
            {t.label}
          </button>
        ))}
      </div>
      </nav>
      <main class="panel">
        <div role="tabpanel" id={`panel-${tab}`} aria-labelledby={`tab-${tab}`}>
        <ErrorText error={keysError} />
        {keys === null ? (
          <Loading what="API keys" />
        ) : tab === 'memories' ? (
          <MemoriesTab keys={keys} />
        ) : tab === 'playground' ? (
          <PlaygroundTab keys={keys} />
        ) : tab === 'jobs' ? (
          <JobsTab />
        ) : (
          <EngineTab keys={keys} />
        )}
        </div>
      </main>
    </>
  );
}

function App() {
  const [phase, setPhase] = useState<'checking' | 'signed-out' | 'signed-in'>('checking');
  const [error, setError] = useState<unknown>(null);
  useEffect(() => onSignedOut(() => setPhase('signed-out')), []);
  useEffect(() => {
    // One authenticated call decides: 401 → the sign-in form.
    api('GET', '/api/memory/health')
      .then(() => setPhase('signed-in'))
      .catch((err: { status?: number }) => {
        if (err.status === 401) setPhase('signed-out');
        else {
          setError(err);
          setPhase('signed-in');
        }
      });
  }, []);
  if (phase === 'checking') return <Loading what="your session" />;
  if (phase === 'signed-out') return <SignIn onDone={() => setPhase('signed-in')} />;
  return (
    <>
      <ErrorText error={error} />
      <Studio onSignOut={() => setPhase('signed-out')} />
    </>
  );
}

render(<App />, document.getElementById('app')!);
