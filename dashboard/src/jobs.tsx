import { useEffect, useState } from 'preact/hooks';
import { api, boardJobUrl, boardQueueUrl, followJob } from './api';
import { Confirm, ErrorText, Loading, describeProgress, message, usePoll } from './ui';

/** Counts every 5 s (never faster than 2 s); a running job's own progress bar is live in Engine/Memories. */
const POLL_MS = 5000;

interface Overview {
  queues: Record<string, Record<string, number>>;
  outbox: number;
  outboxQuarantined: { outboxId: number; jobName: string; jobId: string | null; error: string | null; createdAt: string; quarantinedAt: string | null }[];
  outboxQuarantinedTotal: number;
}

interface JobInfo {
  id: string;
  queue: string;
  name: string;
  state: string;
  progress: unknown;
  attemptsMade: number;
  failedReason: string | null;
  timestamps: { created: number | null; processed: number | null; finished: number | null };
}

const SHOWN_STATES = ['active', 'waiting', 'delayed', 'failed', 'completed'] as const;

/**
 * Running jobs whose bar follows the job's event stream live. Each stream holds one of the browser's six
 * HTTP/1.1 connections to this server, so only a few: the rest show the progress of the last 5 s refresh.
 */
const MAX_LIVE = 3;

/** A running job's progress: live from its event stream, or (`live` false) as last polled. */
function ActiveProgress({ job, live, onEnd }: { job: JobInfo; live: boolean; onEnd: () => void }) {
  const [progress, setProgress] = useState<unknown>(job.progress);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (!live) return;
    const ac = new AbortController();
    followJob(
      job.queue,
      job.id,
      (e) => {
        if (e.type === 'progress') setProgress(e.data);
        else if (e.type === 'state') setProgress(e.job.progress);
        else onEnd();
      },
      ac.signal,
    ).catch((err) => setError(`Live progress unavailable (${message(err)}); the list refreshes every ${POLL_MS / 1000} s`));
    return () => ac.abort();
  }, [job.queue, job.id, live]);
  const d = describeProgress(live ? progress : job.progress);
  const label = `Progress of ${job.name} ${job.id}`;
  return (
    <>
      {d.pct === null ? <progress aria-label={label} /> : <progress aria-label={label} max={100} value={Math.round(d.pct)} />}
      <p class="muted">
        {d.text}
        {live ? ' (live)' : ''}
      </p>
      {error ? <p class="error">{error}</p> : null}
    </>
  );
}

export function JobsTab() {
  const [overview, setOverview] = useState<Overview | null>(null);
  const [jobs, setJobs] = useState<JobInfo[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [actionError, setActionError] = useState<unknown>(null);
  const [status, setStatus] = useState<string | null>(null);
  const [removing, setRemoving] = useState<{ kind: 'job'; job: JobInfo } | { kind: 'outbox'; outboxId: number; jobName: string } | null>(null);
  const [tick, setTick] = useState(0);

  usePoll(
    async () => {
      try {
        const [o, l] = await Promise.all([api<Overview>('GET', '/api/jobs'), api<{ jobs: JobInfo[] }>('GET', '/api/jobs/list?states=active,failed&limit=20')]);
        setOverview(o);
        setJobs(l.jobs);
        setError(null);
      } catch (err) {
        setError(err);
      }
    },
    POLL_MS,
    true,
    [tick],
  );
  const refresh = () => setTick((n) => n + 1);

  const retry = async (j: JobInfo) => {
    setActionError(null);
    try {
      await api('POST', `/api/jobs/${encodeURIComponent(j.queue)}/${encodeURIComponent(j.id)}/retry`);
      setStatus(`Job ${j.id} (${j.name}) queued again.`);
      refresh();
    } catch (err) {
      setActionError(err);
    }
  };
  const remove = async () => {
    const r = removing;
    setRemoving(null);
    if (!r) return;
    setActionError(null);
    try {
      if (r.kind === 'job') {
        await api('DELETE', `/api/jobs/${encodeURIComponent(r.job.queue)}/${encodeURIComponent(r.job.id)}`);
        setStatus(`Job ${r.job.id} removed.`);
      } else {
        await api('DELETE', `/api/jobs/outbox/${r.outboxId}`);
        setStatus(`Outbox row ${r.outboxId} removed.`);
      }
      refresh();
    } catch (err) {
      setActionError(err);
    }
  };

  return (
    <div class="stack">
      <ErrorText error={error} />
      {status ? (
        <p role="status" class="muted">
          {status}
        </p>
      ) : null}
      <ErrorText error={actionError} />
      <section class="card" aria-labelledby="queues-title">
        <div class="row spread">
          <h2 id="queues-title">Queues</h2>
          <span class="muted">updated every {POLL_MS / 1000} s</span>
        </div>
        {!overview ? (
          error ? null : <Loading what="queue counts" />
        ) : (
          <div class="queues">
            {Object.entries(overview.queues).map(([q, counts]) => (
              <div class="queue" key={q}>
                <h3>
                  <a href={boardQueueUrl(q)} target="_blank" rel="noopener" aria-label={`${q} queue in bull-board`}>
                    {q}
                  </a>
                </h3>
                <dl class="counts">
                  {SHOWN_STATES.map((s) => (
                    <div key={s} class={counts[s] && (s === 'failed' || s === 'active') ? `has-${s}` : ''}>
                      <dt>{s}</dt>
                      <dd>{counts[s] ?? 0}</dd>
                    </div>
                  ))}
                </dl>
              </div>
            ))}
          </div>
        )}
        {overview ? (
          <p class="muted">
            Outbox (jobs waiting for Redis): {overview.outbox} pending, {overview.outboxQuarantinedTotal} quarantined.
          </p>
        ) : null}
      </section>

      <section class="card" aria-labelledby="running-title">
        <h2 id="running-title">Running and failed jobs</h2>
        {!jobs ? (
          error ? null : <Loading what="jobs" />
        ) : jobs.length === 0 ? (
          <p class="empty" role="status">
            No job is running and none has failed.
          </p>
        ) : (
          <ul class="joblist" aria-label="Running and failed jobs">
            {jobs.map((j) => {
              const liveIndex = jobs.filter((x) => x.state === 'active').indexOf(j);
              return (
                <li key={`${j.queue}/${j.id}`} class={`card job-row ${j.state}`}>
                  <div class="row spread">
                    <strong>
                      {j.name} <span class="muted">({j.queue})</span>
                    </strong>
                    <span class={`badge s-${j.state}`}>{j.state}</span>
                  </div>
                  {j.state === 'active' ? <ActiveProgress job={j} live={liveIndex < MAX_LIVE} onEnd={refresh} /> : null}
                  <p class="muted">
                    id {j.id} · attempts {j.attemptsMade}
                    {j.timestamps.created ? ` · created ${new Date(j.timestamps.created).toLocaleString()}` : ''}
                  </p>
                  {j.failedReason ? <p class="error">Failed: {j.failedReason}</p> : null}
                  <div class="actions">
                    <a href={boardJobUrl(j.queue, j.id)} target="_blank" rel="noopener" aria-label={`Job ${j.id} in bull-board`}>
                      bull-board
                    </a>
                    {j.state === 'failed' ? (
                      <button type="button" onClick={() => retry(j)} aria-label={`Retry job ${j.id}`}>
                        Retry
                      </button>
                    ) : null}
                    {j.state !== 'active' ? (
                      <button type="button" class="danger" onClick={() => setRemoving({ kind: 'job', job: j })} aria-label={`Remove job ${j.id}`}>
                        Remove
                      </button>
                    ) : null}
                  </div>
                </li>
              );
            })}
          </ul>
        )}
      </section>

      <section class="card" aria-labelledby="outbox-title">
        <h2 id="outbox-title">Quarantined outbox rows</h2>
        <p class="muted">Jobs that could not be queued and were set aside after repeated failures; they are never retried automatically.</p>
        {!overview ? null : overview.outboxQuarantined.length === 0 ? (
          <p class="empty" role="status">
            No quarantined outbox row.
          </p>
        ) : (
          <ul class="joblist" aria-label="Quarantined outbox rows">
            {overview.outboxQuarantined.map((o) => (
              <li key={o.outboxId} class="card">
                <strong>{o.jobName}</strong> <span class="muted">row {o.outboxId}{o.jobId ? ` · job id ${o.jobId}` : ''} · since {new Date(o.quarantinedAt ?? o.createdAt).toLocaleString()}</span>
                {o.error ? <p class="error">{o.error}</p> : null}
                <div class="actions">
                  <button type="button" class="danger" onClick={() => setRemoving({ kind: 'outbox', outboxId: o.outboxId, jobName: o.jobName })} aria-label={`Remove outbox row ${o.outboxId}`}>
                    Remove
                  </button>
                </div>
              </li>
            ))}
          </ul>
        )}
      </section>
      {removing ? (
        <Confirm title="Remove this entry?" confirmLabel="Remove" danger onConfirm={remove} onCancel={() => setRemoving(null)}>
          <p>{removing.kind === 'job' ? `Job ${removing.job.id} (${removing.job.name}) will be deleted from its queue.` : `Outbox row ${removing.outboxId} (${removing.jobName}) will be deleted; its job will not run.`}</p>
        </Confirm>
      ) : null}
    </div>
  );
}
