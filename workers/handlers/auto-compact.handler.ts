import type { Handler } from '../context';

/** The scheduled sweep: with autoSummarize on, one compact-memories job per tenant over its threshold (ids dedupe repeats). */
export const autoCompact: Handler<'auto-compact'> = async (_data, { ctx }) => {
  if (!ctx.settings.memoryFresh().autoSummarize) return { autoSummarize: false, enqueued: 0 };
  const tenants = ctx.summarize.tenantsToCompact();
  const enqueued = await ctx.queues.enqueueMany(
    'compact-memories',
    tenants.map((t) => ({ apiKeyId: t.apiKeyId, trigger: 'auto' as const })),
  );
  return { autoSummarize: true, enqueued };
};
