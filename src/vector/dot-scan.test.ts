import fs from 'node:fs';
import path from 'node:path';
import { DOT_SCAN_WASM_BASE64, DotScanMatrix, dotScanModule, MIN_FIRST_PASS_ROWS, type ScanHit } from './dot-scan';
import { normalise } from './sqlite-vec.store';
import { mulberry32 as rng } from '../../test/helpers/prng';

function randomUnit(dim: number, r: () => number): Float32Array {
  const v = new Float32Array(dim);
  for (let i = 0; i < dim; i++) v[i] = r() * 2 - 1;
  return normalise(v)!;
}

/**
 * The scan's float32 score, emulated in JS: per row two f32x4 accumulators over 8 components at a
 * time (zero-padded), a + b, then (a0 + a1) + (a2 + a3), every operation rounded to float32.
 */
function f32Score(q: Float32Array, r: Float32Array): number {
  const f = Math.fround;
  const a = [0, 0, 0, 0];
  const b = [0, 0, 0, 0];
  const at = (v: Float32Array, i: number) => (i < v.length ? v[i]! : 0);
  for (let j = 0; j < r.length; j += 8) {
    for (let l = 0; l < 4; l++) {
      a[l] = f(a[l]! + f(at(r, j + l) * at(q, j + l)));
      b[l] = f(b[l]! + f(at(r, j + 4 + l) * at(q, j + 4 + l)));
    }
  }
  for (let l = 0; l < 4; l++) a[l] = f(a[l]! + b[l]!);
  return f(f(a[0]! + a[1]!) + f(a[2]! + a[3]!));
}

/** Today's answer, independently of the matrix: every row's float32 score, best first, ties by the lower id. */
function f32TopK(rows: Map<number, Float32Array>, q: Float32Array, k: number): ScanHit[] {
  const scored = [...rows].map(([id, v]) => ({ id, s: f32Score(q, v) }));
  scored.sort((x, y) => y.s - x.s || x.id - y.id);
  return scored.slice(0, Math.max(0, k)).map((x) => ({ rowId: x.id, distance: 1 - x.s }));
}

/** Distances compared bit for bit (toEqual would accept -0 for 0). */
function bits(hits: ScanHit[]): string[] {
  return hits.map((h) => `${h.rowId}:${Buffer.from(new Float64Array([h.distance]).buffer).toString('hex')}`);
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

  describe('the int8 first pass returns exactly what the full float scan returns', () => {
    const mod = () => dotScanModule()!;

    /** search() against searchFull() and the JS emulation of the scan, for every k given; returns the searches made. */
    function check(m: DotScanMatrix, rows: Map<number, Float32Array>, queries: Float32Array[], ks: number[]): number {
      let searches = 0;
      for (const q of queries) {
        for (const k of ks) {
          const want = bits(f32TopK(rows, q, k));
          expect(bits(m.search(q, k))).toEqual(want);
          expect(bits(m.searchFull(q, k))).toEqual(want);
          searches++;
        }
      }
      return searches;
    }

    function load(dim: number, vectors: Float32Array[], ids = vectors.map((_, i) => i + 1)) {
      const m = new DotScanMatrix(mod(), dim, 8);
      const rows = new Map<number, Float32Array>();
      vectors.forEach((v, i) => {
        m.set(ids[i]!, v);
        rows.set(ids[i]!, v);
      });
      return { m, rows };
    }

    it.each([
      [1, 400],
      [7, 600],
      [16, 1000],
      [100, 3000],
      [384, 1200],
    ])('random unit vectors (dim %i, %i rows), k from 1 to past n', (dim, n) => {
      const r = rng(1000 + dim);
      const { m, rows } = load(dim, Array.from({ length: n }, () => randomUnit(dim, r)));
      const queries = Array.from({ length: 6 }, () => randomUnit(dim, r));
      check(m, rows, queries, [1, 2, 5, 20, 64, Math.floor(n / 4), Math.floor(n / 4) + 1, n - 1, n, n + 7]);
      expect(m.stats.firstPass).toBeGreaterThan(0);
      expect(m.stats.fullScans).toBeGreaterThan(0); // the large k
    });

    it('clustered vectors: many near-ties around the k-th score', () => {
      const dim = 100;
      const r = rng(5);
      const centres = Array.from({ length: 8 }, () => randomUnit(dim, r));
      const near = (c: Float32Array, spread: number) => normalise(c.map((x) => x + (r() * 2 - 1) * spread))!;
      const vectors = Array.from({ length: 2400 }, (_, i) => near(centres[i % 8]!, i % 3 === 0 ? 0.001 : 0.02));
      const { m, rows } = load(dim, vectors);
      const queries = [...centres.slice(0, 4), near(centres[5]!, 0.01), near(centres[6]!, 0.0005)];
      check(m, rows, queries, [1, 3, 10, 20, 50, 200, 400]);
      expect(m.stats.firstPass).toBeGreaterThan(0);
    });

    it('exact duplicates and one-ulp neighbours: ties broken by the lower memory_id, float rounding decides', () => {
      const dim = 100;
      const r = rng(9);
      const base = randomUnit(dim, r);
      const ulp = (x: number, dir: number) => {
        const f = new Float32Array([x]);
        const i = new Int32Array(f.buffer);
        i[0]! += x > 0 === dir > 0 ? 1 : -1;
        return f[0]!;
      };
      const vectors: Float32Array[] = [];
      for (let i = 0; i < 900; i++) {
        if (i % 3 === 0) vectors.push(base.slice()); // exact duplicates: equal scores
        else if (i % 3 === 1) {
          const v = base.slice(); // one component one ulp away: scores equal or a rounding apart
          const j = Math.floor(r() * dim);
          v[j] = ulp(v[j]!, r() < 0.5 ? -1 : 1);
          vectors.push(v);
        } else vectors.push(randomUnit(dim, r));
      }
      // Ids out of slot order, so the tie rule (lower memory_id) is not the insertion order.
      const ids = vectors.map((_, i) => 5000 - 3 * i + (i % 7) * 1000);
      const { m, rows } = load(dim, vectors, ids);
      check(m, rows, [base, normalise(base.map((x, i) => x + (i % 2 ? 1e-3 : -1e-3)))!, randomUnit(dim, r)], [1, 7, 20, 150, 301, 400]);
      expect(m.stats.firstPass).toBeGreaterThan(0);
    });

    it('rows exact in int8: float rounding alone decides near-ties', () => {
      // Rows R·2^-10 with integer R (|R| ≤ 127, one component ±127 so the scale is 2^-10): their int8
      // copies are exact (residual 0), and so is the query: the first pass's bound is all float rounding.
      // The query (32767 − i)·2^-18 makes the row R0 (+127 on lanes 0–3, −127 on 4–7) cancel: its lanes
      // sum to ±2^25 units of 2^-28 before cancelling to 16,256, so the scan rounds by several units.
      // Moving one unit of R from a "+" to a "−" position shifts the exact dot by (a − b) units: near-ties.
      const dim = 64;
      const r = rng(12);
      const R0 = Array.from({ length: dim }, (_, i) => (i % 8 < 4 ? 127 : -127));
      const plus = R0.map((_, i) => i).filter((i) => R0[i]! > 0);
      const minus = R0.map((_, i) => i).filter((i) => R0[i]! < 0);
      const pick = (xs: number[]) => xs[Math.floor(r() * xs.length)]!;
      const vectors: Float32Array[] = [];
      for (let n = 0; n < 1200; n++) {
        const R = R0.slice();
        for (let t = 1 + Math.floor(r() * 3); t > 0; t--) {
          R[pick(plus)]! -= 1;
          R[pick(minus)]! += 1;
        }
        if (n % 3 !== 0) R[pick(plus)]! -= 2; // far below the near-ties (≈ 65,000 units): pruned
        R[0] = 127;
        vectors.push(new Float32Array(R.map((x) => x * 2 ** -10)));
      }
      const { m, rows } = load(dim, vectors);
      const exact = new Float32Array(dim).map((_, i) => (32767 - i) * 2 ** -18); // exact in i16 (scale 2^-18)
      const tilted = new Float32Array(dim).map((_, i) => (32767 - 3 * (i % 5)) * 2 ** -18);
      check(m, rows, [exact, tilted], [1, 5, 20, 60, 150, 299]);
      expect(m.stats.firstPass).toBe(12);
    });

    it("the query's own quantisation error: rows along it, the others exact in int8", () => {
      // The query is 32767 at 0 (its int16 scale is then 2^-18), 16384.49 at 1–8, 16383.51 at 9–16
      // (each half a step off its int16 grid) and 10–300 elsewhere, in units of 2^-18. Rows (integers
      // ·2^-10, exact in int8) are ±127 at 1–16 in the query error's direction ("up") or against it
      // ("down"): their float scores differ from the quantised query's dot by about ±1,000 units of
      // 2^-28, while the other components spread the scores over ~40,000 units.
      const dim = 32;
      const r = rng(44);
      const q = new Float32Array(dim).map((_, i) => (i === 0 ? 32767 : i <= 8 ? 16384.49 : i <= 16 ? 16383.51 : 10 + Math.floor(r() * 290)) * 2 ** -18);
      const vectors: Float32Array[] = [];
      for (let n = 0; n < 1200; n++) {
        const up = n % 2 === 0;
        const R = Array.from({ length: dim }, (_, i) => (i === 0 ? 127 : i <= 8 ? (up ? 127 : -127) : i <= 16 ? (up ? -127 : 127) : Math.round(r() * 254 - 127)));
        vectors.push(new Float32Array(R.map((x) => x * 2 ** -10)));
      }
      const { m, rows } = load(dim, vectors);
      check(m, rows, [q], [1, 3, 10, 20, 40, 80, 150, 299]);
      expect(m.stats.firstPass).toBe(8);
    });

    it('after deletes (the last row moved into each hole), replacements and growth', () => {
      const dim = 48;
      const r = rng(77);
      const { m, rows } = load(dim, Array.from({ length: 1500 }, () => randomUnit(dim, r)));
      const queries = Array.from({ length: 4 }, () => randomUnit(dim, r));
      for (let round = 0; round < 3; round++) {
        for (const id of [...rows.keys()]) {
          if (r() < 0.3) {
            expect(m.delete(id)).toBe(true);
            rows.delete(id);
          } else if (r() < 0.2) {
            const v = randomUnit(dim, r);
            m.set(id, v);
            rows.set(id, v);
          }
        }
        for (let i = 0; i < 900; i++) {
          const id = 10_000 * (round + 1) + i;
          const v = i % 50 === 0 ? queries[i % 4]!.slice() : randomUnit(dim, r); // some rows equal to a query
          m.set(id, v);
          rows.set(id, v);
        }
        expect(m.size).toBe(rows.size);
        check(m, rows, queries, [1, 20, 100]);
      }
      expect(m.stats.firstPass).toBeGreaterThan(0);
    });

    it('really prunes: at 10,000 rows and k = 20 it rescores a few dozen rows per search, not all', () => {
      const dim = 100;
      const r = rng(31);
      const { m, rows } = load(dim, Array.from({ length: 10_000 }, () => randomUnit(dim, r)));
      const searches = check(m, rows, Array.from({ length: 5 }, () => randomUnit(dim, r)), [20]);
      expect(m.stats).toEqual({ firstPass: searches, rescored: expect.any(Number), fullScans: searches }); // searchFull's scans
      expect(m.stats.rescored / searches).toBeGreaterThanOrEqual(20);
      expect(m.stats.rescored / searches).toBeLessThan(200); // < 2 % of the rows
    });

    it('scans every row while a row is not a unit vector, and below MIN_FIRST_PASS_ROWS', () => {
      const dim = 16;
      const r = rng(4);
      const { m, rows } = load(dim, Array.from({ length: 600 }, () => randomUnit(dim, r)));
      const long = randomUnit(dim, r).map((x) => x * 3);
      m.set(42, long);
      rows.set(42, long);
      const q = randomUnit(dim, r);
      const before = { ...m.stats };
      expect(bits(m.search(q, 10))).toEqual(bits(f32TopK(rows, q, 10)));
      expect(m.stats.firstPass).toBe(before.firstPass);
      const unit = randomUnit(dim, r);
      m.set(42, unit); // regular again
      rows.set(42, unit);
      expect(bits(m.search(q, 10))).toEqual(bits(f32TopK(rows, q, 10)));
      expect(m.stats.firstPass).toBe(before.firstPass + 1);
      const small = load(dim, Array.from({ length: MIN_FIRST_PASS_ROWS - 1 }, () => randomUnit(dim, r)));
      expect(bits(small.m.search(q, 5))).toEqual(bits(f32TopK(small.rows, q, 5)));
      expect(small.m.stats.firstPass).toBe(0);
    });

    it('a query too small for an int16 scale (largest component at most qmax·2^-150) is scanned in full', () => {
      // Its scale max/qmax rounds to float32 0: quantising its zero components (0/0) gave NaN bounds,
      // no row was a candidate, and search returned no rows. (Scores this small all have distance 1,
      // so the answer's order is by memory_id: compared with searchFull, not f32TopK's score order.)
      const dim = 16;
      const r = rng(3);
      const ids = Array.from({ length: 300 }, (_, i) => 7_000 - 13 * i);
      const { m } = load(dim, Array.from({ length: 300 }, () => randomUnit(dim, r)), ids);
      const q = new Float32Array(dim);
      q[0] = 1e-42;
      const down = new Float32Array(dim).fill(-1e-43);
      down[5] = 2 ** -149;
      for (const query of [q, down]) {
        for (const k of [1, 10, 75]) {
          const hits = m.search(query, k);
          expect(hits).toHaveLength(k);
          expect(bits(hits)).toEqual(bits(m.searchFull(query, k)));
        }
      }
      expect(m.stats.firstPass).toBe(0);
    });

    it('bytesFor and capacityWithin hold the int8 copy: a matrix of that many rows fits', () => {
      for (const dim of [1, 8, 100, 384]) {
        for (const rows of [8, 1000, 4096]) {
          const m = new DotScanMatrix(mod(), dim, rows);
          expect(m.rowCapacity).toBe(rows);
          expect(m.bytes).toBeGreaterThanOrEqual(DotScanMatrix.bytesFor(rows, dim));
          expect(m.bytes).toBeLessThanOrEqual(DotScanMatrix.bytesFor(rows, dim) + 65_536);
        }
        for (const budget of [200_000, 3_000_000]) {
          const cap = DotScanMatrix.capacityWithin(budget, dim);
          expect(new DotScanMatrix(mod(), dim, cap).bytes).toBeLessThanOrEqual(budget);
          expect(new DotScanMatrix(mod(), dim, cap + 64).bytes).toBeGreaterThan(budget - 65_536);
        }
      }
    });
  });
});
