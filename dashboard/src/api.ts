/**
 * The dashboard's only way to the server: same-origin fetch with the session cookie (HttpOnly, never
 * seen by this code) plus the CSRF header that /api requires of a browser session. No token is ever
 * stored in the page: sign-in posts it once and the server answers with the cookie.
 */
export const CSRF_HEADER = 'x-engram-csrf';

/** An API error in words: status, the server's code and message, and the zod paths it named. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

type Listener = () => void;
const signedOutListeners = new Set<Listener>();
/** Called when any call answers 401 (the session ended or was revoked). */
export function onSignedOut(l: Listener): () => void {
  signedOutListeners.add(l);
  return () => signedOutListeners.delete(l);
}

async function errorOf(res: Response, method: string, path: string): Promise<ApiError> {
  let code = `http_${res.status}`;
  let message = res.statusText || `HTTP ${res.status}`;
  try {
    const body = (await res.json()) as { error?: { code?: string; message?: string; details?: unknown } };
    if (body?.error?.message) message = body.error.message;
    if (body?.error?.code) code = body.error.code;
    const details = Array.isArray(body?.error?.details) ? (body.error.details as { path?: string; message?: string }[]) : [];
    const paths = details.filter((d) => d?.path && d?.message).map((d) => `${d.path}: ${d.message}`);
    if (paths.length && !paths.every((p) => message.includes(p))) message = `${message} (${paths.join('; ')})`;
  } catch {
    // Not JSON (a proxy's page): the status line says enough.
  }
  if (res.status === 404 && code === 'not_found' && /No such API route/.test(message)) {
    message = `This server has no ${method} ${path.split('?')[0]} (not available in this version)`;
  }
  return new ApiError(res.status, code, `${message} [${res.status}]`);
}

function headers(extra: Record<string, string> = {}): Record<string, string> {
  return { accept: 'application/json', [CSRF_HEADER]: '1', ...extra };
}

/** Low-level call: the raw Response when ok, else a thrown ApiError (401 also tells the app to sign in again). */
export async function raw(method: string, path: string, init: { body?: BodyInit; contentType?: string; signal?: AbortSignal; accept?: string } = {}): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      credentials: 'same-origin',
      headers: headers({ ...(init.contentType ? { 'content-type': init.contentType } : {}), ...(init.accept ? { accept: init.accept } : {}) }),
      body: init.body,
      signal: init.signal,
    });
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err;
    throw new ApiError(0, 'network', `The server did not answer (${(err as Error).message}); is Engram running?`);
  }
  if (!res.ok) {
    const e = await errorOf(res, method, path);
    if (res.status === 401) signedOutListeners.forEach((l) => l());
    throw e;
  }
  return res;
}

/** A JSON call. */
export async function api<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  const res = await raw(method, path, body === undefined ? { signal } : { body: JSON.stringify(body), contentType: 'application/json', signal });
  return (await res.json()) as T;
}

/** Signs in: the server sets the HttpOnly session cookie (shared with /admin/queues). */
export async function signIn(token: string): Promise<void> {
  const res = await fetch('/admin/login', {
    method: 'POST',
    credentials: 'same-origin',
    headers: headers({ 'content-type': 'application/json' }),
    body: JSON.stringify({ token }),
  });
  if (!res.ok) throw await errorOf(res, 'POST', '/admin/login');
}

export async function signOut(): Promise<void> {
  await fetch('/admin/logout', { method: 'POST', credentials: 'same-origin', headers: headers() });
}

export type JobStreamEvent =
  | { type: 'state'; job: { state: string; progress: unknown; failedReason: string | null; returnvalue: unknown } }
  | { type: 'progress'; data: unknown }
  | { type: 'completed'; returnvalue: unknown }
  | { type: 'failed'; failedReason: string };

/** Milliseconds before a dropped event stream is opened again (never faster than 2 s). */
const RECONNECT_MS = 2000;
const MAX_RECONNECTS = 5;

/**
 * Follows one job's server-sent events (GET /api/jobs/:queue/:id/events). fetch, not EventSource:
 * EventSource cannot send the CSRF header. Ends on completed/failed or abort; a dropped stream is
 * reopened after 2 s (the server replays the current state first), at most a few times.
 */
export async function followJob(queue: string, id: string, onEvent: (e: JobStreamEvent) => void, signal: AbortSignal): Promise<void> {
  let attempts = 0;
  for (;;) {
    let finished = false;
    try {
      const res = await raw('GET', `/api/jobs/${encodeURIComponent(queue)}/${encodeURIComponent(id)}/events`, { signal, accept: 'text/event-stream' });
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let cut: number;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          const data = block
            .split('\n')
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).trimStart())
            .join('\n');
          if (!data) continue;
          const e = JSON.parse(data) as JobStreamEvent;
          onEvent(e);
          if (e.type === 'completed' || e.type === 'failed') finished = true;
        }
      }
      if (finished) return;
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof ApiError && err.status !== 0 && err.status !== 503) throw err;
      if (attempts >= MAX_RECONNECTS) throw err;
    }
    if (signal.aborted || finished) return;
    if (++attempts > MAX_RECONNECTS) throw new ApiError(0, 'stream_lost', 'Lost the job’s event stream; open the job in bull-board to see it');
    await new Promise((r) => setTimeout(r, RECONNECT_MS));
  }
}

/** bull-board's page for one job (same session). */
export const boardJobUrl = (queue: string, id: string) => `/admin/queues/queue/${encodeURIComponent(queue)}/${encodeURIComponent(id)}`;
export const boardQueueUrl = (queue: string) => `/admin/queues/queue/${encodeURIComponent(queue)}`;

/** Saves text as a file through the browser (no server round trip). */
export function download(name: string, text: string | Blob, type = 'application/json'): void {
  const blob = text instanceof Blob ? text : new Blob([text], { type });
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
