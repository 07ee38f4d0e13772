module attributes {gpu.container_module} {
  gpu.module @product {
    gpu.func @product_k0(%arg0: !llvm.ptr {llvm.noalias}, %arg1: !llvm.ptr {llvm.noalias}, %arg2: !llvm.ptr {llvm.noalias}, %arg3: !llvm.ptr {llvm.noalias}, %arg4: i64, %arg5: i64) kernel {
      %0 = llvm.mlir.constant(1 : i64) : i64
      %1 = llvm.alloca %0 x f32 : (i64) -> !llvm.ptr
      %global_id_x = gpu.global_id  x
      %2 = arith.index_cast %global_id_x : index to i64
      %3 = arith.addi %arg4, %2 : i64
      %4 = arith.cmpi slt, %3, %arg5 : i64
      %5 = arith.extui %4 : i1 to i64
      %6 = arith.addi %3, %5 : i64
      %c16_i64 = arith.constant 16 : i64
      %c32_i64 = arith.constant 32 : i64
      %7 = arith.muli %c16_i64, %c32_i64 : i64
      %c32_i64_0 = arith.constant 32 : i64
      %c16_i64_1 = arith.constant 16 : i64
      %8 = arith.muli %c32_i64_0, %c16_i64_1 : i64
      %c16_i64_2 = arith.constant 16 : i64
      %c16_i64_3 = arith.constant 16 : i64
      %9 = arith.muli %c16_i64_2, %c16_i64_3 : i64
      %c16_i64_4 = arith.constant 16 : i64
      %c16_i64_5 = arith.constant 16 : i64
      %c32_i64_6 = arith.constant 32 : i64
      %c1_i64 = arith.constant 1 : i64
      scf.for %arg6 = %3 to %6 step %c1_i64  : i64 {
        %10 = arith.divui %arg6, %c16_i64_5 : i64
        %11 = arith.muli %10, %c16_i64_5 : i64
        %12 = arith.subi %arg6, %11 : i64
        %cst = arith.constant 0.000000e+00 : f32
        llvm.store %cst, %1 : f32, !llvm.ptr
        %c0_i64 = arith.constant 0 : i64
        %c1_i64_7 = arith.constant 1 : i64
        scf.for %arg7 = %c0_i64 to %c32_i64_6 step %c1_i64_7  : i64 {
          %16 = arith.muli %10, %c32_i64_0 : i64
          %17 = arith.addi %16, %arg7 : i64
          %18 = "nax.load"(%arg1, %17) : (!llvm.ptr, i64) -> f32
          %19 = arith.muli %arg7, %c16_i64 : i64
          %20 = arith.addi %19, %12 : i64
          %21 = "nax.load"(%arg0, %20) : (!llvm.ptr, i64) -> f32
          %22 = arith.mulf %18, %21 : f32
          %23 = llvm.load %1 : !llvm.ptr -> f32
          %24 = arith.addf %23, %22 fastmath<reassoc> : f32
          llvm.store %24, %1 : f32, !llvm.ptr
        } {nax.role = "reduce"}
        %13 = llvm.load %1 : !llvm.ptr -> f32
        %14 = arith.muli %10, %c16_i64_2 : i64
        %15 = arith.addi %14, %12 : i64
        "nax.store"(%13, %arg2, %15) : (f32, !llvm.ptr, i64) -> ()
      } {nax.role = "parallel"}
      gpu.return
    }
  }
}
