// RUN: xdsl-opt -p decompose %s | filecheck %s

// `decompose` rewrites array.ufunc into arith/math where those have numpy's
// meaning for the operand type, and keeps array.ufunc where they do not.

builtin.module {
  // CHECK-LABEL: func.func @float_ops
  func.func @float_ops(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    // CHECK-NEXT: [[S:%.*]] = arith.addf %a, %b : tensor<4xf32>
    // CHECK-NEXT: [[P:%.*]] = arith.mulf [[S]], %b : tensor<4xf32>
    // CHECK-NEXT: [[D:%.*]] = arith.divf [[P]], %a : tensor<4xf32>
    // CHECK-NEXT: [[E:%.*]] = math.exp [[D]] : tensor<4xf32>
    // CHECK-NEXT: [[T:%.*]] = math.tanh [[E]] : tensor<4xf32>
    // CHECK-NEXT: [[R:%.*]] = math.sqrt [[T]] : tensor<4xf32>
    // CHECK-NEXT: [[N:%.*]] = arith.negf [[R]] : tensor<4xf32>
    // CHECK-NEXT: func.return [[N]] : tensor<4xf32>
    %0 = array.ufunc "add"(%a, %b) : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %1 = array.ufunc "multiply"(%0, %b) : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %2 = array.ufunc "divide"(%1, %a) : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %3 = array.ufunc "exp"(%2) : tensor<4xf32> -> tensor<4xf32>
    %4 = array.ufunc "tanh"(%3) : tensor<4xf32> -> tensor<4xf32>
    %5 = array.ufunc "sqrt"(%4) : tensor<4xf32> -> tensor<4xf32>
    %6 = array.ufunc "negative"(%5) : tensor<4xf32> -> tensor<4xf32>
    func.return %6 : tensor<4xf32>
  }

  // numpy's maximum propagates NaN and orders -0.0 below 0.0: no upstream op
  // means that, so it stays a ufunc; so do hypot and logaddexp.
  // CHECK-LABEL: func.func @float_kept
  func.func @float_kept(%a: tensor<4xf64>, %b: tensor<4xf64>) -> tensor<4xf64> {
    // CHECK-NEXT: array.ufunc "maximum"(%a, %b)
    // CHECK-NEXT: array.ufunc "hypot"
    // CHECK-NEXT: array.ufunc "logaddexp"
    // CHECK-NOT: arith.
    %0 = array.ufunc "maximum"(%a, %b) : tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>
    %1 = array.ufunc "hypot"(%0, %b) : tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>
    %2 = array.ufunc "logaddexp"(%1, %a) : tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>
    func.return %2 : tensor<4xf64>
  }

  // Signed integers wrap around like two's complement: arith's meaning.
  // Integer floor_divide (division by zero gives 0 in numpy) stays a ufunc.
  // CHECK-LABEL: func.func @int_ops
  func.func @int_ops(%a: tensor<3xi64>, %b: tensor<3xi64>) -> tensor<3xi64> {
    // CHECK-NEXT: [[S:%.*]] = arith.addi %a, %b : tensor<3xi64>
    // CHECK-NEXT: [[M:%.*]] = arith.maxsi [[S]], %b : tensor<3xi64>
    // CHECK-NEXT: array.ufunc "floor_divide"([[M]], %a)
    %0 = array.ufunc "add"(%a, %b) : tensor<3xi64>, tensor<3xi64> -> tensor<3xi64>
    %1 = array.ufunc "maximum"(%0, %b) : tensor<3xi64>, tensor<3xi64> -> tensor<3xi64>
    %2 = array.ufunc "floor_divide"(%1, %a) : tensor<3xi64>, tensor<3xi64> -> tensor<3xi64>
    func.return %2 : tensor<3xi64>
  }

  // Unsigned integers: upstream arith is signless, so nothing is rewritten.
  // CHECK-LABEL: func.func @unsigned_kept
  func.func @unsigned_kept(%a: tensor<3xui8>, %b: tensor<3xui8>) -> tensor<3xui8> {
    // CHECK-NEXT: array.ufunc "add"(%a, %b)
    %0 = array.ufunc "add"(%a, %b) : tensor<3xui8>, tensor<3xui8> -> tensor<3xui8>
    func.return %0 : tensor<3xui8>
  }

  // Comparisons become array.compare (NaN compares false except `ne`);
  // bool logic becomes arith on i1; isnan (f32 -> i1) stays a ufunc.
  // CHECK-LABEL: func.func @compare_and_bool
  func.func @compare_and_bool(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>) -> tensor<2x2xi1> {
    // CHECK-NEXT: [[LT:%.*]] = array.compare "lt" %a, %b : tensor<2x2xf32> -> tensor<2x2xi1>
    // CHECK-NEXT: [[NE:%.*]] = array.compare "ne" %a, %b : tensor<2x2xf32> -> tensor<2x2xi1>
    // CHECK-NEXT: [[AND:%.*]] = arith.andi [[LT]], [[NE]] : tensor<2x2xi1>
    // CHECK-NEXT: [[NAN:%.*]] = array.ufunc "isnan"(%a) : tensor<2x2xf32> -> tensor<2x2xi1>
    // CHECK-NEXT: [[OR:%.*]] = arith.ori [[AND]], [[NAN]] : tensor<2x2xi1>
    // CHECK-NEXT: func.return [[OR]]
    %0 = array.ufunc "less"(%a, %b) : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xi1>
    %1 = array.ufunc "not_equal"(%a, %b) : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xi1>
    %2 = array.ufunc "logical_and"(%0, %1) : tensor<2x2xi1>, tensor<2x2xi1> -> tensor<2x2xi1>
    %3 = array.ufunc "isnan"(%a) : tensor<2x2xf32> -> tensor<2x2xi1>
    %4 = array.ufunc "logical_or"(%2, %3) : tensor<2x2xi1>, tensor<2x2xi1> -> tensor<2x2xi1>
    func.return %4 : tensor<2x2xi1>
  }
}
