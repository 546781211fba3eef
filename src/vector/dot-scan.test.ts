import fs from 'node:fs';
import path from 'node:path';
import { DOT_SCAN_WASM_BASE64, DotScanMatrix, dotScanModule } from './dot-scan';
import { normalise } from './sqlite-vec.store';
import { mulberry32 as rng } from '../../test/helpers/prng';

function randomUnit(dim: number, r: () => number): Float32Array {
  const v = new Float32Array(dim);
  for (let i = 0; i < dim; i++) v[i] = r() * 2 - 1;
  return normalise(v)!;
}

/** Exact top-k by a float64 dot product in plain JS: the reference. */
function bruteForce(rows: Map<number, Float32Array>, q: Float32Array, k: number): number[] {
  const scored = [...rows].map(([id, v]) => {
    let s = 0;
    for (let i = 0; i < v.length; i++) s += v[i]! * q[i]!;
    return { id, s };
  });
  scored.sort((a, b) => b.s - a.s || a.id - b.id);
  return scored.slice(0, k).map((x) => x.id);
}

describe('dot-scan (WebAssembly SIMD KNN scan)', () => {
  it('embeds exactly the bytes wabt compiles from dot-scan.wat', async () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const wabt = await (require('wabt') as () => Promise<{ parseWat(name: string, text: string, features: object): { toBinary(o: object): { buffer: Uint8Array } } }>)();
    const wat = fs.readFileSync(path.join(__dirname, 'dot-scan.wat'), 'utf8');
    const bytes = Buffer.from(wabt.parseWat('dot-scan.wat', wat, { simd: true }).toBinary({}).buffer);
    expect(bytes.toString('base64')).toBe(DOT_SCAN_WASM_BASE64);
  });

  it('loads on this runtime (Node 20 has WebAssembly SIMD)', () => {
    expect(dotScanModule()).not.toBeNull();
  });

  it.each([1, 7, 8, 100, 384])('ranks like an exact float64 scan (dim %i, padding to 8)', (dim) => {
    const r = rng(dim);
    const m = new DotScanMatrix(dotScanModule()!, dim, 8); // grows several times
    const rows = new Map<number, Float32Array>();
    for (let id = 1; id <= 700; id++) {
      const v = randomUnit(dim, r);
      rows.set(id * 3, v);
      m.set(id * 3, v);
    }
    for (let t = 0; t < 10; t++) {
      const q = randomUnit(dim, r);
      const k = 20;
      const hits = m.search(q, k);
      const want = bruteForce(rows, q, k);
      // float32 accumulation may swap two rows whose scores differ by ~1e-7; everything else is identical
      const overlap = hits.filter((h) => want.includes(h.rowId)).length;
      expect(overlap).toBeGreaterThanOrEqual(dim === 1 ? 1 : k - 1);
      if (dim > 1) expect(hits[0]!.rowId).toBe(want[0]);
      for (let i = 1; i < hits.length; i++) expect(hits[i]!.distance).toBeGreaterThanOrEqual(hits[i - 1]!.distance);
      const best = rows.get(hits[0]!.rowId)!;
      let d = 0;
      for (let i = 0; i < dim; i++) d += best[i]! * q[i]!;
      expect(hits[0]!.distance).toBeCloseTo(1 - d, 5);
    }
  });

  it('replaces, deletes (moving the last row into the hole) and breaks ties by the lower memory_id', () => {
    const m = new DotScanMatrix(dotScanModule()!, 4, 8);
    const e = (i: number) => {
      const v = new Float32Array(4);
      v[i] = 1;
      return v;
    };
    m.set(50, e(0));
    m.set(10, e(0));
    m.set(30, e(1));
    m.set(20, e(2));
    expect(m.search(e(0), 2).map((h) => h.rowId)).toEqual([10, 50]); // equal scores: lower id first
    expect(m.search(e(0), 10).map((h) => h.rowId).slice(0, 2)).toEqual([10, 50]);
    m.set(30, e(0)); // replace
    expect(m.search(e(0), 3).map((h) => h.rowId)).toEqual([10, 30, 50]);
    expect(m.delete(10)).toBe(true);
    expect(m.delete(10)).toBe(false);
    expect(m.size).toBe(3);
    expect(m.search(e(0), 3).map((h) => h.rowId)).toEqual([30, 50, 20]);
    expect(m.search(e(2), 1)).toEqual([{ rowId: 20, distance: 0 }]);
    expect(m.has(20) && !m.has(10)).toBe(true);
    expect(m.search(e(1), 0)).toEqual([]);
  });

  it('a tie with the worst kept row, met after the best k are full, goes to the lower memory_id', () => {
    const m = new DotScanMatrix(dotScanModule()!, 4, 8);
    const e0 = new Float32Array([1, 0, 0, 0]);
    const near = new Float32Array([0.6, 0.8, 0, 0]);
    for (const id of [50, 40, 90, 10, 70]) m.set(id, e0);
    m.set(5, near);
    expect(m.search(e0, 1).map((h) => h.rowId)).toEqual([10]);
    expect(m.search(e0, 2).map((h) => h.rowId)).toEqual([10, 40]);
    expect(m.search(e0, 6).map((h) => h.rowId)).toEqual([10, 40, 50, 70, 90, 5]);
  });
});
