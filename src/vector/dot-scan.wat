;; The KNN scan of the in-memory vector index (src/vector/dot-scan.ts embeds its compiled bytes;
;; src/vector/dot-scan.test.ts recompiles this file with wabt and checks they are identical).
;; scan(q, m, n, dim, out): out[i] = dot(q, row i) for n rows of `dim` float32s stored contiguously
;; from byte offset m; q is one row of `dim` float32s; dim is a positive multiple of 8 (rows are
;; zero-padded). Two f32x4 accumulators per row, summed at the end.
;; gather(q, m, slots, n, dim, out): out[i] = dot(q, row slots[i]) (slots: n i32 row indices), with
;; exactly scan's instructions per row, so its scores are bit-identical to scan's.
;; kth(lo, n, heap, want) → the want-th largest of the n f32s at lo (1 ≤ want ≤ n; lo readable up to n
;; rounded up to a multiple of 4), by a min-heap of `want` f32s at heap; -inf stands for "none yet",
;; so the first `want` values all enter.
;; select(hi, n, t, out) → count: writes to out (i32s), in order, every i < n with hi[i] ≥ t (f32s; hi
;; must be readable up to n rounded up to a multiple of 4).
;; approx(q, m, meta, n, dim, lo, hi, sq, aq, c): the int8 first pass (dot-scan.ts explains the
;; bound), four rows at a time (n is rounded up to a multiple of 4: the memory must hold those rows).
;; q: `dim` i16s, the quantised query; m: rows of `dim` int8s from byte offset m, dim a positive
;; multiple of 16; meta: per block of four rows their four f32 scales, then their four f32 residual
;; norms. For row i, with I the integer dot product (exact in i32 when dim·127·max|q| < 2^31), in
;; float32: a = I·(sq·scale_i), e = aq·resid_i + c, w = e + (|a| + e)·2^-18, lo[i] = a − w, hi[i] = a + w.
(module
  (import "env" "memory" (memory 1))
  (func (export "scan") (param $q i32) (param $m i32) (param $n i32) (param $dim i32) (param $out i32)
    (local $end i32) (local $j i32) (local $a v128) (local $b v128) (local $bytes i32)
    (local.set $bytes (i32.shl (local.get $dim) (i32.const 2)))
    (local.set $end (i32.add (local.get $out) (i32.shl (local.get $n) (i32.const 2))))
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $out) (local.get $end)))
        (local.set $a (v128.const i32x4 0 0 0 0))
        (local.set $b (v128.const i32x4 0 0 0 0))
        (local.set $j (i32.const 0))
        (loop $cols
          (local.set $a (f32x4.add (local.get $a)
            (f32x4.mul (v128.load (i32.add (local.get $m) (local.get $j))) (v128.load (i32.add (local.get $q) (local.get $j))))))
          (local.set $b (f32x4.add (local.get $b)
            (f32x4.mul (v128.load offset=16 (i32.add (local.get $m) (local.get $j))) (v128.load offset=16 (i32.add (local.get $q) (local.get $j))))))
          (local.set $j (i32.add (local.get $j) (i32.const 32)))
          (br_if $cols (i32.lt_u (local.get $j) (local.get $bytes))))
        (local.set $a (f32x4.add (local.get $a) (local.get $b)))
        (f32.store (local.get $out)
          (f32.add (f32.add (f32x4.extract_lane 0 (local.get $a)) (f32x4.extract_lane 1 (local.get $a)))
                   (f32.add (f32x4.extract_lane 2 (local.get $a)) (f32x4.extract_lane 3 (local.get $a)))))
        (local.set $m (i32.add (local.get $m) (local.get $bytes)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $rows))))
  (func (export "gather") (param $q i32) (param $m i32) (param $slots i32) (param $n i32) (param $dim i32) (param $out i32)
    (local $end i32) (local $j i32) (local $a v128) (local $b v128) (local $bytes i32) (local $row i32)
    (local.set $bytes (i32.shl (local.get $dim) (i32.const 2)))
    (local.set $end (i32.add (local.get $out) (i32.shl (local.get $n) (i32.const 2))))
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $out) (local.get $end)))
        (local.set $row (i32.add (local.get $m) (i32.mul (i32.load (local.get $slots)) (local.get $bytes))))
        (local.set $a (v128.const i32x4 0 0 0 0))
        (local.set $b (v128.const i32x4 0 0 0 0))
        (local.set $j (i32.const 0))
        (loop $cols
          (local.set $a (f32x4.add (local.get $a)
            (f32x4.mul (v128.load (i32.add (local.get $row) (local.get $j))) (v128.load (i32.add (local.get $q) (local.get $j))))))
          (local.set $b (f32x4.add (local.get $b)
            (f32x4.mul (v128.load offset=16 (i32.add (local.get $row) (local.get $j))) (v128.load offset=16 (i32.add (local.get $q) (local.get $j))))))
          (local.set $j (i32.add (local.get $j) (i32.const 32)))
          (br_if $cols (i32.lt_u (local.get $j) (local.get $bytes))))
        (local.set $a (f32x4.add (local.get $a) (local.get $b)))
        (f32.store (local.get $out)
          (f32.add (f32.add (f32x4.extract_lane 0 (local.get $a)) (f32x4.extract_lane 1 (local.get $a)))
                   (f32.add (f32x4.extract_lane 2 (local.get $a)) (f32x4.extract_lane 3 (local.get $a)))))
        (local.set $slots (i32.add (local.get $slots) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $rows))))
  (func (export "approx") (param $q i32) (param $m i32) (param $meta i32) (param $n i32) (param $dim i32)
    (param $lo i32) (param $hi i32) (param $sq f32) (param $aq f32) (param $c f32)
    (local $end i32) (local $j i32) (local $p i32) (local $ql v128) (local $qh v128)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (local $d1 i32) (local $d2 i32) (local $d3 i32) (local $d4 i32)
    (local $a v128) (local $e v128) (local $w v128)
    (local.set $d1 (local.get $dim))
    (local.set $d2 (i32.shl (local.get $dim) (i32.const 1)))
    (local.set $d3 (i32.mul (local.get $dim) (i32.const 3)))
    (local.set $d4 (i32.shl (local.get $dim) (i32.const 2)))
    (local.set $end (i32.add (local.get $lo) (i32.shl (local.get $n) (i32.const 2))))
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $lo) (local.get $end)))
        (local.set $a0 (v128.const i32x4 0 0 0 0))
        (local.set $a1 (v128.const i32x4 0 0 0 0))
        (local.set $a2 (v128.const i32x4 0 0 0 0))
        (local.set $a3 (v128.const i32x4 0 0 0 0))
        (local.set $j (i32.const 0))
        (loop $cols
          (local.set $ql (v128.load (i32.add (local.get $q) (i32.shl (local.get $j) (i32.const 1)))))
          (local.set $qh (v128.load offset=16 (i32.add (local.get $q) (i32.shl (local.get $j) (i32.const 1)))))
          (local.set $p (i32.add (local.get $m) (local.get $j)))
                    (local.set $a0 (i32x4.add (local.get $a0) (i32x4.add
            (i32x4.dot_i16x8_s (v128.load8x8_s (local.get $p)) (local.get $ql))
            (i32x4.dot_i16x8_s (v128.load8x8_s offset=8 (local.get $p)) (local.get $qh)))))
                    (local.set $a1 (i32x4.add (local.get $a1) (i32x4.add
            (i32x4.dot_i16x8_s (v128.load8x8_s (i32.add (local.get $p) (local.get $d1))) (local.get $ql))
            (i32x4.dot_i16x8_s (v128.load8x8_s offset=8 (i32.add (local.get $p) (local.get $d1))) (local.get $qh)))))
                    (local.set $a2 (i32x4.add (local.get $a2) (i32x4.add
            (i32x4.dot_i16x8_s (v128.load8x8_s (i32.add (local.get $p) (local.get $d2))) (local.get $ql))
            (i32x4.dot_i16x8_s (v128.load8x8_s offset=8 (i32.add (local.get $p) (local.get $d2))) (local.get $qh)))))
                    (local.set $a3 (i32x4.add (local.get $a3) (i32x4.add
            (i32x4.dot_i16x8_s (v128.load8x8_s (i32.add (local.get $p) (local.get $d3))) (local.get $ql))
            (i32x4.dot_i16x8_s (v128.load8x8_s offset=8 (i32.add (local.get $p) (local.get $d3))) (local.get $qh)))))
          (local.set $j (i32.add (local.get $j) (i32.const 16)))
          (br_if $cols (i32.lt_u (local.get $j) (local.get $dim))))
        ;; the four rows' dot products in one i32x4
        (local.set $a0 (i32x4.add (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $a0) (local.get $a1))
                                  (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $a0) (local.get $a1))))
        (local.set $a2 (i32x4.add (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $a2) (local.get $a3))
                                  (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $a2) (local.get $a3))))
        (local.set $a0 (i32x4.add (i8x16.shuffle 0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 (local.get $a0) (local.get $a2))
                                  (i8x16.shuffle 4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31 (local.get $a0) (local.get $a2))))
        (local.set $a (f32x4.mul (f32x4.convert_i32x4_s (local.get $a0))
                                 (f32x4.mul (f32x4.splat (local.get $sq)) (v128.load (local.get $meta)))))
        (local.set $e (f32x4.add (f32x4.mul (f32x4.splat (local.get $aq)) (v128.load offset=16 (local.get $meta))) (f32x4.splat (local.get $c))))
        (local.set $w (f32x4.add (local.get $e)
                                 (f32x4.mul (f32x4.add (f32x4.abs (local.get $a)) (local.get $e)) (v128.const f32x4 0x1p-18 0x1p-18 0x1p-18 0x1p-18))))
        (v128.store (local.get $lo) (f32x4.sub (local.get $a) (local.get $w)))
        (v128.store (local.get $hi) (f32x4.add (local.get $a) (local.get $w)))
        (local.set $m (i32.add (local.get $m) (local.get $d4)))
        (local.set $meta (i32.add (local.get $meta) (i32.const 32)))
        (local.set $lo (i32.add (local.get $lo) (i32.const 16)))
        (local.set $hi (i32.add (local.get $hi) (i32.const 16)))
        (br $rows))))
  (func (export "select") (param $hi i32) (param $n i32) (param $t f32) (param $out i32) (result i32)
    (local $i i32) (local $cnt i32) (local $tv v128) (local $bits i32) (local $l i32)
    (local.set $tv (f32x4.splat (local.get $t)))
    (block $done
      (loop $blocks
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $bits (i32x4.bitmask (f32x4.ge (v128.load (i32.add (local.get $hi) (i32.shl (local.get $i) (i32.const 2)))) (local.get $tv))))
        (if (local.get $bits)
          (then
            (local.set $l (i32.const 0))
            (loop $lanes
              (if (i32.and (i32.and (i32.shr_u (local.get $bits) (local.get $l)) (i32.const 1))
                           (i32.lt_u (i32.add (local.get $i) (local.get $l)) (local.get $n)))
                (then
                  (i32.store (i32.add (local.get $out) (i32.shl (local.get $cnt) (i32.const 2))) (i32.add (local.get $i) (local.get $l)))
                  (local.set $cnt (i32.add (local.get $cnt) (i32.const 1)))))
              (local.set $l (i32.add (local.get $l) (i32.const 1)))
              (br_if $lanes (i32.lt_u (local.get $l) (i32.const 4))))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $blocks)))
    (local.get $cnt))
  (func (export "kth") (param $lo i32) (param $n i32) (param $heap i32) (param $want i32) (result f32)
    (local $i i32) (local $l i32) (local $bits i32) (local $t f32) (local $v f32)
    (local $j i32) (local $a i32) (local $b i32) (local $end i32)
    (local.set $t (f32.const -inf))
    (local.set $end (i32.add (local.get $heap) (i32.shl (local.get $want) (i32.const 2))))
    (local.set $j (local.get $heap))
    (block $filled
      (loop $fill
        (br_if $filled (i32.ge_u (local.get $j) (local.get $end)))
        (f32.store (local.get $j) (f32.const -inf))
        (local.set $j (i32.add (local.get $j) (i32.const 4)))
        (br $fill)))
    (block $done
      (loop $blocks
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $bits (i32x4.bitmask (f32x4.gt (v128.load (i32.add (local.get $lo) (i32.shl (local.get $i) (i32.const 2))))
                                                  (f32x4.splat (local.get $t)))))
        (if (local.get $bits)
          (then
            (local.set $l (i32.const 0))
            (loop $lanes
              (local.set $v (f32.load (i32.add (local.get $lo) (i32.shl (i32.add (local.get $i) (local.get $l)) (i32.const 2)))))
              (if (i32.and (i32.lt_u (i32.add (local.get $i) (local.get $l)) (local.get $n)) (f32.gt (local.get $v) (local.get $t)))
                (then
                  ;; replace the root (the smallest kept) and sift it down
                  (local.set $j (i32.const 0))
                  (block $placed
                    (loop $sift
                      (local.set $a (i32.add (i32.shl (local.get $j) (i32.const 1)) (i32.const 1)))
                      (br_if $placed (i32.ge_u (local.get $a) (local.get $want)))
                      (local.set $b (local.get $a))
                      (if (i32.lt_u (i32.add (local.get $a) (i32.const 1)) (local.get $want))
                        (then
                          (if (f32.lt (f32.load offset=4 (i32.add (local.get $heap) (i32.shl (local.get $a) (i32.const 2))))
                                      (f32.load (i32.add (local.get $heap) (i32.shl (local.get $a) (i32.const 2)))))
                            (then (local.set $b (i32.add (local.get $a) (i32.const 1)))))))
                      (br_if $placed (f32.ge (f32.load (i32.add (local.get $heap) (i32.shl (local.get $b) (i32.const 2)))) (local.get $v)))
                      (f32.store (i32.add (local.get $heap) (i32.shl (local.get $j) (i32.const 2)))
                                 (f32.load (i32.add (local.get $heap) (i32.shl (local.get $b) (i32.const 2)))))
                      (local.set $j (local.get $b))
                      (br $sift)))
                  (f32.store (i32.add (local.get $heap) (i32.shl (local.get $j) (i32.const 2))) (local.get $v))
                  (local.set $t (f32.load (local.get $heap)))))
              (local.set $l (i32.add (local.get $l) (i32.const 1)))
              (br_if $lanes (i32.lt_u (local.get $l) (i32.const 4))))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $blocks)))
    (local.get $t)))
