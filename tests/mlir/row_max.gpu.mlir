module attributes {gpu.container_module} {
  gpu.module @row_max {
    gpu.func @row_max_k0(%arg0: !llvm.ptr {llvm.noalias}, %arg1: !llvm.ptr {llvm.noalias}, %arg2: !llvm.ptr {llvm.noalias}, %arg3: i64, %arg4: i64) kernel {
      %0 = llvm.mlir.constant(1 : i64) : i64
      %1 = llvm.alloca %0 x f32 : (i64) -> !llvm.ptr
      %global_id_x = gpu.global_id  x
      %2 = arith.index_cast %global_id_x : index to i64
      %3 = arith.addi %arg3, %2 : i64
      %4 = arith.cmpi slt, %3, %arg4 : i64
      %5 = arith.extui %4 : i1 to i64
      %6 = arith.addi %3, %5 : i64
      %c5_i64 = arith.constant 5 : i64
      %c6_i64 = arith.constant 6 : i64
      %7 = arith.muli %c5_i64, %c6_i64 : i64
      %c6_i64_0 = arith.constant 6 : i64
      %c6_i64_1 = arith.constant 6 : i64
      %c5_i64_2 = arith.constant 5 : i64
      %c1_i64 = arith.constant 1 : i64
      scf.for %arg5 = %3 to %6 step %c1_i64  : i64 {
        %cst = arith.constant 0xFF800000 : f32
        llvm.store %cst, %1 : f32, !llvm.ptr
        %c0_i64 = arith.constant 0 : i64
        %c1_i64_3 = arith.constant 1 : i64
        scf.for %arg6 = %c0_i64 to %c5_i64_2 step %c1_i64_3  : i64 {
          %9 = arith.muli %arg5, %c5_i64 : i64
          %10 = arith.addi %9, %arg6 : i64
          %11 = "nax.load"(%arg0, %10) : (!llvm.ptr, i64) -> f32
          %12 = llvm.load %1 : !llvm.ptr -> f32
          %13 = arith.maximumf %12, %11 : f32
          llvm.store %13, %1 : f32, !llvm.ptr
        } {nax.role = "reduce"}
        %8 = llvm.load %1 : !llvm.ptr -> f32
        "nax.store"(%8, %arg1, %arg5) : (f32, !llvm.ptr, i64) -> ()
      } {nax.role = "parallel-vector"}
      gpu.return
    }
    gpu.func @above_k0(%arg0: !llvm.ptr {llvm.noalias}, %arg1: !llvm.ptr {llvm.noalias}, %arg2: !llvm.ptr {llvm.noalias}, %arg3: !llvm.ptr {llvm.noalias}, %arg4: i64, %arg5: i64) kernel {
      %global_id_x = gpu.global_id  x
      %0 = arith.index_cast %global_id_x : index to i64
      %1 = arith.addi %arg4, %0 : i64
      %2 = arith.cmpi slt, %1, %arg5 : i64
      %3 = arith.extui %2 : i1 to i64
      %4 = arith.addi %1, %3 : i64
      %c5_i64 = arith.constant 5 : i64
      %c6_i64 = arith.constant 6 : i64
      %5 = arith.muli %c5_i64, %c6_i64 : i64
      %c5_i64_0 = arith.constant 5 : i64
      %c6_i64_1 = arith.constant 6 : i64
      %6 = arith.muli %c5_i64_0, %c6_i64_1 : i64
      %c6_i64_2 = arith.constant 6 : i64
      %c5_i64_3 = arith.constant 5 : i64
      %c1_i64 = arith.constant 1 : i64
      scf.for %arg6 = %1 to %4 step %c1_i64  : i64 {
        %7 = arith.divui %arg6, %c5_i64_3 : i64
        %8 = arith.muli %7, %c5_i64_3 : i64
        %9 = arith.subi %arg6, %8 : i64
        %10 = arith.muli %7, %c5_i64 : i64
        %11 = arith.addi %10, %9 : i64
        %12 = "nax.load"(%arg1, %11) : (!llvm.ptr, i64) -> f32
        %c0_i64 = arith.constant 0 : i64
        %13 = "nax.load"(%arg0, %c0_i64) : (!llvm.ptr, i64) -> f64
        %14 = arith.truncf %13 : f64 to f32
        %15 = arith.cmpf ogt, %12, %14 : f32
        %16 = arith.uitofp %15 : i1 to f64
        %17 = arith.muli %7, %c5_i64_0 : i64
        %18 = arith.addi %17, %9 : i64
        %19 = arith.truncf %16 : f64 to f32
        "nax.store"(%19, %arg2, %18) : (f32, !llvm.ptr, i64) -> ()
      } {nax.role = "parallel"}
      gpu.return
    }
  }
}
