module attributes {gpu.container_module} {
  gpu.module @scale_shift {
    gpu.func @scale_shift_k0(%arg0: !llvm.ptr {llvm.noalias}, %arg1: !llvm.ptr {llvm.noalias}, %arg2: !llvm.ptr {llvm.noalias}, %arg3: !llvm.ptr {llvm.noalias}, %arg4: !llvm.ptr {llvm.noalias}, %arg5: i64, %arg6: i64) kernel {
      %global_id_x = gpu.global_id  x
      %0 = arith.index_cast %global_id_x : index to i64
      %1 = arith.addi %arg5, %0 : i64
      %2 = arith.cmpi slt, %1, %arg6 : i64
      %3 = arith.extui %2 : i1 to i64
      %4 = arith.addi %1, %3 : i64
      %c4_i64 = arith.constant 4 : i64
      %c4_i64_0 = arith.constant 4 : i64
      %5 = "nax.size"(%arg4) {slot = 0 : i64} : (!llvm.ptr) -> i64
      %6 = arith.muli %c4_i64_0, %5 : i64
      %c4_i64_1 = arith.constant 4 : i64
      %7 = "nax.size"(%arg4) {slot = 0 : i64} : (!llvm.ptr) -> i64
      %8 = arith.muli %c4_i64_1, %7 : i64
      %9 = "nax.size"(%arg4) {slot = 0 : i64} : (!llvm.ptr) -> i64
      %c4_i64_2 = arith.constant 4 : i64
      %c1_i64 = arith.constant 1 : i64
      scf.for %arg7 = %1 to %4 step %c1_i64  : i64 {
        %10 = arith.divui %arg7, %c4_i64_2 : i64
        %11 = arith.muli %10, %c4_i64_2 : i64
        %12 = arith.subi %arg7, %11 : i64
        %13 = arith.muli %10, %c4_i64_0 : i64
        %14 = arith.addi %13, %12 : i64
        %15 = "nax.load"(%arg2, %14) : (!llvm.ptr, i64) -> f32
        %16 = "nax.load"(%arg1, %12) : (!llvm.ptr, i64) -> f32
        %17 = arith.mulf %15, %16 : f32
        %c0_i64 = arith.constant 0 : i64
        %18 = "nax.load"(%arg0, %c0_i64) : (!llvm.ptr, i64) -> f64
        %19 = arith.truncf %18 : f64 to f32
        %20 = arith.addf %17, %19 : f32
        %21 = arith.muli %10, %c4_i64_1 : i64
        %22 = arith.addi %21, %12 : i64
        "nax.store"(%20, %arg3, %22) : (f32, !llvm.ptr, i64) -> ()
      } {nax.role = "parallel"}
      gpu.return
    }
  }
}
