import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { boardJobUrl, followJob, type JobStreamEvent } from './api';

/** The slowest-allowed poll is whatever the caller asks; the fastest is 2 s (the issue's rule). */
export const MIN_POLL_MS = 2000;

/**
 * Calls `fn` now and every `ms` (never faster than 2 s) while `active`; a slow call is never overlapped,
 * and nothing is fetched while the browser tab is hidden.
 */
export function usePoll(fn: () => Promise<void> | void, ms: number, active = true, deps: unknown[] = []): void {
  const saved = useRef(fn);
  saved.current = fn;
  useEffect(() => {
    if (!active) return;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let first = true;
    const tick = async () => {
      try {
        if (first || !document.hidden) await saved.current();
        first = false;
      } finally {
        if (!stopped) timer = setTimeout(tick, Math.max(MIN_POLL_MS, ms));
      }
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [active, ms, ...deps]);
}

export const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** An error in words, announced to screen readers. */
export function ErrorText({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {message(error)}
    </p>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" role="status">
      Loading {what}…
    </p>
  );
}

/** A modal on the native <dialog> (focus trap, Escape closes, focus returns). */
export function Modal({ title, onClose, children, id }: { title: string; onClose: () => void; children: ComponentChildren; id: string }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current!;
    // Focus goes back where it was when the modal goes away (also when it is unmounted rather than closed).
    const opener = document.activeElement as HTMLElement | null;
    if (!d.open) d.showModal();
    const close = () => onClose();
    d.addEventListener('close', close);
    return () => {
      d.removeEventListener('close', close);
      if (opener?.isConnected) opener.focus();
    };
  }, []);
  return (
    <dialog ref={ref} class="modal" aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>{title}</h2>
      {children}
    </dialog>
  );
}

/** A yes/no question in a modal. */
export function Confirm({ title, children, confirmLabel, onConfirm, onCancel, danger = false }: { title: string; children: ComponentChildren; confirmLabel: string; onConfirm: () => void; onCancel: () => void; danger?: boolean }) {
  return (
    <Modal title={title} onClose={onCancel} id="confirm">
      <div class="modal-body">{children}</div>
      <div class="actions">
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
        <button type="button" class={danger ? 'danger' : 'primary'} onClick={onConfirm}>
          {confirmLabel}
        </button>
      </div>
    </Modal>
  );
}

/** Percent and a line of text from a job's progress (a number, or {done,total,failed,phase}). */
export function describeProgress(p: unknown): { pct: number | null; text: string } {
  if (typeof p === 'number') return { pct: Math.max(0, Math.min(100, p)), text: `${Math.round(p)}%` };
  if (p && typeof p === 'object') {
    const o = p as { done?: number; total?: number; failed?: number; phase?: string };
    const parts = [o.phase, typeof o.done === 'number' ? `${o.done}${typeof o.total === 'number' ? ` of ${o.total}` : ''} done` : null, o.failed ? `${o.failed} failed` : null].filter(Boolean);
    const pct = typeof o.done === 'number' && typeof o.total === 'number' && o.total > 0 ? Math.min(100, (o.done / o.total) * 100) : null;
    return { pct, text: parts.join(' · ') || 'running' };
  }
  return { pct: null, text: 'waiting to start' };
}

/**
 * A job followed live through its event stream: a progress bar, a line of text, the outcome, and a
 * link to the job in bull-board. Calls onDone once with the result (or the failure).
 */
export function JobProgress({
  queue,
  jobId,
  label,
  onDone,
  describeResult,
}: {
  queue: string;
  jobId: string;
  label: string;
  onDone?: (ok: boolean, result: unknown) => void;
  /** The finished job's return value in words (default: its scalar fields). */
  describeResult?: (result: unknown) => string | null;
}) {
  const [state, setState] = useState<string>('connecting');
  const [progress, setProgress] = useState<unknown>(null);
  const [result, setResult] = useState<unknown>(null);
  const [error, setError] = useState<unknown>(null);
  const done = useRef(onDone);
  done.current = onDone;
  useEffect(() => {
    const ac = new AbortController();
    const on = (e: JobStreamEvent) => {
      if (e.type === 'state') {
        setState(e.job.state);
        setProgress(e.job.progress);
      } else if (e.type === 'progress') {
        setState('active');
        setProgress(e.data);
      } else if (e.type === 'completed') {
        setState('completed');
        setResult(e.returnvalue);
        done.current?.(true, e.returnvalue);
      } else if (e.type === 'failed') {
        setState('failed');
        setError(new Error(`The job failed: ${e.failedReason || 'no reason given'}`));
        done.current?.(false, e.failedReason);
      }
    };
    followJob(queue, jobId, on, ac.signal).catch((err) => setError(err));
    return () => ac.abort();
  }, [queue, jobId]);
  const d = describeProgress(progress);
  const pct = state === 'completed' ? 100 : d.pct;
  const resultText = describeResult && result !== null ? describeResult(result) : result && typeof result === 'object' ? summarise(result as Record<string, unknown>) : null;
  return (
    <div class="job">
      <div class="job-head">
        <span>
          {label}: <strong>{state}</strong>
        </span>
        <a href={boardJobUrl(queue, jobId)} target="_blank" rel="noopener">
          Open job {jobId} in bull-board
        </a>
      </div>
      {pct === null ? (
        <progress aria-label={`${label} progress`} />
      ) : (
        <progress aria-label={`${label} progress`} max={100} value={Math.round(pct)} data-pct={Math.round(pct)} />
      )}
      <p class="muted" aria-live="polite">
        {state === 'completed' ? `Finished${resultText ? `: ${resultText}` : ''}` : d.text}
      </p>
      <ErrorText error={error} />
    </div>
  );
}

/** Short "k: v" text of a result object's scalar fields. */
export function summarise(o: Record<string, unknown>): string {
  return Object.entries(o)
    .filter(([, v]) => v === null || ['string', 'number', 'boolean'].includes(typeof v) || Array.isArray(v))
    .map(([k, v]) => `${k} ${Array.isArray(v) ? v.length : String(v)}`)
    .join(', ');
}

/** A labelled form control row. */
export function Field({ label, id, children, hint }: { label: string; id: string; children: ComponentChildren; hint?: string }) {
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {children}
      {hint ? (
        <small id={`${id}-hint`} class="muted">
          {hint}
        </small>
      ) : null}
    </div>
  );
}

/** A green/red/grey status chip with its text (colour is never the only signal). */
export function Chip({ ok, label, detail }: { ok: boolean | null; label: string; detail?: string | null }) {
  return (
    <span class={`chip ${ok === null ? 'off' : ok ? 'ok' : 'bad'}`} title={detail ?? undefined}>
      <span aria-hidden="true">{ok === null ? '○' : ok ? '●' : '✕'}</span> {label}: {ok === null ? 'off' : ok ? 'ok' : 'down'}
      {detail ? <span class="sr-only"> ({detail})</span> : null}
    </span>
  );
}

/** The API keys the operator can choose from (GET /api/keys). */
export interface KeyInfo {
  id: string;
  name: string;
  prefix: string;
  revokedAt: string | null;
}

/** A select of API keys; '' means "all keys" (or "none" where `noneLabel` says so). */
export function KeySelect({ id, value, onChange, keys, noneLabel = 'All API keys' }: { id: string; value: string; onChange: (v: string) => void; keys: KeyInfo[]; noneLabel?: string }) {
  return (
    <select id={id} value={value} onChange={(e) => onChange((e.target as HTMLSelectElement).value)}>
      <option value="">{noneLabel}</option>
      {keys.map((k) => (
        <option key={k.id} value={k.id}>
          {k.name} ({k.prefix}…){k.revokedAt ? ' — revoked' : ''}
        </option>
      ))}
    </select>
  );
}
