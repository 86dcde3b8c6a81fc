// RUN: python -m lowering.dump --example softmax --args "f32[4,8]" | filecheck %s --check-prefix=CAPTURED
// RUN: python -m lowering.dump --example softmax --args "f32[4,8]" | xdsl-opt -p array-canonicalize,decompose,cse,dce | filecheck %s --check-prefix=PIPELINE

// A dump is MLIR that xdsl-opt parses (through the `lowering` universe) and
// runs our passes on: the captured softmax, then the tensor-level pipeline.

// CAPTURED: // lowering.dump softmax(x: f32[4,8]) --stage tensor
// CAPTURED-NEXT: // 1 graph, 0 graph breaks
// CAPTURED: func.func @main([[X:%.*]]: tensor<4x8xf32>) -> tensor<4x8xf32>
// CAPTURED-NEXT: [[MAX:%.*]] = array.reduce "max" [[X]] [1] : tensor<4x8xf32> -> tensor<4xf32>
// CAPTURED: array.ufunc "subtract"
// CAPTURED: array.ufunc "exp"
// CAPTURED: array.reduce "sum"
// CAPTURED: array.ufunc "divide"

// PIPELINE: func.func @main([[X:%.*]]: tensor<4x8xf32>) -> tensor<4x8xf32>
// PIPELINE-NEXT: [[MAX:%.*]] = array.reduce "max" [[X]] [1]
// PIPELINE-NEXT: [[R:%.*]] = array.reshape [[MAX]] : tensor<4xf32> -> tensor<4x1xf32>
// PIPELINE-NEXT: [[B:%.*]] = array.broadcast [[R]] : tensor<4x1xf32> -> tensor<4x8xf32>
// PIPELINE-NEXT: [[D:%.*]] = arith.subf [[X]], [[B]] : tensor<4x8xf32>
// PIPELINE-NEXT: [[E:%.*]] = math.exp [[D]] : tensor<4x8xf32>
// PIPELINE-NEXT: [[S:%.*]] = array.reduce "sum" [[E]] [1] : tensor<4x8xf32> -> tensor<4xf32>
// PIPELINE: [[Y:%.*]] = arith.divf [[E]], {{%.*}} : tensor<4x8xf32>
// PIPELINE-NEXT: func.return [[Y]] : tensor<4x8xf32>
// PIPELINE-NOT: array.ufunc
