module {
  func.func @scale_shift_k0_body(%arg0: !llvm.ptr {llvm.noalias}, %arg1: !llvm.ptr {llvm.noalias}, %arg2: !llvm.ptr {llvm.noalias}, %arg3: !llvm.ptr {llvm.noalias}, %arg4: !llvm.ptr {llvm.noalias}, %arg5: i64, %arg6: i64) attributes {llvm.linkage = #llvm.linkage<internal>} {
    %c4_i64 = arith.constant 4 : i64
    %c4_i64_0 = arith.constant 4 : i64
    %0 = "nax.size"(%arg4) {slot = 0 : i64} : (!llvm.ptr) -> i64
    %1 = arith.muli %c4_i64_0, %0 : i64
    %c4_i64_1 = arith.constant 4 : i64
    %2 = "nax.size"(%arg4) {slot = 0 : i64} : (!llvm.ptr) -> i64
    %3 = arith.muli %c4_i64_1, %2 : i64
    %4 = "nax.size"(%arg4) {slot = 0 : i64} : (!llvm.ptr) -> i64
    %c4_i64_2 = arith.constant 4 : i64
    %c0_i64 = arith.constant 0 : i64
    %5 = arith.cmpi eq, %c4_i64_2, %c0_i64 : i64
    %6 = arith.select %5, %arg5, %arg6 : i64
    %c1_i64 = arith.constant 1 : i64
    scf.for %arg7 = %arg5 to %6 step %c1_i64  : i64 {
      %c0_i64_3 = arith.constant 0 : i64
      %c1_i64_4 = arith.constant 1 : i64
      scf.for %arg8 = %c0_i64_3 to %c4_i64_2 step %c1_i64_4  : i64 {
        %7 = arith.muli %arg7, %c4_i64_0 : i64
        %8 = arith.addi %7, %arg8 : i64
        %9 = "nax.load"(%arg2, %8) : (!llvm.ptr, i64) -> f32
        %10 = "nax.load"(%arg1, %arg8) : (!llvm.ptr, i64) -> f32
        %11 = arith.mulf %9, %10 : f32
        %c0_i64_5 = arith.constant 0 : i64
        %12 = "nax.load"(%arg0, %c0_i64_5) : (!llvm.ptr, i64) -> f64
        %13 = arith.truncf %12 : f64 to f32
        %14 = arith.addf %11, %13 : f32
        %15 = arith.muli %arg7, %c4_i64_1 : i64
        %16 = arith.addi %15, %arg8 : i64
        "nax.store"(%14, %arg3, %16) : (f32, !llvm.ptr, i64) -> ()
      } {nax.role = "vector"}
    } {nax.role = "parallel"}
    return
  }
  func.func @scale_shift_k0(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: i64, %arg3: i64) {
    %0 = llvm.getelementptr inbounds %arg0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %1 = llvm.load %0 : !llvm.ptr -> !llvm.ptr
    %2 = llvm.getelementptr inbounds %arg0[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %3 = llvm.load %2 : !llvm.ptr -> !llvm.ptr
    %4 = llvm.getelementptr inbounds %arg0[2] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %5 = llvm.load %4 : !llvm.ptr -> !llvm.ptr
    %6 = llvm.getelementptr inbounds %arg0[3] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %7 = llvm.load %6 : !llvm.ptr -> !llvm.ptr
    call @scale_shift_k0_body(%1, %3, %5, %7, %arg1, %arg2, %arg3) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64) -> ()
    return
  }
}
