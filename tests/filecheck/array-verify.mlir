// RUN: xdsl-opt --verify-diagnostics --split-input-file %s | filecheck %s

// What the `array` dialect's verifiers reject, with the message a user sees.

builtin.module {
  func.func @reduce_axes(%a: tensor<2x3xf32>) -> tensor<2xf32> {
    %0 = array.reduce "sum" %a [1, 1] : tensor<2x3xf32> -> tensor<2xf32>
    func.return %0 : tensor<2xf32>
  }
}
// CHECK: array.reduce: bad axes [1, 1] for rank 2

// -----
builtin.module {
  func.func @reduce_kind(%a: tensor<2x3xf32>) -> tensor<2xf32> {
    %0 = array.reduce "mean" %a [1] : tensor<2x3xf32> -> tensor<2xf32>
    func.return %0 : tensor<2xf32>
  }
}
// CHECK: array.reduce: kind must be one of ('sum', 'prod', 'max', 'min', 'any', 'all')

// -----
builtin.module {
  func.func @transpose(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
    %0 = array.transpose %a [0, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
    func.return %0 : tensor<3x2xf32>
  }
}
// CHECK: array.transpose: [0, 0] is not a permutation

// -----
builtin.module {
  func.func @slice_bounds(%a: tensor<8xf32>) -> tensor<4xf32> {
    %0 = array.slice %a[[6], [1]] : tensor<8xf32> -> tensor<4xf32>
    func.return %0 : tensor<4xf32>
  }
}
// CHECK: array.slice: dim 0 reads [6, 9] outside 0..7

// -----
builtin.module {
  func.func @broadcast(%a: tensor<3xf32>) -> tensor<2x4xf32> {
    %0 = array.broadcast %a : tensor<3xf32> -> tensor<2x4xf32>
    func.return %0 : tensor<2x4xf32>
  }
}
// CHECK: array.broadcast: dim 3 cannot broadcast to 4

// -----
builtin.module {
  func.func @dot(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {
    %0 = array.dot %a, %b : tensor<2x3xf32>, tensor<4x5xf32> -> tensor<2x5xf32>
    func.return %0 : tensor<2x5xf32>
  }
}
// CHECK: array.dot: contraction 3 vs 4

// -----
builtin.module {
  func.func @select(%c: tensor<4xf32>, %a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = array.select %c, %a, %a : tensor<4xf32>, tensor<4xf32>
    func.return %0 : tensor<4xf32>
  }
}
// CHECK: array.select: condition must be i1
