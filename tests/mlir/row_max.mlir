module {
  func.func @row_max_k0_body(%arg0: !llvm.ptr {llvm.noalias}, %arg1: !llvm.ptr {llvm.noalias}, %arg2: !llvm.ptr {llvm.noalias}, %arg3: i64, %arg4: i64) attributes {llvm.linkage = #llvm.linkage<internal>} {
    %0 = llvm.mlir.constant(1 : i64) : i64
    %1 = llvm.alloca %0 x f32 : (i64) -> !llvm.ptr
    %c5_i64 = arith.constant 5 : i64
    %c6_i64 = arith.constant 6 : i64
    %2 = arith.muli %c5_i64, %c6_i64 : i64
    %c6_i64_0 = arith.constant 6 : i64
    %c6_i64_1 = arith.constant 6 : i64
    %c5_i64_2 = arith.constant 5 : i64
    %c1_i64 = arith.constant 1 : i64
    scf.for %arg5 = %arg3 to %arg4 step %c1_i64  : i64 {
      %cst = arith.constant 0xFF800000 : f32
      llvm.store %cst, %1 : f32, !llvm.ptr
      %c0_i64 = arith.constant 0 : i64
      %c1_i64_3 = arith.constant 1 : i64
      scf.for %arg6 = %c0_i64 to %c5_i64_2 step %c1_i64_3  : i64 {
        %4 = arith.muli %arg5, %c5_i64 : i64
        %5 = arith.addi %4, %arg6 : i64
        %6 = "nax.load"(%arg0, %5) : (!llvm.ptr, i64) -> f32
        %7 = llvm.load %1 : !llvm.ptr -> f32
        %8 = arith.maximumf %7, %6 : f32
        llvm.store %8, %1 : f32, !llvm.ptr
      } {nax.role = "reduce"}
      %3 = llvm.load %1 : !llvm.ptr -> f32
      "nax.store"(%3, %arg1, %arg5) : (f32, !llvm.ptr, i64) -> ()
    } {nax.role = "parallel-vector"}
    return
  }
  func.func @row_max_k0(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: i64, %arg3: i64) {
    %0 = llvm.getelementptr inbounds %arg0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %1 = llvm.load %0 : !llvm.ptr -> !llvm.ptr
    %2 = llvm.getelementptr inbounds %arg0[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %3 = llvm.load %2 : !llvm.ptr -> !llvm.ptr
    call @row_max_k0_body(%1, %3, %arg1, %arg2, %arg3) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64) -> ()
    return
  }
  func.func @above_k0_body(%arg0: !llvm.ptr {llvm.noalias}, %arg1: !llvm.ptr {llvm.noalias}, %arg2: !llvm.ptr {llvm.noalias}, %arg3: !llvm.ptr {llvm.noalias}, %arg4: i64, %arg5: i64) attributes {llvm.linkage = #llvm.linkage<internal>} {
    %c5_i64 = arith.constant 5 : i64
    %c6_i64 = arith.constant 6 : i64
    %0 = arith.muli %c5_i64, %c6_i64 : i64
    %c5_i64_0 = arith.constant 5 : i64
    %c6_i64_1 = arith.constant 6 : i64
    %1 = arith.muli %c5_i64_0, %c6_i64_1 : i64
    %c6_i64_2 = arith.constant 6 : i64
    %c5_i64_3 = arith.constant 5 : i64
    %c0_i64 = arith.constant 0 : i64
    %2 = arith.cmpi eq, %c5_i64_3, %c0_i64 : i64
    %3 = arith.select %2, %arg4, %arg5 : i64
    %c1_i64 = arith.constant 1 : i64
    scf.for %arg6 = %arg4 to %3 step %c1_i64  : i64 {
      %c0_i64_4 = arith.constant 0 : i64
      %c1_i64_5 = arith.constant 1 : i64
      scf.for %arg7 = %c0_i64_4 to %c5_i64_3 step %c1_i64_5  : i64 {
        %4 = arith.muli %arg6, %c5_i64 : i64
        %5 = arith.addi %4, %arg7 : i64
        %6 = "nax.load"(%arg1, %5) : (!llvm.ptr, i64) -> f32
        %c0_i64_6 = arith.constant 0 : i64
        %7 = "nax.load"(%arg0, %c0_i64_6) : (!llvm.ptr, i64) -> f64
        %8 = arith.truncf %7 : f64 to f32
        %9 = arith.cmpf ogt, %6, %8 : f32
        %10 = arith.uitofp %9 : i1 to f64
        %11 = arith.muli %arg6, %c5_i64_0 : i64
        %12 = arith.addi %11, %arg7 : i64
        %13 = arith.truncf %10 : f64 to f32
        "nax.store"(%13, %arg2, %12) : (f32, !llvm.ptr, i64) -> ()
      } {nax.role = "vector"}
    } {nax.role = "parallel"}
    return
  }
  func.func @above_k0(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: i64, %arg3: i64) {
    %0 = llvm.getelementptr inbounds %arg0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %1 = llvm.load %0 : !llvm.ptr -> !llvm.ptr
    %2 = llvm.getelementptr inbounds %arg0[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %3 = llvm.load %2 : !llvm.ptr -> !llvm.ptr
    %4 = llvm.getelementptr inbounds %arg0[2] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %5 = llvm.load %4 : !llvm.ptr -> !llvm.ptr
    call @above_k0_body(%1, %3, %5, %arg1, %arg2, %arg3) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64) -> ()
    return
  }
}
