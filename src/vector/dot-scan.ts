/**
 * The in-memory KNN scan of one tenant's vectors (issue #14): a float32 matrix in a WebAssembly
 * memory, scored by a WASM SIMD dot-product loop (src/vector/dot-scan.wat; 100k × 100 dims in
 * ~1.3 ms where sqlite-vec 0.1.9's vec0 scan takes ~21 ms: README "Speed at scale", bench/README.md), then an exact top-k in JS. Rows are unit
 * vectors, so the dot product is the cosine similarity and the ranking is exact float KNN.
 *
 * An int8 copy of every row makes the scan cheaper without changing its answer: a first pass over
 * the int8 rows bounds each row's float score from both sides, only the rows whose upper bound
 * reaches the k-th best lower bound are scored in float32 (with the full scan's own instructions),
 * and the top k of those are exactly the full scan's top k (see `search`).
 */

/** src/vector/dot-scan.wat compiled by wabt 1.0.39 with SIMD on (dot-scan.test.ts recompiles it and compares). */
export const DOT_SCAN_WASM_BASE64 =
  'AGFzbQEAAAABLwVgBX9/f39/AGAGf39/f39/AGAKf39/f39/f319fQBgBH9/fX8Bf2AEf39/fwF9Ag8BA2VudgZtZW1vcnkCAAEDBgUAAQIDBAcpBQRzY2FuAAAGZ2F0aGVyAAEGYXBwcm94AAIGc2VsZWN0AAMDa3RoAAQK3AsF0AEDAn8CewF/IANBAnQhCSAEIAJBAnRqIQUCQANAIAQgBU8NAf0MAAAAAAAAAAAAAAAAAAAAACEH/QwAAAAAAAAAAAAAAAAAAAAAIQhBACEGA0AgByABIAZq/QAEACAAIAZq/QAEAP3mAf3kASEHIAggASAGav0ABBAgACAGav0ABBD95gH95AEhCCAGQSBqIQYgBiAJSQ0ACyAHIAj95AEhByAEIAf9HwAgB/0fAZIgB/0fAiAH/R8DkpI4AgAgASAJaiEBIARBBGohBAwACwsL3QEDAn8CewJ/IARBAnQhCiAFIANBAnRqIQYCQANAIAUgBk8NASABIAIoAgAgCmxqIQv9DAAAAAAAAAAAAAAAAAAAAAAhCP0MAAAAAAAAAAAAAAAAAAAAACEJQQAhBwNAIAggCyAHav0ABAAgACAHav0ABAD95gH95AEhCCAJIAsgB2r9AAQQIAAgB2r9AAQQ/eYB/eQBIQkgB0EgaiEHIAcgCkkNAAsgCCAJ/eQBIQggBSAI/R8AIAj9HwGSIAj9HwIgCP0fA5KSOAIAIAJBBGohAiAFQQRqIQUMAAsLC/IEBAN/BnsEfwN7IAQhEyAEQQF0IRQgBEEDbCEVIARBAnQhFiAFIANBAnRqIQoCQANAIAUgCk8NAf0MAAAAAAAAAAAAAAAAAAAAACEP/QwAAAAAAAAAAAAAAAAAAAAAIRD9DAAAAAAAAAAAAAAAAAAAAAAhEf0MAAAAAAAAAAAAAAAAAAAAACESQQAhCwNAIAAgC0EBdGr9AAQAIQ0gACALQQF0av0ABBAhDiABIAtqIQwgDyAM/QEDACAN/boBIAz9AQMIIA79ugH9rgH9rgEhDyAQIAwgE2r9AQMAIA39ugEgDCATav0BAwggDv26Af2uAf2uASEQIBEgDCAUav0BAwAgDf26ASAMIBRq/QEDCCAO/boB/a4B/a4BIREgEiAMIBVq/QEDACAN/boBIAwgFWr9AQMIIA79ugH9rgH9rgEhEiALQRBqIQsgCyAESQ0ACyAPIBD9DQABAgMEBQYHEBESExQVFhcgDyAQ/Q0ICQoLDA0ODxgZGhscHR4f/a4BIQ8gESAS/Q0AAQIDBAUGBxAREhMUFRYXIBEgEv0NCAkKCwwNDg8YGRobHB0eH/2uASERIA8gEf0NAAECAwgJCgsQERITGBkaGyAPIBH9DQQFBgcMDQ4PFBUWFxwdHh/9rgEhDyAP/foBIAf9EyAC/QAEAP3mAf3mASEXIAj9EyAC/QAEEP3mASAJ/RP95AEhGCAYIBf94AEgGP3kAf0MAACANgAAgDYAAIA2AACANv3mAf3kASEZIAUgFyAZ/eUB/QsEACAGIBcgGf3kAf0LBAAgASAWaiEBIAJBIGohAiAFQRBqIQUgBkEQaiEGDAALCwuAAQMCfwF7An8gAv0TIQYCQANAIAQgAU8NASAAIARBAnRq/QAEACAG/Ub9pAEhByAHBEBBACEIA0AgByAIdkEBcSAEIAhqIAFJcQRAIAMgBUECdGogBCAIajYCACAFQQFqIQULIAhBAWohCCAIQQRJDQALCyAEQQRqIQQMAAsLIAULsgIDA38CfQR/QwAAgP8hByACIANBAnRqIQwgAiEJAkADQCAJIAxPDQEgCUMAAID/OAIAIAlBBGohCQwACwsCQANAIAQgAU8NASAAIARBAnRq/QAEACAH/RP9RP2kASEGIAYEQEEAIQUDQCAAIAQgBWpBAnRqKgIAIQggBCAFaiABSSAIIAdecQRAQQAhCQJAA0AgCUEBdEEBaiEKIAogA08NASAKIQsgCkEBaiADSQRAIAIgCkECdGoqAgQgAiAKQQJ0aioCAF0EQCAKQQFqIQsLCyACIAtBAnRqKgIAIAhgDQEgAiAJQQJ0aiACIAtBAnRqKgIAOAIAIAshCQwACwsgAiAJQQJ0aiAIOAIAIAIqAgAhBwsgBUEBaiEFIAVBBEkNAAsLIARBBGohBAwACwsgBws=';

type ScanFn = (q: number, m: number, n: number, dim: number, out: number) => void;
type GatherFn = (q: number, m: number, slots: number, n: number, dim: number, out: number) => void;
type KthFn = (lo: number, n: number, heap: number, want: number) => number;
type SelectFn = (hi: number, n: number, t: number, out: number) => number;
type ApproxFn = (q: number, m: number, meta: number, n: number, dim: number, lo: number, hi: number, sq: number, aq: number, c: number) => void;

/** `x` rounded up to a float32 (×(1 + 2^-20) covers the rounding of a normal float32, +2^-120 a subnormal one). */
function f32Up(x: number): number {
  return Math.fround(x * (1 + 2 ** -20) + 2 ** -120);
}

let compiled: WebAssembly.Module | null | undefined;

/** The compiled scan module, or null when this runtime has no WebAssembly SIMD (the caller then uses vec0). */
export function dotScanModule(): WebAssembly.Module | null {
  if (compiled === undefined) {
    try {
      compiled = new WebAssembly.Module(Buffer.from(DOT_SCAN_WASM_BASE64, 'base64'));
    } catch {
      compiled = null;
    }
  }
  return compiled;
}

const PAGE = 65_536;

/**
 * Below this many rows `search` scans every float row (measured at 100 dims, k = 20: the first pass
 * is as fast as the full scan from ~250 rows, 1.5× faster at 1,000, 2× at 10,000; bench/README.md).
 */
export const MIN_FIRST_PASS_ROWS = 256;
/** The first pass is skipped when k is a larger share of the rows (at 1,000 rows it pays up to k ≈ 250, not at 500). */
const MAX_K_SHARE = 1 / 4;
/** Candidates beyond this share of the rows are scored by the full scan instead of gathered (near-duplicate rows). */
const MAX_CANDIDATE_SHARE = 1 / 2;
/** Rows with a larger L2 norm (or a non-finite component) are not bounded: while one is held, `search` scans fully. */
const NORM_MAX = 1 + 2 ** -10;
/** What `set` compares a row's computed norm with (its float64 rounding is far below the gap to NORM_MAX). */
const NORM_CHECK = 1 + 2 ** -11;

/**
 * The largest |component| of a vector and its L2 norm, in float64 (the row's int8 scale and the query's
 * int16 scale start from these; a NaN component leaves the norm NaN, an infinite one makes it Infinity).
 */
function maxAndNorm(v: Float32Array): { max: number; norm: number } {
  let max = 0;
  let norm2 = 0;
  for (let i = 0; i < v.length; i++) {
    const x = v[i]!;
    const ax = Math.abs(x);
    if (ax > max) max = ax;
    norm2 += x * x;
  }
  return { max, norm: Math.sqrt(norm2) };
}

/** One scored row of a scan. */
export interface ScanHit {
  rowId: number;
  /** Cosine distance, 1 − dot product of unit vectors (what vec0's distance_metric=cosine reports). */
  distance: number;
}

/** How `search` went, counted since the matrix was made (tests and benches read them). */
export interface ScanCounters {
  /** Searches that ran the int8 first pass. */
  firstPass: number;
  /** Rows those searches scored in float32 (the candidates). */
  rescored: number;
  /** Searches that scored every row in float32 (small matrix, large k, irregular row, too many candidates). */
  fullScans: number;
}

/** `a` ranks before `b`: higher similarity first, then the lower memory_id (vec0's order by distance, memory_id). */
function better(sa: number, ia: number, sb: number, ib: number): boolean {
  return sa > sb || (sa === sb && ia < ib);
}

/**
 * One tenant's unit vectors, keyed by memory_id, in a WebAssembly memory laid out as
 * [query f32 (stride) | query i16 (stride8) | scores f32 (capacity) | upper bounds f32 (capacity) |
 *  candidate slots i32 (capacity) | per block of 4 rows: 4 f32 scales, 4 f32 residual norms |
 *  float rows (capacity × stride f32) | int8 rows (capacity × stride8 i8)];
 * float rows are zero-padded to a multiple of 8 components, int8 rows to a multiple of 16.
 * Deleting moves the last row into the hole, so rows stay contiguous. Per row 4·stride + stride8 + 20
 * bytes in the memory and 9 in JS (id, flag): at 100 dims 557 bytes, of which the int8 copy, its
 * scale and bound and the first pass's scratch are 129 (+30 % over the float rows alone).
 */
export class DotScanMatrix {
  readonly dim: number;
  private readonly stride: number;
  /** An int8 row's length, a multiple of 16 (the first pass reads 16 components at a time). */
  private readonly stride8: number;
  /** The quantised query's largest magnitude: the int8 pass's i32 sums cannot overflow (stride8·127·qmax < 2^31). */
  private readonly qmax: number;
  /** γ_m of the float32 scan (see `search`). */
  private readonly gamma: number;
  private capacity = 0;
  private count = 0;
  private memory!: WebAssembly.Memory;
  private f32!: Float32Array;
  private i8!: Int8Array;
  private i16!: Int16Array;
  private i32!: Int32Array;
  private scan!: ScanFn;
  private gather!: GatherFn;
  private approx!: ApproxFn;
  private select!: SelectFn;
  private kth!: KthFn;
  private rowIds = new Float64Array(0);
  /** 1 where the row's norm exceeds NORM_MAX or it has a non-finite component. */
  private irregular = new Uint8Array(0);
  private irregularRows = 0;
  private readonly slotOf = new Map<number, number>();
  private readonly counters: ScanCounters = { firstPass: 0, rescored: 0, fullScans: 0 };

  constructor(
    private readonly module: WebAssembly.Module,
    dim: number,
    initialCapacity = 1024,
  ) {
    if (!Number.isInteger(dim) || dim <= 0) throw new RangeError(`invalid vector dimension ${dim}`);
    this.dim = dim;
    this.stride = Math.ceil(dim / 8) * 8;
    this.stride8 = Math.ceil(dim / 16) * 16;
    this.qmax = Math.min(32_767, Math.floor((2 ** 31 - 1) / (this.stride8 * 127)));
    const m = this.stride / 8 + 4;
    this.gamma = (m * 2 ** -24) / (1 - m * 2 ** -24);
    this.allocate(Math.max(8, initialCapacity));
  }

  get size(): number {
    return this.count;
  }

  get stats(): Readonly<ScanCounters> {
    return this.counters;
  }

  /** Bytes held by the WebAssembly memory and the JS arrays. */
  get bytes(): number {
    return this.memory.buffer.byteLength + this.rowIds.byteLength + this.irregular.byteLength;
  }

  /** Bytes a matrix of `rows` rows of `dim` floats needs (budget checks before loading). */
  static bytesFor(rows: number, dim: number): number {
    const stride = Math.ceil(dim / 8) * 8;
    const stride8 = Math.ceil(dim / 16) * 16;
    return 4 * stride + 2 * stride8 + rows * (4 * stride + stride8 + 29);
  }

  /** Rows the matrix holds before it must grow. */
  get rowCapacity(): number {
    return this.capacity;
  }

  /**
   * The most rows a matrix of `dim` floats can hold within `bytes` (its WebAssembly memory, rounded up
   * to whole pages, plus the id and flag arrays), or 0 when not even 8 fit.
   */
  static capacityWithin(bytes: number, dim: number): number {
    const stride = Math.ceil(dim / 8) * 8;
    const stride8 = Math.ceil(dim / 16) * 16;
    // memory ≤ 4·stride + 2·stride8 + cap·(4·stride + stride8 + 20) + one page of rounding; ids and flags = 9·cap.
    const cap = Math.floor((bytes - PAGE - 4 * stride - 2 * stride8) / (4 * stride + stride8 + 29));
    return cap >= 8 ? Math.floor(cap / 8) * 8 : 0;
  }

  /** Grows the matrix to hold at least `rows` rows (one copy), so the next inserts do not double it. */
  reserve(rows: number): void {
    if (rows > this.capacity) this.allocate(rows);
  }

  // Byte offsets of the regions (see the class comment).
  private get qI16At(): number {
    return 4 * this.stride;
  }
  private get scoresAt(): number {
    return 4 * this.stride + 2 * this.stride8;
  }
  private get hiAt(): number {
    return this.scoresAt + 4 * this.capacity;
  }
  private get slotsAt(): number {
    return this.hiAt + 4 * this.capacity;
  }
  private get metaAt(): number {
    return this.slotsAt + 4 * this.capacity;
  }
  private get rowsAt(): number {
    return this.metaAt + 8 * this.capacity;
  }
  private get int8At(): number {
    return this.rowsAt + 4 * this.capacity * this.stride;
  }

  private allocate(capacity: number): void {
    const cap = Math.ceil(capacity / 8) * 8;
    const stride = this.stride;
    const stride8 = this.stride8;
    const rowsAt = 4 * stride + 2 * stride8 + 20 * cap;
    const int8At = rowsAt + 4 * cap * stride;
    const memory = new WebAssembly.Memory({ initial: Math.ceil((int8At + cap * stride8) / PAGE) });
    const f32 = new Float32Array(memory.buffer);
    const i8 = new Int8Array(memory.buffer);
    if (this.count > 0) {
      const rows = this.count * stride;
      f32.set(this.f32.subarray(this.rowsAt / 4, this.rowsAt / 4 + rows), rowsAt / 4);
      i8.set(this.i8.subarray(this.int8At, this.int8At + this.count * stride8), int8At);
      const meta = 8 * Math.ceil(this.count / 4); // whole blocks of four rows
      f32.set(this.f32.subarray(this.metaAt / 4, this.metaAt / 4 + meta), (rowsAt - 8 * cap) / 4);
    }
    const ids = new Float64Array(cap);
    ids.set(this.rowIds.subarray(0, this.count));
    const irregular = new Uint8Array(cap);
    irregular.set(this.irregular.subarray(0, this.count));
    const instance = new WebAssembly.Instance(this.module, { env: { memory } });
    this.memory = memory;
    this.f32 = f32;
    this.i8 = i8;
    this.i16 = new Int16Array(memory.buffer);
    this.i32 = new Int32Array(memory.buffer);
    this.scan = instance.exports.scan as ScanFn;
    this.gather = instance.exports.gather as GatherFn;
    this.approx = instance.exports.approx as ApproxFn;
    this.select = instance.exports.select as SelectFn;
    this.kth = instance.exports.kth as KthFn;
    this.rowIds = ids;
    this.irregular = irregular;
    this.capacity = cap;
  }

  has(rowId: number): boolean {
    return this.slotOf.has(rowId);
  }

  /** Inserts or replaces a memory's vector (`unit` must be L2-normalised and `dim` long). */
  set(rowId: number, unit: Float32Array): void {
    if (unit.length !== this.dim) throw new RangeError(`vector has ${unit.length} dimensions, the matrix has ${this.dim}`);
    let slot = this.slotOf.get(rowId);
    if (slot === undefined) {
      if (this.count === this.capacity) this.allocate(this.capacity * 2);
      slot = this.count++;
      this.slotOf.set(rowId, slot);
      this.rowIds[slot] = rowId;
    } else {
      this.irregularRows -= this.irregular[slot]!;
    }
    const at = this.rowsAt / 4 + slot * this.stride;
    this.f32.set(unit, at);
    this.f32.fill(0, at + this.dim, at + this.stride);
    // The int8 copy: R = round(r / scale) with scale = max|r| / 127, and ‖r − scale·R‖ rounded up.
    const dim = this.dim;
    const { max, norm } = maxAndNorm(unit);
    const regular = norm <= NORM_CHECK; // false for NaN and ±Infinity too
    const scale = regular ? Math.fround(max / 127) : 0;
    const i8 = this.i8;
    const q = this.int8At + slot * this.stride8;
    let res2 = 0;
    for (let i = 0; i < dim; i++) {
      const x = unit[i]!;
      const v = scale > 0 ? Math.max(-127, Math.min(127, Math.round(x / scale))) : 0;
      i8[q + i] = v;
      const d = x - scale * v;
      res2 += d * d;
    }
    i8.fill(0, q + dim, q + this.stride8);
    const meta = this.metaOf(slot);
    this.f32[meta] = scale;
    this.f32[meta + 4] = regular ? f32Up(Math.sqrt(res2)) : 0;
    this.irregular[slot] = regular ? 0 : 1;
    if (!regular) this.irregularRows++;
  }

  /** The float index of a row's scale (its residual norm is 4 floats further). */
  private metaOf(slot: number): number {
    return this.metaAt / 4 + 8 * (slot >> 2) + (slot & 3);
  }

  delete(rowId: number): boolean {
    const slot = this.slotOf.get(rowId);
    if (slot === undefined) return false;
    const last = this.count - 1;
    this.irregularRows -= this.irregular[slot]!;
    if (slot !== last) {
      const stride = this.stride;
      const base = this.rowsAt / 4;
      this.f32.copyWithin(base + slot * stride, base + last * stride, base + (last + 1) * stride);
      const b8 = this.int8At;
      const stride8 = this.stride8;
      this.i8.copyWithin(b8 + slot * stride8, b8 + last * stride8, b8 + (last + 1) * stride8);
      const to = this.metaOf(slot);
      const from = this.metaOf(last);
      this.f32[to] = this.f32[from]!;
      this.f32[to + 4] = this.f32[from + 4]!;
      this.irregular[slot] = this.irregular[last]!;
      const moved = this.rowIds[last]!;
      this.rowIds[slot] = moved;
      this.slotOf.set(moved, slot);
    }
    this.slotOf.delete(rowId);
    this.count = last;
    return true;
  }

  /**
   * The k rows most similar to `unit` (L2-normalised), best first; ties by the lower memory_id.
   * The same rows, order and distances as `searchFull`, bit for bit; why:
   *
   * Let s_r be the float32 score the full scan computes for row r, q and r the float32 query and
   * row (as reals), q̂ = sq·Q and r̂ = sr·R their quantised copies (Q in ±qmax, R in ±127, integers;
   * sq and sr float32) and I = Q·R, computed exactly in i32 lanes (every partial sum is at most
   * stride8·qmax·127 < 2^31 in magnitude).
   * 1. Float rounding of the scan: each product passes through at most m = stride/8 + 4 roundings
   *    (the multiply, stride/8 accumulator adds, the a + b add, two adds of the final tree; WebAssembly
   *    neither fuses nor reorders them), so |s_r − q·r| ≤ γ_m·Σ|q_i·r_i| ≤ γ_m·‖q‖·‖r‖ with
   *    γ_m = m·u/(1 − m·u), u = 2^-24 (Higham, Accuracy and Stability, §3.1), plus at most 2^-149 per
   *    operation should anything underflow.
   * 2. Quantisation: q·r − q̂·r̂ = q̂·(r − r̂) + (q − q̂)·r, so by Cauchy–Schwarz
   *    |q·r − sq·sr·I| ≤ ‖q̂‖·ρ_r + ‖q − q̂‖·‖r‖, where ρ_r = ‖r − r̂‖ is stored per row (rounded up).
   * 3. ‖r‖ ≤ NORM_MAX for every row while `irregularRows` is 0, so with
   *    e_r = aq·ρ_r + c,  aq ≥ ‖q̂‖,  c ≥ (‖q − q̂‖ + (γ_m + 2^-30)·‖q‖)·NORM_MAX + 2^-100
   *    (aq, c and ρ_r are rounded up to float32), |s_r − sq·sr·I| ≤ e_r − 2^-100. The 2^-30·‖q‖
   *    term covers the float64 rounding of the norms and residuals computed here and in `set`
   *    (below dim·2^-52 relative to ‖q‖·‖r‖); 2^-100 covers underflow, here and in step 4.
   * 4. approx() computes in float32, for four rows at once, a = f(I)·f(sq·sr), e = f(aq·ρ_r) + c,
   *    w = e + (|a| + e)·2^-18, lo = a − w, hi = a + w, each operation rounded to nearest
   *    (WebAssembly keeps subnormals). With u = 2^-24: a is within 3.01u·|a| of sq·sr·I, e and w
   *    lose at most 2.01u relative each, and the final subtraction or addition rounds by at most
   *    u·(|a| + w): together below 6u·(|a| + e) < 2^-18·(|a| + e), so the margin covers them (and
   *    an underflowing sq·sr costs at most 2^31·2^-150, inside c's 2^-100). So lo_r ≤ s_r ≤ hi_r.
   * 5. Let T be the k-th largest lo. At least k rows have s ≥ lo ≥ T, so the k-th best score is
   *    ≥ T. A row with hi_r < T has s_r < T, strictly below k better rows: it is not in the top k
   *    whatever the tie rule. Every row with hi_r ≥ T is rescored by gather(), the scan's own
   *    instructions (bit-identical s_r), and the top k of a superset of the top k under the same
   *    total order (score, then memory_id) is the top k.
   */
  search(unit: Float32Array, k: number): ScanHit[] {
    if (unit.length !== this.dim) throw new RangeError(`query has ${unit.length} dimensions, the matrix has ${this.dim}`);
    const n = this.count;
    const want = Math.min(k, n);
    if (want <= 0) return [];
    this.writeQuery(unit);
    if (n < MIN_FIRST_PASS_ROWS || want > n * MAX_K_SHARE || this.irregularRows > 0 || this.qmax < 127) return this.scoreAll(n, want);
    // The query, quantised to i16 (more precise than the rows: its error term nearly vanishes).
    const dim = this.dim;
    const { max, norm } = maxAndNorm(unit);
    const qmax = this.qmax;
    const sq = Math.fround(max / qmax); // approx() takes it as a float32: q̂ is defined with this value
    // A non-finite or non-unit-sized query (products could overflow float32): no bound, full scan.
    // So too a query whose largest component is at most qmax·2^-150 (zero too): its scale rounds to 0,
    // and 0/0 would quantise its zero components to NaN, NaN bounds, and no row would be a candidate.
    if (!(norm <= 2) || !(sq > 0)) return this.scoreAll(n, want);
    const i16 = this.i16;
    const q16 = this.qI16At / 2;
    let hat2 = 0;
    let res2 = 0;
    for (let i = 0; i < dim; i++) {
      const x = unit[i]!;
      const v = Math.max(-qmax, Math.min(qmax, Math.round(x / sq)));
      i16[q16 + i] = v;
      const h = sq * v;
      hat2 += h * h;
      res2 += (x - h) * (x - h);
    }
    i16.fill(0, q16 + dim, q16 + this.stride8);
    const aq = f32Up(Math.sqrt(hat2));
    const c = f32Up((Math.sqrt(res2) + (this.gamma + 2 ** -30) * norm) * NORM_MAX + 2 ** -100);
    const lo = this.scoresAt;
    const hiAt = this.hiAt;
    this.approx(this.qI16At, this.int8At, this.metaAt, n, this.stride8, lo, hiAt, sq, aq, c);

    // T = the k-th largest lo (its heap in the slots region), then the rows with hi ≥ T (step 5).
    const t = this.kth(lo, n, this.slotsAt, want);
    const m = this.select(hiAt, n, t, this.slotsAt);
    if (m > n * MAX_CANDIDATE_SHARE) return this.scoreAll(n, want);
    this.counters.firstPass++;
    this.counters.rescored += m;
    // Exact float32 scores of the candidates (into the scores region: the lower bounds are spent).
    this.gather(0, this.rowsAt, this.slotsAt, m, this.stride, this.scoresAt);
    const slots = this.i32;
    const sl = this.slotsAt / 4;
    const ids = new Float64Array(m);
    for (let i = 0; i < m; i++) ids[i] = this.rowIds[slots[sl + i]!]!;
    return this.topK(this.scoresAt / 4, ids, m, want);
  }

  /** The k best rows by scoring every row in float32: `search`'s reference and fallback. */
  searchFull(unit: Float32Array, k: number): ScanHit[] {
    if (unit.length !== this.dim) throw new RangeError(`query has ${unit.length} dimensions, the matrix has ${this.dim}`);
    const n = this.count;
    const want = Math.min(k, n);
    if (want <= 0) return [];
    this.writeQuery(unit);
    return this.scoreAll(n, want);
  }

  private writeQuery(unit: Float32Array): void {
    this.f32.set(unit, 0);
    this.f32.fill(0, this.dim, this.stride);
  }

  private scoreAll(n: number, want: number): ScanHit[] {
    this.counters.fullScans++;
    this.scan(0, this.rowsAt, n, this.stride, this.scoresAt);
    return this.topK(this.scoresAt / 4, this.rowIds, n, want);
  }

  /** The best `want` of `n` scores at f32[so + i] with ids[i], best first (score, then lower id). */
  private topK(so: number, ids: Float64Array, n: number, want: number): ScanHit[] {
    const f32 = this.f32;
    // Bounded min-heap of the best `want` (root = the worst kept), over indices.
    const heap = new Int32Array(want);
    let size = 0;
    const worse = (a: number, b: number) => better(f32[so + b]!, ids[b]!, f32[so + a]!, ids[a]!);
    const siftDown = (i: number) => {
      for (;;) {
        const l = 2 * i + 1;
        if (l >= size) return;
        let w = l;
        if (l + 1 < size && worse(heap[l + 1]!, heap[l]!)) w = l + 1;
        if (!worse(heap[w]!, heap[i]!)) return;
        const t = heap[i]!;
        heap[i] = heap[w]!;
        heap[w] = t;
        i = w;
      }
    };
    let s = 0;
    for (; s < n && size < want; s++) {
      let i = size++;
      heap[i] = s;
      while (i > 0) {
        const p = (i - 1) >> 1;
        if (!worse(heap[i]!, heap[p]!)) break;
        const t = heap[i]!;
        heap[i] = heap[p]!;
        heap[p] = t;
        i = p;
      }
    }
    // The heap is full: most rows score below its root and cost one comparison against a local
    // (issue #14: reading the root's slot and score from the arrays per row was ~15 % of a search).
    let root = heap[0]!;
    let rs = f32[so + root]!;
    for (; s < n; s++) {
      const sc = f32[so + s]!;
      if (sc < rs) continue;
      if (sc > rs || (sc === rs && ids[s]! < ids[root]!)) {
        heap[0] = s;
        siftDown(0);
        root = heap[0]!;
        rs = f32[so + root]!;
      }
    }
    const out: ScanHit[] = [];
    for (let i = 0; i < size; i++) out.push({ rowId: ids[heap[i]!]!, distance: 1 - f32[so + heap[i]!]! });
    out.sort((a, b) => a.distance - b.distance || a.rowId - b.rowId);
    return out;
  }
}
