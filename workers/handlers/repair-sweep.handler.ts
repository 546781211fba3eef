import type { Handler } from '../context';

/** Moves outbox rows into their queues (same ids, so nothing runs twice). */
export const repairSweep: Handler<'repair-sweep'> = async (data, { job, ctx }) => {
  const outbox = await ctx.queues.flushOutbox(data.batchSize);
  await job.updateProgress({ phase: 'outbox', done: outbox.moved, remaining: outbox.remaining });
  if (outbox.remaining > 0) throw new Error(`outbox not drained: ${outbox.remaining} rows remain`);
  return { reason: data.reason, outboxMoved: outbox.moved };
};
