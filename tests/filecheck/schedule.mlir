// RUN: xdsl-opt -p 'schedule{vector_bits=256 threads=4 parallel_threshold=1000}' %s | filecheck %s --check-prefixes=CHECK,AVX2
// RUN: xdsl-opt -p 'schedule{vector_bits=512 threads=4 parallel_threshold=100000}' %s | filecheck %s --check-prefixes=CHECK,AVX512

// `schedule`: each loop.kernel becomes a kernel.kernel with its schedule, for
// the target the options describe (what runtime/cpu.py reads off the host).
//
// Two point-wise kernels over the same domain are one launch (`merged`):
// a's value is forwarded to the second body instead of reloaded. The chain
// holds a transcendental (exp): two registers per value, so the vector is
// twice the register's f32 lanes (`base_width` keeps the register's: a loop
// shorter than the vector runs on those, not scalar). 64 rows of 256 points are over the first
// run's parallel threshold (4 threads), under the second's (1 thread).
// CHECK-LABEL: func.func @merged_pointwise
// AVX2:       kernel.kernel "k1"({{.*}}) parallel [64] vector 16 : i64 unroll 1 : i64 split "parallel" work 64 : i64 threads 4 : i64 reduction "none"
// AVX512:     kernel.kernel "k1"({{.*}}) parallel [64] vector 32 : i64 unroll 1 : i64 split "parallel" work 64 : i64 threads 1 : i64 reduction "none"
// CHECK:        math.exp
// CHECK:        loop.store [[A:%[0-9]+]], [[ABUF:%[0-9]+]][
// CHECK-NOT:    loop.load [[ABUF]][
// CHECK:        arith.addf [[A]],
// AVX2:       } {base_width = 8 : i64, merged = ["k1", "k2"]}
// AVX512:     } {base_width = 16 : i64, merged = ["k1", "k2"]}
// CHECK-NOT:  kernel.kernel
// CHECK:      func.return
//
// Softmax's rows (1 KiB each) fit in the cache: each stage re-reads the row
// from cache ("row-in-cache"); a row of 16 AVX2 vectors gets 4 independent
// accumulators, one of 8 AVX-512 vectors one.
// CHECK-LABEL: func.func @row_softmax
// AVX2:       kernel.kernel "k1"({{.*}}) parallel [64] vector 16 : i64 unroll 4 : i64 split "parallel" work 64 : i64 threads 4 : i64 reduction "row-in-cache"
// AVX512:     kernel.kernel "k1"({{.*}}) parallel [64] vector 32 : i64 unroll 1 : i64 split "parallel" work 64 : i64 threads 1 : i64 reduction "row-in-cache"
// CHECK:        loop.reduce "max"
// CHECK:        loop.reduce "sum"
// CHECK:        loop.map
// CHECK-NOT:  kernel.kernel
//
// A time loop unrolled into one kernel: 300 points, but each reads a row of
// the 8-step input (2400 elements read): over the first run's threshold
// (its map split across 4 threads), under the second's.
// CHECK-LABEL: func.func @time_steps
// AVX2:       kernel.kernel "k1"({{.*}}) parallel [] vector {{[0-9]+}} : i64 unroll 1 : i64 split "map" work 300 : i64 threads 4 : i64
// AVX512:     kernel.kernel "k1"({{.*}}) parallel [] vector {{[0-9]+}} : i64 unroll 1 : i64 split "map" work 300 : i64 threads 1 : i64
//
// A time loop's states (a and b), each read by the next step and by the
// running total a mean reduces: the loop's kernel runs inside the
// reduction's (`fuse_into_reductions`), the states forwarded, their buffers
// gone (`drop_dead_stores`). Over the first run's threshold the reduction,
// to a scalar, splits into 4 chunks of 1000 reduced in parallel and a join
// of the partials (`split_reductions`); under the second's it stays whole.
// CHECK-LABEL: func.func @time_loop_mean
// CHECK-NOT:  memref<4000xf32>
// AVX2:       memref.alloc() : memref<4xf32>
// AVX2:       kernel.kernel "k2_part"({{.*}}) parallel [4] {{.*}} split "parallel" work 4 : i64 threads 4 : i64 reduction "streaming"
// AVX2:         loop.reduce "sum" [1000]
// AVX2:         loop.load %0[affine_map<(d0, d1) -> (0, (d0 + (d1 * 1000)))>]
// AVX512:     kernel.kernel "k2"({{.*}}) parallel [] {{.*}} threads 1 : i64
// AVX512:       loop.reduce "sum" [4000]
// CHECK-NOT:    loop.store {{.*}} memref<4000xf32>
// CHECK:        math.exp
// CHECK-NOT:    loop.store {{.*}} memref<4000xf32>
// CHECK:        math.exp
// CHECK-NOT:    loop.store {{.*}} memref<4000xf32>
// AVX2:       } {base_width = 8 : i64, merged = ["k1", "k2"]}
// AVX2:       kernel.kernel "k2_join"({{.*}}) parallel [] {{.*}} threads 1 : i64
// AVX2:         loop.reduce "sum" [4]
// AVX2:         arith.divf
// AVX512:       arith.divf
// AVX512:     } {base_width = 16 : i64, merged = ["k1", "k2"]}
// CHECK-NOT:  kernel.kernel
// CHECK:      func.return

// A row accumulation in chunks (`ordered_chunks`: a shared pass over a
// matrix's rows split by lower-to-loop, each chunk of rows into its own
// partial result) runs on as many threads as divide its chunks — whole
// chunks per thread, the launch's equal split: 4 chunks on the 4 threads, 6
// on 3; under the threshold on one. A plain accumulation (a column
// reduction: one output, rows in order) runs on one.
// CHECK-LABEL: func.func @row_chunks
// AVX2:       kernel.kernel "k1_part"({{.*}}) parallel [4000] {{.*}} threads 4 : i64
// AVX512:     kernel.kernel "k1_part"({{.*}}) parallel [4000] {{.*}} threads 1 : i64
// CHECK:      } {accumulate, ordered_chunks = 4 : i64}
// AVX2:       kernel.kernel "k2_part"({{.*}}) parallel [4000] {{.*}} threads 3 : i64
// AVX512:     kernel.kernel "k2_part"({{.*}}) parallel [4000] {{.*}} threads 1 : i64
// CHECK:      } {accumulate, ordered_chunks = 6 : i64}
// CHECK:      kernel.kernel "k3"({{.*}}) parallel [4000] {{.*}} threads 1 : i64
// CHECK:      } {accumulate}
//
builtin.module {
  func.func @merged_pointwise(%0: memref<64x256xf32> {lowering.layout = "C"}, %1: memref<64x256xf32> {lowering.layout = "C"}) -> (memref<64x256xf32>, memref<64x256xf32>) {
    %2 = memref.alloc() : memref<64x256xf32>
    loop.kernel "k1"(%0, %2) parallel [64] {
    ^bb0(%3: index):
      loop.map [256] {
      ^bb0(%4: index):
        %5 = loop.load %0[affine_map<(d0, d1) -> (d0, d1)>] (%3, %4) : memref<64x256xf32> -> f32
        %6 = math.exp %5 : f32
        %7 = loop.const "2.0" : f32
        %8 = arith.mulf %6, %7 : f32
        loop.store %8, %2[affine_map<(d0, d1) -> (d0, d1)>] (%3, %4) : f32, memref<64x256xf32>
        loop.yield
      }
      loop.yield
    } : memref<64x256xf32>, memref<64x256xf32>
    %9 = memref.alloc() : memref<64x256xf32>
    loop.kernel "k2"(%2, %1, %9) parallel [64] {
    ^bb0(%10: index):
      loop.map [256] {
      ^bb0(%11: index):
        %12 = loop.load %2[affine_map<(d0, d1) -> (d0, d1)>] (%10, %11) : memref<64x256xf32> -> f32
        %13 = loop.load %1[affine_map<(d0, d1) -> (d0, d1)>] (%10, %11) : memref<64x256xf32> -> f32
        %14 = arith.addf %12, %13 : f32
        loop.store %14, %9[affine_map<(d0, d1) -> (d0, d1)>] (%10, %11) : f32, memref<64x256xf32>
        loop.yield
      }
      loop.yield
    } : memref<64x256xf32>, memref<64x256xf32>, memref<64x256xf32>
    func.return %2, %9 : memref<64x256xf32>, memref<64x256xf32>
  }
  func.func @row_softmax(%0: memref<64x256xf32> {lowering.layout = "C"}) -> memref<64x256xf32> {
    %1 = memref.alloc() : memref<64x256xf32>
    loop.kernel "k1"(%0, %1) parallel [64] {
    ^bb0(%2: index):
      %3 = loop.reduce "max" [256] {
      ^bb0(%4: index):
        %5 = loop.load %0[affine_map<(d0, d1) -> (d0, d1)>] (%2, %4) : memref<64x256xf32> -> f32
        loop.yield %5 : f32
      } : f32
      %6 = loop.reduce "sum" [256] {
      ^bb0(%7: index):
        %8 = loop.load %0[affine_map<(d0, d1) -> (d0, d1)>] (%2, %7) : memref<64x256xf32> -> f32
        %9 = arith.subf %8, %3 : f32
        %10 = math.exp %9 : f32
        loop.yield %10 : f32
      } : f32
      loop.map [256] {
      ^bb0(%11: index):
        %12 = loop.load %0[affine_map<(d0, d1) -> (d0, d1)>] (%2, %11) : memref<64x256xf32> -> f32
        %13 = arith.subf %12, %3 : f32
        %14 = math.exp %13 : f32
        %15 = arith.divf %14, %6 : f32
        loop.store %15, %1[affine_map<(d0, d1) -> (d0, d1)>] (%2, %11) : f32, memref<64x256xf32>
        loop.yield
      }
      loop.yield
    } : memref<64x256xf32>, memref<64x256xf32>
    func.return %1 : memref<64x256xf32>
  }
  func.func @time_steps(%0: memref<8x300xf32> {lowering.layout = "C"}) -> memref<300xf32> {
    %1 = memref.alloc() : memref<300xf32>
    loop.kernel "k1"(%0, %1) parallel [] {
    ^bb0:
      loop.map [300] {
      ^bb0(%i: index):
        %r0 = loop.const "0" : index
        %z0 = loop.load %0[affine_map<(d0, d1) -> (d0, d1)>] (%r0, %i) : memref<8x300xf32> -> f32
        %r1 = loop.const "1" : index
        %z1 = loop.load %0[affine_map<(d0, d1) -> (d0, d1)>] (%r1, %i) : memref<8x300xf32> -> f32
        %r2 = loop.const "2" : index
        %z2 = loop.load %0[affine_map<(d0, d1) -> (d0, d1)>] (%r2, %i) : memref<8x300xf32> -> f32
        %r3 = loop.const "3" : index
        %z3 = loop.load %0[affine_map<(d0, d1) -> (d0, d1)>] (%r3, %i) : memref<8x300xf32> -> f32
        %r4 = loop.const "4" : index
        %z4 = loop.load %0[affine_map<(d0, d1) -> (d0, d1)>] (%r4, %i) : memref<8x300xf32> -> f32
        %r5 = loop.const "5" : index
        %z5 = loop.load %0[affine_map<(d0, d1) -> (d0, d1)>] (%r5, %i) : memref<8x300xf32> -> f32
        %r6 = loop.const "6" : index
        %z6 = loop.load %0[affine_map<(d0, d1) -> (d0, d1)>] (%r6, %i) : memref<8x300xf32> -> f32
        %r7 = loop.const "7" : index
        %z7 = loop.load %0[affine_map<(d0, d1) -> (d0, d1)>] (%r7, %i) : memref<8x300xf32> -> f32
        %s0 = arith.addf %z0, %z0 : f32
        %s1 = arith.mulf %s0, %z1 : f32
        %s2 = arith.mulf %s1, %z2 : f32
        %s3 = arith.mulf %s2, %z3 : f32
        %s4 = arith.mulf %s3, %z4 : f32
        %s5 = arith.mulf %s4, %z5 : f32
        %s6 = arith.mulf %s5, %z6 : f32
        %s7 = arith.mulf %s6, %z7 : f32
        loop.store %s7, %1[affine_map<(d0) -> (d0)>] (%i) : f32, memref<300xf32>
        loop.yield
      }
      loop.yield
    } : memref<8x300xf32>, memref<300xf32>
    func.return %1 : memref<300xf32>
  }
  func.func @time_loop_mean(%0: memref<2x4000xf32> {lowering.layout = "C"}) -> memref<f32> {
    %1 = memref.alloc() : memref<4000xf32>
    %2 = memref.alloc() : memref<4000xf32>
    loop.kernel "k1"(%0, %1, %2) parallel [] {
      loop.map [4000] {
      ^bb0(%3: index):
        %4 = loop.load %0[affine_map<(d0) -> (0, d0)>] (%3) : memref<2x4000xf32> -> f32
        %5 = math.exp %4 : f32
        loop.store %5, %1[affine_map<(d0) -> (d0)>] (%3) : f32, memref<4000xf32>
        %6 = loop.load %0[affine_map<(d0) -> (1, d0)>] (%3) : memref<2x4000xf32> -> f32
        %7 = math.exp %6 : f32
        %8 = arith.mulf %5, %7 : f32
        loop.store %8, %2[affine_map<(d0) -> (d0)>] (%3) : f32, memref<4000xf32>
        loop.yield
      }
      loop.yield
    } : memref<2x4000xf32>, memref<4000xf32>, memref<4000xf32>
    %9 = memref.alloc() : memref<f32>
    loop.kernel "k2"(%1, %2, %9) parallel [] {
      %10 = loop.reduce "sum" [4000] {
      ^bb0(%11: index):
        %12 = loop.load %1[affine_map<(d0) -> (d0)>] (%11) : memref<4000xf32> -> f32
        %13 = loop.load %2[affine_map<(d0) -> (d0)>] (%11) : memref<4000xf32> -> f32
        %14 = arith.addf %12, %13 : f32
        loop.yield %14 : f32
      } : f32
      %15 = loop.const "4000.0" : f32
      %16 = arith.divf %10, %15 : f32
      loop.store %16, %9[affine_map<() -> ()>] () : f32, memref<f32>
      loop.yield
    } : memref<4000xf32>, memref<4000xf32>, memref<f32>
    func.return %9 : memref<f32>
  }
  func.func @row_chunks(%0: memref<4000x8xf32> {lowering.layout = "C"}) -> (memref<4x8xf32>, memref<6x8xf32>, memref<8xf32>) {
    %1 = memref.alloc() : memref<4x8xf32>
    loop.kernel "k1_part"(%0, %1) parallel [4000] {
    ^bb0(%2: index):
      loop.map [8] {
      ^bb0(%3: index):
        %4 = loop.load %0[affine_map<(d0, d1) -> (d0, d1)>] (%2, %3) : memref<4000x8xf32> -> f32
        %5 = loop.load %1[affine_map<(d0, d1) -> ((((d0 * 4) + 3) floordiv 4000), d1)>] (%2, %3) : memref<4x8xf32> -> f32
        %6 = arith.addf %4, %5 : f32
        loop.store %6, %1[affine_map<(d0, d1) -> ((((d0 * 4) + 3) floordiv 4000), d1)>] (%2, %3) : f32, memref<4x8xf32>
        loop.yield
      }
      loop.yield
    } {accumulate, ordered_chunks = 4 : i64} : memref<4000x8xf32>, memref<4x8xf32>
    %7 = memref.alloc() : memref<6x8xf32>
    loop.kernel "k2_part"(%0, %7) parallel [4000] {
    ^bb0(%8: index):
      loop.map [8] {
      ^bb0(%9: index):
        %10 = loop.load %0[affine_map<(d0, d1) -> (d0, d1)>] (%8, %9) : memref<4000x8xf32> -> f32
        %11 = loop.load %7[affine_map<(d0, d1) -> ((((d0 * 6) + 5) floordiv 4000), d1)>] (%8, %9) : memref<6x8xf32> -> f32
        %12 = arith.addf %10, %11 : f32
        loop.store %12, %7[affine_map<(d0, d1) -> ((((d0 * 6) + 5) floordiv 4000), d1)>] (%8, %9) : f32, memref<6x8xf32>
        loop.yield
      }
      loop.yield
    } {accumulate, ordered_chunks = 6 : i64} : memref<4000x8xf32>, memref<6x8xf32>
    %13 = memref.alloc() : memref<8xf32>
    loop.kernel "k3"(%0, %13) parallel [4000] {
    ^bb0(%14: index):
      loop.map [8] {
      ^bb0(%15: index):
        %16 = loop.load %0[affine_map<(d0, d1) -> (d0, d1)>] (%14, %15) : memref<4000x8xf32> -> f32
        %17 = loop.load %13[affine_map<(d0, d1) -> (d1)>] (%14, %15) : memref<8xf32> -> f32
        %18 = arith.addf %16, %17 : f32
        loop.store %18, %13[affine_map<(d0, d1) -> (d1)>] (%14, %15) : f32, memref<8xf32>
        loop.yield
      }
      loop.yield
    } {accumulate} : memref<4000x8xf32>, memref<8xf32>
    func.return %1, %7, %13 : memref<4x8xf32>, memref<6x8xf32>, memref<8xf32>
  }
}
