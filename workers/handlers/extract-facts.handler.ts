import { buildFactMetadata, extractFactsFromText, type ExtractedFact, type FactMetadata } from '../../src/memory/extraction';
import type { CreateMemoryInput } from '../../src/memory/types';
import type { Handler } from '../context';

/** Metadata that only says which request stated a fact, and when: a new value alone is a re-assertion, not a change. */
const PROVENANCE_KEYS = ['extractedAt', 'requestId'] as const satisfies readonly (keyof FactMetadata)[];

/**
 * Rules first (DESIGN §6): facts from the user's own words (the assistant's only when
 * `extractFromAssistant` is on), upserted in one transaction with history, then their vectors:
 * inline with a local model, else one `embed-memory` per changed row. The facts commit with the
 * claim of the api's durable record, so a job that committed once never writes again.
 */
export const extractFacts: Handler<'extract-facts'> = async (data, { job, ctx }) => {
  const settings = ctx.settings.memoryFresh();
  const facts: (ExtractedFact & { source: 'user' | 'assistant' })[] = extractFactsFromText(data.userText).map((f) => ({ ...f, source: 'user' as const }));
  if (settings.extractFromAssistant && data.assistantText) {
    const seen = new Set(facts.map((f) => f.key));
    // The user's own statement wins over the assistant's on the same key.
    for (const f of extractFactsFromText(data.assistantText)) if (!seen.has(f.key)) facts.push({ ...f, source: 'assistant' });
  }
  const inputs: CreateMemoryInput[] = facts.map((f) => ({
    apiKeyId: data.apiKeyId,
    sessionId: data.sessionId,
    type: f.type,
    key: f.key,
    content: f.content,
    metadata: { ...buildFactMetadata(f, { source: f.source === 'user' ? 'user_message' : 'assistant_message', requestId: data.requestId }) },
  }));
  // Re-asserted facts are upserted too: that refreshes updated_at (the retention window) and counts
  // the re-assertion, without a history row or an embedding. The api's durable record of this job is claimed in the transaction that writes the facts (also
  // when there are none): a re-delivered job — stalled after the commit, re-added by the sweep after
  // Redis lost or already removed it — finds the record done and writes nothing.
  const jobId = job.id ?? `extract-${data.requestId}`;
  const changes = ctx.memory.upsertManyClaimed(
    inputs,
    { source: 'extraction', jobId, requestId: data.requestId },
    () => ctx.queues.claimDurable('extract-facts', jobId) !== 'done',
    'create',
    { provenanceKeys: PROVENANCE_KEYS },
  );
  if (changes === null) return { facts: 0, changed: 0, skipped: 'already_done' };
  if (facts.length === 0) return { facts: 0, changed: 0 };
  // A local model embeds the new facts right here (one hop from chat to injectable); otherwise, or on failure, embed-memory jobs.
  const embeds = await ctx.reindex.embedInline(changes);
  const reasserted = changes.filter((c) => c.reasserted).length;
  return { facts: facts.length, changed: changes.length - reasserted, reasserted, embeddedInline: embeds.inline, embedsQueued: embeds.queued };
};
