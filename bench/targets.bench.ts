import { measureJobTargets } from './job-targets.bench';
import { measureProxyTargets } from './proxy-targets.bench';
import { measureRetrievalTargets } from './retrieval-targets.bench';
import { reportTargets, type TargetRow } from './target-table';

/** The three measurements behind issue 14's table, in the order they run (retrieval first: it needs the quietest machine). */
const AREAS: Array<{ area: string; measure: (args: string[]) => Promise<TargetRow[]> }> = [
  { area: 'retrieval', measure: measureRetrievalTargets },
  { area: 'request path', measure: measureProxyTargets },
  { area: 'jobs', measure: measureJobTargets },
];

/**
 * `npm run bench -- targets [--scale 1m] [--duration=10]`: every figure of issue 14 in one table (figure, measured, the
 * same run's baseline, target, pass/fail), written to bench/results/targets.json. Each area also prints its own tables.
 * `--before` is not passed on: the areas read it differently (a dist root vs a dist); run an area's own bench for A/B.
 */
export async function runTargetsBench(args: string[] = process.argv.slice(2)): Promise<void> {
  const passed = args.filter((a) => !a.startsWith('--before=') && !a.startsWith('--profile='));
  const rows: TargetRow[] = [];
  for (const { area, measure } of AREAS) {
    console.log(`\n--- ${area} ---\n`);
    try {
      rows.push(...(await measure(passed)));
    } catch (err) {
      // One area failing must not hide the others' figures; the table says what is missing.
      console.error(err);
      rows.push({ figure: `${area} figures`, measured: `not measured: ${(err as Error).message?.split('\n')[0] ?? String(err)}`, target: '', pass: null });
    }
  }
  console.log('\n--- issue 14 targets ---\n');
  reportTargets('targets', rows, { args: passed });
}
