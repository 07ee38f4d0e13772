module attributes {gpu.container_module} {
  gpu.module @product {
    gpu.func @product_k0(%arg0: !llvm.ptr {llvm.noalias}, %arg1: !llvm.ptr {llvm.noalias}, %arg2: !llvm.ptr {llvm.noalias}, %arg3: !llvm.ptr {llvm.noalias}, %arg4: i64, %arg5: i64) kernel {
      %global_id_x = gpu.global_id  x
      %0 = arith.index_cast %global_id_x : index to i64
      %1 = arith.addi %arg4, %0 : i64
      %2 = arith.cmpi slt, %1, %arg5 : i64
      %3 = arith.extui %2 : i1 to i64
      %4 = arith.addi %1, %3 : i64
      %c16_i64 = arith.constant 16 : i64
      %c32_i64 = arith.constant 32 : i64
      %5 = arith.muli %c16_i64, %c32_i64 : i64
      %c32_i64_0 = arith.constant 32 : i64
      %c16_i64_1 = arith.constant 16 : i64
      %6 = arith.muli %c32_i64_0, %c16_i64_1 : i64
      %c16_i64_2 = arith.constant 16 : i64
      %c16_i64_3 = arith.constant 16 : i64
      %7 = arith.muli %c16_i64_2, %c16_i64_3 : i64
      %c16_i64_4 = arith.constant 16 : i64
      %c16_i64_5 = arith.constant 16 : i64
      %c32_i64_6 = arith.constant 32 : i64
      %cst = arith.constant 0.000000e+00 : f32
      %c0_i64 = arith.constant 0 : i64
      %8 = arith.cmpi eq, %c16_i64_5, %c0_i64 : i64
      %9 = arith.select %8, %1, %4 : i64
      %c1_i64 = arith.constant 1 : i64
      scf.for %arg6 = %1 to %9 step %c1_i64  : i64 {
        %c0_i64_9 = arith.constant 0 : i64
        %c1_i64_10 = arith.constant 1 : i64
        scf.for %arg7 = %c0_i64_9 to %c16_i64_5 step %c1_i64_10  : i64 {
          %13 = arith.muli %arg6, %c16_i64_2 : i64
          %14 = arith.addi %13, %arg7 : i64
          "nax.store"(%cst, %arg2, %14) : (f32, !llvm.ptr, i64) -> ()
        } {nax.role = "vector"}
      } {nax.role = "parallel"}
      %10 = arith.minsi %c32_i64_6, %c16_i64_5 : i64
      %c0_i64_7 = arith.constant 0 : i64
      %11 = arith.cmpi eq, %10, %c0_i64_7 : i64
      %12 = arith.select %11, %1, %4 : i64
      %c1_i64_8 = arith.constant 1 : i64
      scf.for %arg6 = %1 to %12 step %c1_i64_8  : i64 {
        %c0_i64_9 = arith.constant 0 : i64
        %c1_i64_10 = arith.constant 1 : i64
        scf.for %arg7 = %c0_i64_9 to %c32_i64_6 step %c1_i64_10  : i64 {
          %c0_i64_11 = arith.constant 0 : i64
          %c1_i64_12 = arith.constant 1 : i64
          scf.for %arg8 = %c0_i64_11 to %c16_i64_5 step %c1_i64_12  : i64 {
            %13 = arith.muli %arg6, %c32_i64_0 : i64
            %14 = arith.addi %13, %arg7 : i64
            %15 = "nax.load"(%arg1, %14) : (!llvm.ptr, i64) -> f32
            %16 = arith.muli %arg7, %c16_i64 : i64
            %17 = arith.addi %16, %arg8 : i64
            %18 = "nax.load"(%arg0, %17) : (!llvm.ptr, i64) -> f32
            %19 = arith.mulf %15, %18 : f32
            %20 = arith.muli %arg6, %c16_i64_2 : i64
            %21 = arith.addi %20, %arg8 : i64
            %22 = "nax.load"(%arg2, %21) : (!llvm.ptr, i64) -> f32
            %23 = arith.addf %22, %19 fastmath<reassoc> : f32
            "nax.store"(%23, %arg2, %21) : (f32, !llvm.ptr, i64) -> ()
          } {nax.role = "vector"}
        } {nax.role = "reduce"}
      } {nax.role = "parallel"}
      gpu.return
    }
  }
}
