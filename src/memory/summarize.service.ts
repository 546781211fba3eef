import crypto from 'node:crypto';
import type { Logger } from '../logger';
import type { MemoryService } from './memory.service';
import type { ReindexService } from './reindex.service';
import type { SettingsService } from './settings';
import type { LlmSummarizer } from './summary-llm';
import { buildCappedSummary, buildSummaryChunks, MIN_SUMMARY_BUDGET, summaryLine, type SummaryChunk } from './summary-text';
import { estimateTokens } from './tokens';
import { toPublic, type Memory, type MemoryRecord } from './types';

const DAY_MS = 86_400_000;
/** A dry run lists at most this many candidates (the counts cover all of them). */
const DRY_RUN_LIST_LIMIT = 1000;

export interface SummarizeRequest {
  /** One key; absent = every key, each summarised on its own (never merged). */
  apiKeyId?: string;
  /** Only this session ('' = memories without a session). */
  sessionId?: string;
  olderThanDays: number;
  mode?: 'rules' | 'llm';
}

export interface DryRunResult {
  candidates: Memory[];
  candidateCount: number;
  /** More candidates exist than are listed. */
  truncated: boolean;
  totalTokens: number;
  deletedCount: 0;
  summaryIds: [];
  apiKeys: number;
  dryRun: true;
}

export interface SummarizeResult {
  candidates: number;
  totalTokens: number;
  deletedCount: number;
  summaryIds: string[];
  apiKeys: number;
  /** How the summaries were written: 'llm' only when every one came from the model. */
  mode: 'rules' | 'llm' | 'mixed';
  /** Why the model was not used for some summary (summaryMode llm), if so. */
  llmFallbackReason?: string;
  dryRun: false;
}

export interface CompactResult {
  apiKeyId: string;
  tokensBefore: number;
  tokensAfter: number;
  threshold: number;
  folded: number;
  /** Memories still to fold (a run folds at most 1000; the next sweep goes on). */
  remaining: number;
  summaryIds: string[];
  mode: 'rules' | 'llm' | 'mixed' | 'none';
  llmFallbackReason?: string;
}

/** What a long job hands the service. */
export interface SummarizeJobHooks {
  jobId: string;
  progress(p: object): Promise<void>;
  /** Throws (after handing the job back) when the worker is stopping. */
  checkpoint(): Promise<void>;
}

/** Test failpoints: named points in the write path where a test makes the worker "crash". */
export interface SummarizeFailpoints {
  /** Runs inside a summary's transaction right after the summary row was written, before its candidates are deleted. */
  afterSummaryWrite?: (summary: MemoryRecord, covered: string[]) => void;
}

/** One compaction run folds at most this many memories (one summary, one short transaction); the next run goes on. */
const MAX_FOLD_PER_RUN = 1000;

/** Marks summary rows so compaction never folds a summary into another. */
const SUMMARY_KEY_PREFIX = 'summary:';

/**
 * Summarisation as jobs (DESIGN §3): `summarize-older-than` writes one summary memory per API key
 * (several when one would not fit the injection budget) and deletes the candidates through the
 * store, so history keeps every original text; `compact-memories` folds a tenant's least useful
 * memories when it holds more than N budgets. Each summary and the deletion of what it covers are
 * one transaction, and its key derives from the job and the covered ids, so a crash leaves either
 * both or neither and a retry converges on one summary.
 */
export class SummarizeService {
  readonly failpoints: SummarizeFailpoints = {};

  /** Releases the upstream connection pool (summaryMode llm). */
  async close(): Promise<void> {
    await this.d.llm?.close();
  }

  constructor(
    private readonly d: {
      memory: MemoryService;
      settings: SettingsService;
      reindex: ReindexService;
      log: Logger;
      llm?: LlmSummarizer;
    },
  ) {}

  private budget(): number {
    const t = this.d.settings.memoryFresh().maxTokens;
    return Math.max(MIN_SUMMARY_BUDGET, t > 0 ? t : 2000);
  }

  private owners(req: SummarizeRequest, cutoff: string): string[] {
    return req.apiKeyId !== undefined ? [req.apiKeyId] : this.d.memory.ownersCreatedBefore(cutoff, req.sessionId);
  }

  /** What a run would summarise, changing nothing. */
  dryRun(req: SummarizeRequest, now = Date.now()): DryRunResult {
    const cutoff = new Date(now - req.olderThanDays * DAY_MS).toISOString();
    const listed: Memory[] = [];
    let count = 0;
    let tokens = 0;
    let keys = 0;
    for (const owner of this.owners(req, cutoff)) {
      const rows = this.d.memory.createdBefore(owner, cutoff, req.sessionId);
      if (rows.length) keys++;
      for (const r of rows) {
        count++;
        tokens += estimateTokens(r.content);
        if (listed.length < DRY_RUN_LIST_LIMIT) listed.push(toPublic(r));
      }
    }
    return { candidates: listed, candidateCount: count, truncated: count > listed.length, totalTokens: tokens, deletedCount: 0, summaryIds: [], apiKeys: keys, dryRun: true };
  }

  /**
   * The summarize-older-than job. `createdAtMs` is the job's creation time: the cutoff derives from
   * it, so a retry considers the same memories however late it runs.
   */
  async run(req: SummarizeRequest, createdAtMs: number, hooks: SummarizeJobHooks): Promise<SummarizeResult> {
    const cutoff = new Date(createdAtMs - req.olderThanDays * DAY_MS).toISOString();
    const owners = this.owners(req, cutoff);
    const budget = this.budget();
    const mode = req.mode ?? this.d.settings.memoryFresh().summaryMode;
    const out: SummarizeResult = { candidates: 0, totalTokens: 0, deletedCount: 0, summaryIds: [], apiKeys: 0, mode: 'rules', dryRun: false };
    const modes = new Set<'rules' | 'llm'>();
    for (const [i, owner] of owners.entries()) {
      await hooks.checkpoint();
      const rows = this.d.memory.createdBefore(owner, cutoff, req.sessionId);
      if (rows.length > 0) {
        out.apiKeys++;
        out.candidates += rows.length;
        out.totalTokens += rows.reduce((n, r) => n + estimateTokens(r.content), 0);
        const header = (n: number) => `Summary of ${n} ${n === 1 ? 'memory' : 'memories'} older than ${req.olderThanDays} days:`;
        const written = await this.fold(owner, req.sessionId || null, buildSummaryChunks(rows, budget, header), budget, header, mode, hooks, {
          olderThanDays: req.olderThanDays,
        });
        out.deletedCount += written.deleted;
        out.summaryIds.push(...written.summaryIds);
        written.modes.forEach((m) => modes.add(m));
        if (written.llmFallbackReason) out.llmFallbackReason ??= written.llmFallbackReason;
      }
      await hooks.progress({ phase: 'summarizing', done: i + 1, total: owners.length, candidates: out.candidates, deleted: out.deletedCount });
    }
    out.mode = modes.size === 2 ? 'mixed' : modes.has('llm') ? 'llm' : 'rules';
    return out;
  }

  /** Tenants over compactFactor × the injection budget (the auto-compact sweep enqueues one job each). */
  tenantsToCompact(): { apiKeyId: string; tokens: number }[] {
    const s = this.d.settings.memoryFresh();
    return this.d.memory.ownersOverTokens(s.compactFactor * this.budget());
  }

  /**
   * The compact-memories job: when the key's memories exceed compactFactor × budget, keep the most
   * useful ones (most accessed, then most recent) up to (compactFactor − 1) budgets and fold the
   * rest, oldest first, into one summary of at most one budget (re-embedded like any write), so the
   * tenant ends under its threshold. Lines that do not fit are named in the summary's covered ids;
   * their text is in the history.
   */
  async compact(apiKeyId: string, hooks: SummarizeJobHooks): Promise<CompactResult> {
    const s = this.d.settings.memoryFresh();
    const budget = this.budget();
    const threshold = s.compactFactor * budget;
    const rows = this.d.memory.byKeepPriority(apiKeyId);
    const tokensBefore = this.d.memory.tokensUsedBy({ apiKeyId });
    const result: CompactResult = { apiKeyId, tokensBefore, tokensAfter: tokensBefore, threshold, folded: 0, remaining: 0, summaryIds: [], mode: 'none' };
    if (tokensBefore <= threshold) return result;
    const keepBudget = (s.compactFactor - 1) * budget;
    let kept = 0;
    const fold: MemoryRecord[] = [];
    for (const r of rows) {
      const t = estimateTokens(r.content);
      if (kept + t <= keepBudget) kept += t;
      else fold.push(r);
    }
    fold.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.rowId - b.rowId));
    const batch = fold.slice(0, MAX_FOLD_PER_RUN);
    const header = (n: number, shown: number) =>
      `Summary of ${n} older, less used ${n === 1 ? 'memory' : 'memories'}${shown < n ? ` (${shown} shown; every one is restorable from history)` : ''}:`;
    const chunk = buildCappedSummary(batch, budget, header);
    const written = await this.fold(apiKeyId, null, chunk ? [chunk] : [], budget, (n) => header(n, n), s.summaryMode, hooks, { compacted: true });
    await hooks.progress({ phase: 'compacting', done: written.deleted, total: fold.length });
    const tokensAfter = this.d.memory.tokensUsedBy({ apiKeyId });
    return {
      ...result,
      tokensAfter,
      folded: written.deleted,
      remaining: fold.length - batch.length,
      summaryIds: written.summaryIds,
      mode: written.modes.size === 2 ? 'mixed' : written.modes.has('llm') ? 'llm' : written.modes.has('rules') ? 'rules' : 'none',
      llmFallbackReason: written.llmFallbackReason,
    };
  }

  private async chunkText(chunk: SummaryChunk, header: string, mode: 'rules' | 'llm', budget: number): Promise<{ content: string; mode: 'rules' | 'llm'; fallback?: string }> {
    if (mode !== 'llm') return { content: chunk.content, mode: 'rules' };
    if (!this.d.llm) return { content: chunk.content, mode: 'rules', fallback: 'no upstream summarizer in this process' };
    try {
      const content = await this.d.llm.summarize(this.d.settings.memoryFresh().summaryModel, header, chunk.covered.map(summaryLine), budget);
      return { content, mode: 'llm' };
    } catch (err) {
      const reason = (err as Error).message || String(err);
      this.d.log.warn({ reason }, 'LLM summary failed; using the rule-based summary');
      return { content: chunk.content, mode: 'rules', fallback: reason };
    }
  }

  /** Writes the summaries of one key's memories, each with the deletion of what it covers in one transaction. */
  private async fold(
    apiKeyId: string,
    sessionId: string | null,
    chunks: SummaryChunk[],
    budget: number,
    header: (n: number) => string,
    mode: 'rules' | 'llm',
    hooks: SummarizeJobHooks,
    extraMetadata: Record<string, unknown>,
  ): Promise<{ deleted: number; summaryIds: string[]; modes: Set<'rules' | 'llm'>; llmFallbackReason?: string }> {
    const ctx = { source: 'summarize' as const, jobId: hooks.jobId };
    const summaryIds: string[] = [];
    const modes = new Set<'rules' | 'llm'>();
    let deleted = 0;
    let llmFallbackReason: string | undefined;
    for (const chunk of chunks) {
      await hooks.checkpoint();
      const ids = chunk.covered.map((m) => m.id);
      const text = await this.chunkText(chunk, header(chunk.covered.length), mode, budget);
      modes.add(text.mode);
      if (text.fallback) llmFallbackReason ??= text.fallback;
      // The same job over the same memories always names its summary alike: a retry finds it instead of adding one.
      const digest = crypto.createHash('sha256').update(`${hooks.jobId}\n${ids.join('\n')}`).digest('hex').slice(0, 24);
      const { result, changes } = this.d.memory.transaction((report) => {
        const summary = this.d.memory.upsertInTx(
          {
            apiKeyId,
            sessionId,
            type: 'semantic',
            key: `${SUMMARY_KEY_PREFIX}${digest}`,
            content: text.content,
            metadata: {
              summary: true,
              summarizedCount: ids.length,
              summarizedIds: ids,
              mode: text.mode,
              jobId: hooks.jobId,
              generatedAt: new Date().toISOString(),
              ...extraMetadata,
            },
          },
          ctx,
          'summarize',
          { provenanceKeys: ['generatedAt'] },
        );
        report(summary);
        this.failpoints.afterSummaryWrite?.(summary.memory, ids);
        let n = 0;
        for (const id of ids) {
          const c = this.d.memory.deleteInTx(id, ctx, 'summarize');
          report(c);
          if (c) n++;
        }
        return { id: summary.memory.id, deleted: n };
      });
      // The summary gets its vector like any write (the deleted rows' vectors went with them).
      await this.d.reindex.enqueueEmbeds(changes);
      summaryIds.push(result.id);
      deleted += result.deleted;
    }
    return { deleted, summaryIds, modes, llmFallbackReason };
  }
}
