import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** One figure of a performance target table (issue 14): what was measured, the same run's plain baseline, the target and whether it was met. */
export interface TargetRow {
  /** What is measured, with its setting (e.g. "hybrid retrieval p50, 10k memories/key"). */
  figure: string;
  /** The measured value with its unit (e.g. "4.12 ms"). */
  measured: string;
  /** The target as written in the issue (e.g. "≤ 2 ms"). */
  target: string;
  /** The plain baseline measured in the same run (e.g. "BM25 alone 1.1 ms", "upstream direct 1,480 req/s"), when there is one. */
  baseline?: string;
  /** null when the figure could not be measured in this run (the reason goes in `measured`). */
  pass: boolean | null;
}

const RESULTS_DIR = path.resolve(__dirname, '..', '..', 'bench', 'results');

/** Prints the rows as one table and writes them to bench/results/<name>.json (with the time and machine), never asserts. */
export function reportTargets(name: string, rows: TargetRow[], extra: Record<string, unknown> = {}): void {
  console.table(rows.map((r) => ({ figure: r.figure, measured: r.measured, baseline: r.baseline ?? '', target: r.target, result: r.pass === null ? 'n/a' : r.pass ? 'pass' : 'FAIL' })));
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const out = path.join(RESULTS_DIR, `${name}.json`);
  fs.writeFileSync(out, JSON.stringify({ name, at: new Date().toISOString(), node: process.version, cpus: os.cpus().length, rows, ...extra }, null, 2) + '\n');
  console.log(`written: ${path.relative(process.cwd(), out)}`);
}
