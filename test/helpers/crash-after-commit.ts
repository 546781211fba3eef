import type { JobName } from '../../src/queue/jobs';
import { registry } from '../../workers/registry';
import type { Handler, Registry } from '../../workers/context';

/**
 * The real handlers, with `name`'s dying on each job's first run after it returned (its commit done, BullMQ's ack
 * not): the job runs again, as after a worker crash. `runs` collects every run's result by job id.
 */
export function crashingAfterFirstCommit<N extends JobName>(name: N, runs: Record<string, unknown[]>): Registry {
  const real = registry[name] as Handler<N>;
  const crashing: Handler<N> = async (data, jc) => {
    const out = await real(data, jc);
    (runs[jc.job.id!] ??= []).push(out);
    if (runs[jc.job.id!].length === 1) throw new Error(`crash between the ${name} commit and the ack`);
    return out;
  };
  return { ...registry, [name]: crashing };
}
