// RUN: xdsl-opt -p lower-to-loop %s | filecheck %s
// RUN: xdsl-opt -p 'lower-to-loop{shared_rows=false}' %s | filecheck %s --check-prefix=NOSHARE
// RUN: xdsl-opt -p 'lower-to-loop{threads=2}' %s | filecheck %s --check-prefix=SPLIT

// `lower-to-loop`: tensor-level functions become loop-level kernels over
// buffers, fusing as it goes.

builtin.module {
  // softmax over rows: both reductions and the point-wise epilogue are one
  // kernel over the rows (its inputs read through index maps, exp inlined).
  // CHECK-LABEL: func.func @softmax
  // CHECK:      loop.kernel "k1"(%{{.*}}, %{{.*}}) parallel [4]
  // CHECK:        loop.reduce "max" [8]
  // CHECK:        loop.reduce "sum" [8]
  // CHECK:          loop.ufunc "exp"
  // CHECK:        loop.map [8]
  // CHECK:          loop.ufunc "divide"
  // CHECK:          loop.store
  // CHECK-NOT:  loop.kernel
  // CHECK:      func.return
  func.func @softmax(%0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %1 = array.reduce "max" %0 [1] : tensor<4x8xf32> -> tensor<4xf32>
    %2 = array.reshape %1 : tensor<4xf32> -> tensor<4x1xf32>
    %3 = array.broadcast %2 : tensor<4x1xf32> -> tensor<4x8xf32>
    %4 = array.ufunc "subtract"(%0, %3) : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    %5 = array.ufunc "exp"(%4) : tensor<4x8xf32> -> tensor<4x8xf32>
    %6 = array.reduce "sum" %5 [1] : tensor<4x8xf32> -> tensor<4xf32>
    %7 = array.reshape %6 : tensor<4xf32> -> tensor<4x1xf32>
    %8 = array.broadcast %7 : tensor<4x1xf32> -> tensor<4x8xf32>
    %9 = array.ufunc "divide"(%5, %8) : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    func.return %9 : tensor<4x8xf32>
  }

  // a value returned and summed: the reduction's pass computes each point,
  // stores it into the returned buffer and folds it in — one kernel
  // CHECK-LABEL: func.func @kept_and_summed
  // CHECK:      [[Y:%.*]] = memref.alloc() : memref<2x4xf32>
  // CHECK:      [[S:%.*]] = memref.alloc() : memref<f32>
  // CHECK:      loop.kernel "k1"
  // CHECK:        loop.reduce "sum" [2, 4]
  // CHECK:          [[V:%.*]] = arith.mulf
  // CHECK:          loop.store [[V]], [[Y]]
  // CHECK:          loop.yield [[V]] : f32
  // CHECK:        loop.store %{{.*}}, [[S]]
  // CHECK-NOT:  loop.kernel
  // CHECK:      func.return [[Y]], [[S]]
  func.func @kept_and_summed(%0: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<f32>) {
    %1 = array.constant "2.0" : tensor<f32>
    %2 = array.broadcast %1 : tensor<f32> -> tensor<2x4xf32>
    %3 = arith.mulf %0, %2 : tensor<2x4xf32>
    %4 = array.reduce "sum" %3 [0, 1] : tensor<2x4xf32> -> tensor<f32>
    func.return %3, %4 : tensor<2x4xf32>, tensor<f32>
  }

  // rows assigned into an array the function made and nothing else reads:
  // each assignment is a kernel storing into the window of one buffer (an
  // offset in the store's index map), and the zeros they cover are never
  // written
  // CHECK-LABEL: func.func @row_fill
  // CHECK:      [[OUT:%.*]] = memref.alloc() : memref<2x4xf32>
  // CHECK-NOT:  memref.alloc
  // CHECK:      loop.kernel "k1"(%{{.*}}, [[OUT]]) parallel [1]
  // CHECK:        arith.addf
  // CHECK:        loop.store %{{.*}}, [[OUT]][affine_map<(d0, d1) -> (d0, d1)>]
  // CHECK:      loop.kernel "k2"(%{{.*}}, [[OUT]]) parallel [1]
  // CHECK:        arith.subf
  // CHECK:        loop.store %{{.*}}, [[OUT]][affine_map<(d0, d1) -> ((d0 + 1), d1)>]
  // CHECK-NOT:  loop.extern
  // CHECK:      func.return [[OUT]]
  func.func @row_fill(%0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %1 = array.constant "0.0" : tensor<f32>
    %2 = array.broadcast %1 : tensor<f32> -> tensor<2x4xf32>
    %3 = array.constant "1.0" : tensor<f32>
    %4 = array.broadcast %3 : tensor<f32> -> tensor<1x4xf32>
    %5 = array.slice %0[[0, 0], [1, 1]] : tensor<2x4xf32> -> tensor<1x4xf32>
    %6 = arith.addf %5, %4 : tensor<1x4xf32>
    %7 = array.insert_slice %6 into %2[[0, 0], [1, 1]] : tensor<1x4xf32> into tensor<2x4xf32>
    %8 = array.slice %0[[1, 0], [1, 1]] : tensor<2x4xf32> -> tensor<1x4xf32>
    %9 = arith.subf %8, %4 : tensor<1x4xf32>
    %10 = array.insert_slice %9 into %7[[1, 0], [1, 1]] : tensor<1x4xf32> into tensor<2x4xf32>
    func.return %10 : tensor<2x4xf32>
  }

  // the second row reads the array being filled, apart from the row it
  // writes: both assignments are kernels into the zeros' buffer (filled
  // first: the rows do not cover it before the read), the second reading
  // row 0 of that buffer and writing row 1
  // CHECK-LABEL: func.func @recurrence
  // CHECK:      [[OUT:%.*]] = memref.alloc() : memref<2x4xf32>
  // CHECK:      loop.kernel "k1"([[OUT]])
  // CHECK:        loop.const "0.0"
  // CHECK:      loop.kernel "k2"(%{{.*}}, [[OUT]])
  // CHECK:      loop.kernel "k3"([[OUT]]) parallel [1]
  // CHECK:        loop.load [[OUT]][affine_map<(d0, d1) -> (d0, d1)>]
  // CHECK:        loop.store %{{.*}}, [[OUT]][affine_map<(d0, d1) -> ((d0 + 1), d1)>]
  // CHECK-NOT:  loop.extern
  // CHECK:      func.return
  func.func @recurrence(%0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %1 = array.constant "0.0" : tensor<f32>
    %2 = array.broadcast %1 : tensor<f32> -> tensor<2x4xf32>
    %3 = array.slice %0[[0, 0], [1, 1]] : tensor<2x4xf32> -> tensor<1x4xf32>
    %4 = array.insert_slice %3 into %2[[0, 0], [1, 1]] : tensor<1x4xf32> into tensor<2x4xf32>
    %5 = array.slice %4[[0, 0], [1, 1]] : tensor<2x4xf32> -> tensor<1x4xf32>
    %6 = arith.addf %5, %5 : tensor<1x4xf32>
    %7 = array.insert_slice %6 into %4[[1, 0], [1, 1]] : tensor<1x4xf32> into tensor<2x4xf32>
    func.return %7 : tensor<2x4xf32>
  }

  // a logistic-regression gradient over X (50000x128, 25.6 MB): X @ w, the
  // sigmoid and X.T @ (p - y) are one ordered kernel over X's rows (X read
  // once, not once per product), 8 rows per point: the rows' dot products 8
  // reductions, stored (Z); the sigmoids of the 8 rows side by side, one map
  // over them (`any_width`: vectorized across the rows) into V; then the 8
  // rows added into the gradient, rows in order (+0.0 at the first); without
  // shared passes, two BLAS products
  // CHECK-LABEL: func.func @logistic_gradient
  // CHECK:      [[G:%.*]] = memref.alloc() : memref<128x1xf32>
  // CHECK:      [[Z:%.*]] = memref.alloc() : memref<50000x1xf32>
  // CHECK:      [[V:%.*]] = memref.alloc() : memref<50000xf32>
  // CHECK:      loop.kernel "k1"(%{{.*}}, %{{.*}}, %{{.*}}, [[Z]], [[V]], [[G]]) parallel [6250]
  // CHECK:        [[Z0:%.*]] = loop.reduce "sum" [128]
  // CHECK:          loop.load %0[affine_map<(d0, d1) -> ((d0 * 8), d1)>]
  // CHECK:          arith.mulf
  // CHECK:        } {contract}
  // CHECK:        loop.reduce "sum" [128]
  // CHECK:          loop.load %0[affine_map<(d0, d1) -> (((d0 * 8) + 1), d1)>]
  // CHECK-COUNT-6: loop.reduce "sum" [128]
  // CHECK:        loop.store [[Z0]], [[Z]][affine_map<(d0) -> ((d0 * 8), 0)>]
  // CHECK-COUNT-7: loop.store
  // CHECK:        loop.map [8]
  // CHECK:          [[ZR:%.*]] = loop.load [[Z]][affine_map<(d0, d1) -> (((d0 * 8) + d1), 0)>]
  // CHECK:          math.exp [[ZR]]
  // CHECK:          arith.divf
  // CHECK:          [[VR:%.*]] = arith.subf
  // CHECK:          loop.store [[VR]], [[V]][affine_map<(d0, d1) -> (((d0 * 8) + d1))>]
  // CHECK:        } {any_width}
  // CHECK:        [[V0:%.*]] = loop.load [[V]][affine_map<(d0) -> ((d0 * 8))>]
  // CHECK-COUNT-7: loop.load [[V]]
  // CHECK:        [[FIRST:%.*]] = arith.cmpi eq
  // CHECK:        loop.map [128]
  // CHECK:          [[ACC:%.*]] = loop.load [[G]][affine_map<(d0, d1) -> (d1, 0)>]
  // CHECK:          [[FROM:%.*]] = arith.select [[FIRST]], %{{.*}}, [[ACC]]
  // CHECK:          [[ROW:%.*]] = arith.mulf %{{.*}}, [[V0]]
  // CHECK:          [[NEW:%.*]] = arith.addf [[FROM]], [[ROW]]
  // CHECK-COUNT-7:  arith.addf
  // CHECK:          loop.store %{{.*}}, [[G]][affine_map<(d0, d1) -> (d1, 0)>]
  // CHECK:      } {accumulate, shared_rows}
  // CHECK-NOT:  loop.extern
  // CHECK:      func.return
  // On two threads (`threads=2`; X is over the parallel threshold) the
  // 6250 points (blocks of 8 rows) run in two chunks, rows [0, 25000) and
  // [25000, 50000) — the launch's halves —, each into its own row of the
  // partial results P, from +0.0 at its first block (block i's chunk:
  // (2 i + 1) floordiv 6250; first where (2 i + 1) mod 6250 < 2); then a
  // join adds the two partials
  // SPLIT-LABEL: func.func @logistic_gradient
  // SPLIT:      [[G:%.*]] = memref.alloc() : memref<128x1xf32>
  // SPLIT:      [[P:%.*]] = memref.alloc() : memref<2x128xf32>
  // SPLIT:      loop.kernel "k1_part"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, [[P]]) parallel [6250]
  // SPLIT:        loop.reduce "sum" [128]
  // SPLIT:        loop.map [8]
  // SPLIT:          math.exp
  // SPLIT:        } {any_width}
  // SPLIT:        [[V:%.*]] = loop.load
  // SPLIT:        affine.apply affine_map<(d0) -> ((((d0 * 2) + 1) mod 6250))>
  // SPLIT:        [[FIRST:%.*]] = arith.cmpi slt
  // SPLIT:        loop.map [128]
  // SPLIT:          [[ACC:%.*]] = loop.load [[P]][affine_map<(d0, d1) -> ((((d0 * 2) + 1) floordiv 6250), d1)>]
  // SPLIT:          [[FROM:%.*]] = arith.select [[FIRST]], %{{.*}}, [[ACC]]
  // SPLIT:          [[ROW:%.*]] = arith.mulf %{{.*}}, [[V]]
  // SPLIT:          [[NEW:%.*]] = arith.addf [[FROM]], [[ROW]]
  // SPLIT:          loop.store %{{.*}}, [[P]][affine_map<(d0, d1) -> ((((d0 * 2) + 1) floordiv 6250), d1)>]
  // SPLIT:      } {accumulate, ordered_chunks = 2 : i64, shared_rows}
  // SPLIT:      loop.kernel "k1_join"([[P]], [[G]]) parallel []
  // SPLIT:        loop.map [128]
  // SPLIT:          [[P0:%.*]] = loop.load [[P]][affine_map<(d0) -> (0, d0)>]
  // SPLIT:          [[P1:%.*]] = loop.load [[P]][affine_map<(d0) -> (1, d0)>]
  // SPLIT:          [[T:%.*]] = arith.addf [[P0]], [[P1]]
  // SPLIT:          loop.store [[T]], [[G]][affine_map<(d0) -> (d0, 0)>]
  // SPLIT-NOT:  loop.extern
  // SPLIT:      func.return %{{.*}} : memref<128x1xf32>
  // NOSHARE-LABEL: func.func @logistic_gradient
  // NOSHARE:      loop.extern "matmul"
  // NOSHARE:      loop.kernel "k1"
  // NOSHARE:      loop.extern "matmul"
  // NOSHARE:        array.transpose
  // NOSHARE-NOT:  accumulate
  // NOSHARE:      func.return
  func.func @logistic_gradient(%0: tensor<50000x128xf32>, %1: tensor<50000xf32>, %2: tensor<128x1xf32>) -> tensor<128x1xf32> {
    %3 = array.dot %0, %2 : tensor<50000x128xf32>, tensor<128x1xf32> -> tensor<50000x1xf32>
    %4 = array.reshape %3 : tensor<50000x1xf32> -> tensor<50000xf32>
    %5 = math.exp %4 : tensor<50000xf32>
    %6 = array.constant "1.0" : tensor<f32>
    %7 = array.broadcast %6 : tensor<f32> -> tensor<50000xf32>
    %8 = arith.addf %7, %5 : tensor<50000xf32>
    %9 = arith.divf %5, %8 : tensor<50000xf32>
    %10 = arith.subf %9, %1 : tensor<50000xf32>
    %11 = array.reshape %10 : tensor<50000xf32> -> tensor<50000x1xf32>
    %12 = array.transpose %0 [1, 0] : tensor<50000x128xf32> -> tensor<128x50000xf32>
    %13 = array.dot %12, %11 : tensor<128x50000xf32>, tensor<50000x1xf32> -> tensor<128x1xf32>
    func.return %13 : tensor<128x1xf32>
  }
}
