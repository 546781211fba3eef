/**
 * The in-memory KNN scan of one tenant's vectors (issue #14): a float32 matrix in a WebAssembly
 * memory, scored by a WASM SIMD dot-product loop (src/vector/dot-scan.wat; 100k × 100 dims in
 * ~1 ms where sqlite-vec 0.1.9's vec0 scan takes ~30 ms), then an exact top-k in JS. Rows are unit
 * vectors, so the dot product is the cosine similarity and the ranking is exact float KNN.
 */

/** src/vector/dot-scan.wat compiled by wabt 1.0.39 with SIMD on (dot-scan.test.ts recompiles it and compares). */
export const DOT_SCAN_WASM_BASE64 =
  'AGFzbQEAAAABCQFgBX9/f39/AAIPAQNlbnYGbWVtb3J5AgABAwIBAAcIAQRzY2FuAAAK0wEB0AEDAn8CewF/IANBAnQhCSAEIAJBAnRqIQUCQANAIAQgBU8NAf0MAAAAAAAAAAAAAAAAAAAAACEH/QwAAAAAAAAAAAAAAAAAAAAAIQhBACEGA0AgByABIAZq/QAEACAAIAZq/QAEAP3mAf3kASEHIAggASAGav0ABBAgACAGav0ABBD95gH95AEhCCAGQSBqIQYgBiAJSQ0ACyAHIAj95AEhByAEIAf9HwAgB/0fAZIgB/0fAiAH/R8DkpI4AgAgASAJaiEBIARBBGohBAwACwsL';

type ScanFn = (q: number, m: number, n: number, dim: number, out: number) => void;

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

/** One scored row of a scan. */
export interface ScanHit {
  rowId: number;
  /** Cosine distance, 1 − dot product of unit vectors (what vec0's distance_metric=cosine reports). */
  distance: number;
}

/** `a` ranks before `b`: higher similarity first, then the lower memory_id (vec0's order by distance, memory_id). */
function better(sa: number, ia: number, sb: number, ib: number): boolean {
  return sa > sb || (sa === sb && ia < ib);
}

/**
 * One tenant's unit vectors, keyed by memory_id, in a WebAssembly memory laid out as
 * [query | scores (capacity) | rows (capacity × stride)]; rows are zero-padded to a multiple of 8
 * floats. Deleting moves the last row into the hole, so rows stay contiguous.
 */
export class DotScanMatrix {
  readonly dim: number;
  private readonly stride: number;
  private capacity = 0;
  private count = 0;
  private memory!: WebAssembly.Memory;
  private f32!: Float32Array;
  private scan!: ScanFn;
  private rowIds = new Float64Array(0);
  private readonly slotOf = new Map<number, number>();

  constructor(
    private readonly module: WebAssembly.Module,
    dim: number,
    initialCapacity = 1024,
  ) {
    if (!Number.isInteger(dim) || dim <= 0) throw new RangeError(`invalid vector dimension ${dim}`);
    this.dim = dim;
    this.stride = Math.ceil(dim / 8) * 8;
    this.allocate(Math.max(8, initialCapacity));
  }

  get size(): number {
    return this.count;
  }

  /** Bytes held by the WebAssembly memory and the id arrays. */
  get bytes(): number {
    return this.memory.buffer.byteLength + this.rowIds.byteLength;
  }

  /** Bytes a matrix of `rows` rows of `dim` floats needs (budget checks before loading). */
  static bytesFor(rows: number, dim: number): number {
    return rows * (Math.ceil(dim / 8) * 8 + 3) * 4;
  }

  /** Rows the matrix holds before it must grow. */
  get rowCapacity(): number {
    return this.capacity;
  }

  /**
   * The most rows a matrix of `dim` floats can hold within `bytes` (its WebAssembly memory, rounded up
   * to whole pages, plus the id array), or 0 when not even 8 fit.
   */
  static capacityWithin(bytes: number, dim: number): number {
    const stride = Math.ceil(dim / 8) * 8;
    // memory ≤ 4·(stride + cap·(stride + 1)) + one page of rounding; ids = 8·cap.
    const cap = Math.floor((bytes - PAGE - 4 * stride) / (4 * (stride + 1) + 8));
    return cap >= 8 ? Math.floor(cap / 8) * 8 : 0;
  }

  /** Grows the matrix to hold at least `rows` rows (one copy), so the next inserts do not double it. */
  reserve(rows: number): void {
    if (rows > this.capacity) this.allocate(rows);
  }

  private get scoresOffset(): number {
    return this.stride; // in floats
  }

  private get rowsOffset(): number {
    return this.stride + this.capacity;
  }

  private allocate(capacity: number): void {
    const cap = Math.ceil(capacity / 8) * 8;
    const floats = this.stride + cap + cap * this.stride;
    const memory = new WebAssembly.Memory({ initial: Math.ceil((floats * 4) / PAGE) });
    const f32 = new Float32Array(memory.buffer);
    if (this.count > 0) {
      const from = this.rowsOffset;
      f32.set(this.f32.subarray(from, from + this.count * this.stride), this.stride + cap);
    }
    const ids = new Float64Array(cap);
    ids.set(this.rowIds.subarray(0, this.count));
    const instance = new WebAssembly.Instance(this.module, { env: { memory } });
    this.memory = memory;
    this.f32 = f32;
    this.scan = instance.exports.scan as ScanFn;
    this.rowIds = ids;
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
    }
    const at = this.rowsOffset + slot * this.stride;
    this.f32.set(unit, at);
    this.f32.fill(0, at + this.dim, at + this.stride);
  }

  delete(rowId: number): boolean {
    const slot = this.slotOf.get(rowId);
    if (slot === undefined) return false;
    const last = this.count - 1;
    if (slot !== last) {
      const base = this.rowsOffset;
      this.f32.copyWithin(base + slot * this.stride, base + last * this.stride, base + (last + 1) * this.stride);
      const moved = this.rowIds[last]!;
      this.rowIds[slot] = moved;
      this.slotOf.set(moved, slot);
    }
    this.slotOf.delete(rowId);
    this.count = last;
    return true;
  }

  /** The k rows most similar to `unit` (L2-normalised), best first; ties by the lower memory_id. */
  search(unit: Float32Array, k: number): ScanHit[] {
    if (unit.length !== this.dim) throw new RangeError(`query has ${unit.length} dimensions, the matrix has ${this.dim}`);
    const n = this.count;
    const want = Math.min(k, n);
    if (want <= 0) return [];
    const f32 = this.f32;
    f32.set(unit, 0);
    f32.fill(0, this.dim, this.stride);
    const so = this.scoresOffset;
    this.scan(0, this.rowsOffset * 4, n, this.stride, so * 4);
    // Bounded min-heap of the best `want` (root = the worst kept), over slots.
    const heap = new Int32Array(want);
    let size = 0;
    const ids = this.rowIds;
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
