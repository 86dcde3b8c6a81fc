// RUN: xdsl-opt -p array-canonicalize %s | filecheck %s

// `array-canonicalize`: structural simplifications that hold for every value.

builtin.module {
  // Broadcast, reshape and cast to the operand's own type are no-ops.
  // CHECK-LABEL: func.func @identities
  func.func @identities(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
    // CHECK-NEXT: func.return %a : tensor<2x3xf32>
    %0 = array.broadcast %a : tensor<2x3xf32> -> tensor<2x3xf32>
    %1 = array.reshape %0 : tensor<2x3xf32> -> tensor<2x3xf32>
    %2 = array.cast %1 : tensor<2x3xf32> -> tensor<2x3xf32>
    func.return %2 : tensor<2x3xf32>
  }

  // A cast that changes the type is kept.
  // CHECK-LABEL: func.func @real_cast
  func.func @real_cast(%a: tensor<2x3xf32>) -> tensor<2x3xf64> {
    // CHECK-NEXT: array.cast %a : tensor<2x3xf32> -> tensor<2x3xf64>
    %0 = array.cast %a : tensor<2x3xf32> -> tensor<2x3xf64>
    func.return %0 : tensor<2x3xf64>
  }

  // CHECK-LABEL: func.func @reshape_of_reshape
  func.func @reshape_of_reshape(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
    // CHECK-NEXT: [[R:%.*]] = array.reshape %a : tensor<2x3xf32> -> tensor<3x2xf32>
    // CHECK-NEXT: func.return [[R]]
    %0 = array.reshape %a : tensor<2x3xf32> -> tensor<6xf32>
    %1 = array.reshape %0 : tensor<6xf32> -> tensor<3x2xf32>
    func.return %1 : tensor<3x2xf32>
  }

  // Two transposes compose; back to the identity they vanish.
  // CHECK-LABEL: func.func @transposes
  func.func @transposes(%a: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<3x2x4xf32>) {
    // CHECK-NEXT: [[T:%.*]] = array.transpose %a [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
    // CHECK-NEXT: func.return %a, [[T]]
    %0 = array.transpose %a [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
    %1 = array.transpose %0 [2, 0, 1] : tensor<3x4x2xf32> -> tensor<2x3x4xf32>
    %2 = array.transpose %0 [0, 2, 1] : tensor<3x4x2xf32> -> tensor<3x2x4xf32>
    func.return %1, %2 : tensor<2x3x4xf32>, tensor<3x2x4xf32>
  }

  // Reading back exactly the window just written yields what was written,
  // where that is an argument (or a view of one).
  // (`{{\[\[}}` is FileCheck's spelling of a literal `[[`.)
  // CHECK-LABEL: func.func @slice_of_insert_slice
  func.func @slice_of_insert_slice(%u: tensor<8xf64>, %v: tensor<6xf64>) -> (tensor<6xf64>, tensor<6xf64>) {
    // A slice across the window's edge, the assignment read by nothing
    // else: the parts it reads of the value and of the destination.
    // CHECK-NEXT: [[IN:%.*]] = array.slice %v{{\[\[}}1], [1]] : tensor<6xf64> -> tensor<5xf64>
    // CHECK-NEXT: [[OUT:%.*]] = array.slice %u{{\[\[}}7], [1]] : tensor<8xf64> -> tensor<1xf64>
    // CHECK-NEXT: [[OTHER:%.*]] = array.concat [[IN]], [[OUT]] axis 0
    // CHECK-NEXT: func.return %v, [[OTHER]]
    %0 = array.insert_slice %v into %u[[1], [1]] : tensor<6xf64> into tensor<8xf64>
    %1 = array.slice %0[[1], [1]] : tensor<8xf64> -> tensor<6xf64>
    %2 = array.slice %0[[2], [1]] : tensor<8xf64> -> tensor<6xf64>
    func.return %1, %2 : tensor<6xf64>, tensor<6xf64>
  }

  // A computed value the array keeps is read from the array (folded, it
  // would have a second reader, which computes it again)...
  // CHECK-LABEL: func.func @computed_and_kept
  func.func @computed_and_kept(%u: tensor<8xf64>, %v: tensor<6xf64>) -> (tensor<8xf64>, tensor<6xf64>) {
    // CHECK-NEXT: [[E:%.*]] = math.exp %v : tensor<6xf64>
    // CHECK-NEXT: [[W:%.*]] = array.insert_slice [[E]] into %u{{\[\[}}1], [1]] : tensor<6xf64> into tensor<8xf64>
    // CHECK-NEXT: [[R:%.*]] = array.slice [[W]]{{\[\[}}1], [1]] : tensor<8xf64> -> tensor<6xf64>
    // CHECK-NEXT: func.return [[W]], [[R]]
    %e = math.exp %v : tensor<6xf64>
    %0 = array.insert_slice %e into %u[[1], [1]] : tensor<6xf64> into tensor<8xf64>
    %1 = array.slice %0[[1], [1]] : tensor<8xf64> -> tensor<6xf64>
    func.return %0, %1 : tensor<8xf64>, tensor<6xf64>
  }

  // ... unless nothing else reads the array: the assignment goes away.
  // CHECK-LABEL: func.func @computed_read_back_only
  func.func @computed_read_back_only(%u: tensor<8xf64>, %v: tensor<6xf64>) -> tensor<6xf64> {
    // CHECK-NEXT: [[E:%.*]] = math.exp %v : tensor<6xf64>
    // CHECK-NEXT: func.return [[E]]
    %e = math.exp %v : tensor<6xf64>
    %0 = array.insert_slice %e into %u[[1], [1]] : tensor<6xf64> into tensor<8xf64>
    %1 = array.slice %0[[1], [1]] : tensor<8xf64> -> tensor<6xf64>
    func.return %1 : tensor<6xf64>
  }

  // A part of the window just written, read where the next assignment
  // writes over the array, is read from the value written; the assignment
  // keeps the rest of its window (`y[k:] += t` over taps k).
  // CHECK-LABEL: func.func @read_inside_window
  func.func @read_inside_window(%y: tensor<8xf64>, %v: tensor<6xf64>, %t: tensor<5xf64>) -> tensor<8xf64> {
    // CHECK-NEXT: [[E:%.*]] = math.exp %v : tensor<6xf64>
    // CHECK-NEXT: [[HEAD:%.*]] = array.slice [[E]]{{\[\[}}0], [1]] : tensor<6xf64> -> tensor<1xf64>
    // CHECK-NEXT: [[Y1:%.*]] = array.insert_slice [[HEAD]] into %y{{\[\[}}2], [1]] : tensor<1xf64> into tensor<8xf64>
    // CHECK-NEXT: [[TAIL:%.*]] = array.slice [[E]]{{\[\[}}1], [1]] : tensor<6xf64> -> tensor<5xf64>
    // CHECK-NEXT: [[S:%.*]] = arith.addf [[TAIL]], %t : tensor<5xf64>
    // CHECK-NEXT: [[Y2:%.*]] = array.insert_slice [[S]] into [[Y1]]{{\[\[}}3], [1]] : tensor<5xf64> into tensor<8xf64>
    // CHECK-NEXT: func.return [[Y2]]
    %e = math.exp %v : tensor<6xf64>
    %0 = array.insert_slice %e into %y[[2], [1]] : tensor<6xf64> into tensor<8xf64>
    %1 = array.slice %0[[3], [1]] : tensor<8xf64> -> tensor<5xf64>
    %2 = arith.addf %1, %t : tensor<5xf64>
    %3 = array.insert_slice %2 into %0[[3], [1]] : tensor<5xf64> into tensor<8xf64>
    func.return %3 : tensor<8xf64>
  }

  // Another read of that part of the array keeps it there.
  // CHECK-LABEL: func.func @read_inside_window_read_elsewhere
  func.func @read_inside_window_read_elsewhere(%y: tensor<8xf64>, %v: tensor<6xf64>) -> (tensor<5xf64>, tensor<4xf64>) {
    // CHECK-NEXT: [[E:%.*]] = math.exp %v : tensor<6xf64>
    // CHECK-NEXT: [[Y1:%.*]] = array.insert_slice [[E]] into %y{{\[\[}}2], [1]] : tensor<6xf64> into tensor<8xf64>
    // CHECK-NEXT: array.slice [[Y1]]{{\[\[}}3], [1]]
    // CHECK-NEXT: array.slice [[Y1]]{{\[\[}}4], [1]]
    %e = math.exp %v : tensor<6xf64>
    %0 = array.insert_slice %e into %y[[2], [1]] : tensor<6xf64> into tensor<8xf64>
    %1 = array.slice %0[[3], [1]] : tensor<8xf64> -> tensor<5xf64>
    %2 = array.slice %0[[4], [1]] : tensor<8xf64> -> tensor<4xf64>
    func.return %1, %2 : tensor<5xf64>, tensor<4xf64>
  }
}
