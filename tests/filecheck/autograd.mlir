// RUN: xdsl-opt -p autograd %s | filecheck %s
// RUN: xdsl-opt -p "autograd,remat{strategy=save_all}" %s | filecheck %s --check-prefix=SAVE
// RUN: xdsl-opt -p "autograd,remat{strategy=min_cut}" %s | filecheck %s --check-prefix=CUT
// RUN: xdsl-opt -p "autograd,remat{memory_budget=0.0}" %s | filecheck %s --check-prefix=BUDGET

// `autograd` appends the gradient of the first (scalar) result with respect
// to every float argument, its ops marked {bwd}; the integer argument gets
// none. `remat` cuts the joint function into a forward (results + saved
// values) and a backward: save_all saves exp's result, min_cut recomputes the
// multiply and the exp from the inputs in the backward instead. The cut is
// recorded on the halves (`remat.results`: the joint function's results each
// computes; `remat.report`: what `lowering.explain` shows), so a program can
// be built from the pass's output alone.

builtin.module {
  // CHECK-LABEL: func.func @loss
  // CHECK-SAME: -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>)
  func.func @loss(%x: tensor<4xf32>, %w: tensor<4xf32>, %n: tensor<4xi64>) -> tensor<f32> {
    // CHECK:      [[M:%.*]] = array.ufunc "multiply"(%x, %w)
    // CHECK-NEXT: [[E:%.*]] = array.ufunc "exp"([[M]])
    // CHECK-NEXT: [[S:%.*]] = array.reduce "sum" [[E]] [0]
    // CHECK:      [[G:%.*]] = array.ufunc "multiply"({{%.*}}, [[E]]) {bwd}
    // CHECK-NEXT: [[GX:%.*]] = array.ufunc "multiply"([[G]], %w) {bwd}
    // CHECK-NEXT: [[GW:%.*]] = array.ufunc "multiply"([[G]], %x) {bwd}
    // CHECK-NEXT: func.return [[S]], [[GX]], [[GW]]
    %0 = array.ufunc "multiply"(%x, %w) : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %1 = array.ufunc "exp"(%0) : tensor<4xf32> -> tensor<4xf32>
    %2 = array.reduce "sum" %1 [0] : tensor<4xf32> -> tensor<f32>
    func.return %2 : tensor<f32>
  }
}

// SAVE-LABEL: func.func @loss_forward
// SAVE-SAME:  -> (tensor<f32>, tensor<4xf32>)
// SAVE-SAME:  attributes {remat.results = array<i64: 0>, remat.report = {strategy = "save_all", saved_bytes = 16 : i64, save_all_bytes = 16 : i64, min_cut_bytes = 0 : i64, saved = ["array.ufunc"], recomputed = []}}
// SAVE:       [[E:%.*]] = array.ufunc "exp"
// SAVE:       func.return {{%.*}}, [[E]]
// SAVE-LABEL: func.func @loss_backward
// SAVE-SAME:  %3: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) attributes {remat.results = array<i64: 1, 2>}
// SAVE-NOT:   array.ufunc "exp"
// SAVE:       func.return

// CUT-LABEL: func.func @loss_forward
// CUT-SAME:  -> tensor<f32>
// CUT-LABEL: func.func @loss_backward
// CUT:       array.ufunc "multiply"
// CUT-NEXT:  array.ufunc "exp"
// CUT-NOT:   {bwd}
// CUT:       func.return

// BUDGET-LABEL: func.func @loss_forward
// BUDGET-SAME:  -> tensor<f32> attributes {remat.results = array<i64: 0>, remat.report = {strategy = "min_cut", saved_bytes = 0 : i64
// BUDGET-SAME:  recomputed = ["array.ufunc multiply", "array.ufunc exp"], memory_budget = 0.000000e+00 : f64}}
// BUDGET-LABEL: func.func @loss_backward
// BUDGET-SAME:  attributes {remat.results = array<i64: 1, 2>}
