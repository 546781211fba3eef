;; The KNN scan of the in-memory vector index (src/vector/dot-scan.ts embeds its compiled bytes;
;; src/vector/dot-scan.test.ts recompiles this file with wabt and checks they are identical).
;; scan(q, m, n, dim, out): out[i] = dot(q, row i) for n rows of `dim` float32s stored contiguously
;; from byte offset m; q is one row of `dim` float32s; dim is a positive multiple of 8 (rows are
;; zero-padded). Two f32x4 accumulators per row, summed at the end.
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
        (br $rows)))))
