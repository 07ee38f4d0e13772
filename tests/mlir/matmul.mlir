module {
  func.func @product_k0_body(%arg0: !llvm.ptr {llvm.noalias}, %arg1: !llvm.ptr {llvm.noalias}, %arg2: !llvm.ptr {llvm.noalias}, %arg3: !llvm.ptr {llvm.noalias}, %arg4: i64, %arg5: i64) attributes {llvm.linkage = #llvm.linkage<internal>} {
    return
  }
  func.func @product_k0(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: i64, %arg3: i64) {
    %0 = llvm.getelementptr inbounds %arg0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %1 = llvm.load %0 : !llvm.ptr -> !llvm.ptr
    %2 = llvm.getelementptr inbounds %arg0[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %3 = llvm.load %2 : !llvm.ptr -> !llvm.ptr
    %4 = llvm.getelementptr inbounds %arg0[2] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %5 = llvm.load %4 : !llvm.ptr -> !llvm.ptr
    call @product_k0_body(%1, %3, %5, %arg1, %arg2, %arg3) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64) -> ()
    return
  }
  func.func @product_m0_body(%arg0: !llvm.ptr {llvm.noalias}, %arg1: !llvm.ptr {llvm.noalias}, %arg2: !llvm.ptr {llvm.noalias}, %arg3: !llvm.ptr {llvm.noalias}, %arg4: !llvm.ptr {llvm.noalias}, %arg5: i64, %arg6: i64) attributes {llvm.linkage = #llvm.linkage<internal>} {
    %0 = llvm.mlir.constant(1 : i64) : i64
    %1 = llvm.alloca %0 x vector<4xf32> : (i64) -> !llvm.ptr
    %2 = llvm.alloca %0 x vector<4xf32> : (i64) -> !llvm.ptr
    %3 = llvm.alloca %0 x vector<4xf32> : (i64) -> !llvm.ptr
    %4 = llvm.alloca %0 x vector<4xf32> : (i64) -> !llvm.ptr
    %5 = llvm.alloca %0 x vector<4xf32> : (i64) -> !llvm.ptr
    %6 = llvm.alloca %0 x vector<4xf32> : (i64) -> !llvm.ptr
    %7 = llvm.alloca %0 x vector<4xf32> : (i64) -> !llvm.ptr
    %8 = llvm.alloca %0 x vector<4xf32> : (i64) -> !llvm.ptr
    %9 = llvm.alloca %0 x vector<4xf32> : (i64) -> !llvm.ptr
    %10 = llvm.alloca %0 x vector<4xf32> : (i64) -> !llvm.ptr
    %11 = llvm.alloca %0 x vector<4xf32> : (i64) -> !llvm.ptr
    %12 = llvm.alloca %0 x vector<4xf32> : (i64) -> !llvm.ptr
    %13 = llvm.alloca %0 x f32 : (i64) -> !llvm.ptr
    %14 = "nax.size"(%arg4) {slot = 0 : i64} : (!llvm.ptr) -> i64
    %15 = "nax.size"(%arg4) {slot = 1 : i64} : (!llvm.ptr) -> i64
    %16 = "nax.size"(%arg4) {slot = 2 : i64} : (!llvm.ptr) -> i64
    %17 = "nax.size"(%arg4) {slot = 3 : i64} : (!llvm.ptr) -> i64
    %18 = "nax.size"(%arg4) {slot = 4 : i64} : (!llvm.ptr) -> i64
    %19 = "nax.size"(%arg4) {slot = 5 : i64} : (!llvm.ptr) -> i64
    %cst = arith.constant 0.000000e+00 : f32
    %20 = vector.broadcast %cst : f32 to vector<4xf32>
    llvm.store %20, %1 : vector<4xf32>, !llvm.ptr
    llvm.store %20, %2 : vector<4xf32>, !llvm.ptr
    llvm.store %20, %3 : vector<4xf32>, !llvm.ptr
    llvm.store %20, %4 : vector<4xf32>, !llvm.ptr
    llvm.store %20, %5 : vector<4xf32>, !llvm.ptr
    llvm.store %20, %6 : vector<4xf32>, !llvm.ptr
    llvm.store %20, %7 : vector<4xf32>, !llvm.ptr
    llvm.store %20, %8 : vector<4xf32>, !llvm.ptr
    llvm.store %20, %9 : vector<4xf32>, !llvm.ptr
    llvm.store %20, %10 : vector<4xf32>, !llvm.ptr
    llvm.store %20, %11 : vector<4xf32>, !llvm.ptr
    llvm.store %20, %12 : vector<4xf32>, !llvm.ptr
    %c0_i64 = arith.constant 0 : i64
    %c1_i64 = arith.constant 1 : i64
    scf.for %arg7 = %c0_i64 to %14 step %c1_i64  : i64 {
      %c6_i64_3 = arith.constant 6 : i64
      %c8_i64_4 = arith.constant 8 : i64
      %28 = arith.muli %arg7, %c6_i64_3 : i64
      %29 = arith.muli %arg7, %c8_i64_4 : i64
      %c0_i64_5 = arith.constant 0 : i64
      %30 = arith.addi %29, %c0_i64_5 : i64
      %31 = "nax.load"(%arg1, %30) : (!llvm.ptr, i64) -> vector<4xf32>
      %c4_i64 = arith.constant 4 : i64
      %32 = arith.addi %29, %c4_i64 : i64
      %33 = "nax.load"(%arg1, %32) : (!llvm.ptr, i64) -> vector<4xf32>
      %c0_i64_6 = arith.constant 0 : i64
      %34 = arith.addi %28, %c0_i64_6 : i64
      %35 = "nax.load"(%arg0, %34) : (!llvm.ptr, i64) -> f32
      %36 = vector.broadcast %35 : f32 to vector<4xf32>
      %37 = llvm.load %1 : !llvm.ptr -> vector<4xf32>
      %38 = llvm.intr.fma(%36, %31, %37) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
      llvm.store %38, %1 : vector<4xf32>, !llvm.ptr
      %39 = llvm.load %2 : !llvm.ptr -> vector<4xf32>
      %40 = llvm.intr.fma(%36, %33, %39) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
      llvm.store %40, %2 : vector<4xf32>, !llvm.ptr
      %c1_i64_7 = arith.constant 1 : i64
      %41 = arith.addi %28, %c1_i64_7 : i64
      %42 = "nax.load"(%arg0, %41) : (!llvm.ptr, i64) -> f32
      %43 = vector.broadcast %42 : f32 to vector<4xf32>
      %44 = llvm.load %3 : !llvm.ptr -> vector<4xf32>
      %45 = llvm.intr.fma(%43, %31, %44) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
      llvm.store %45, %3 : vector<4xf32>, !llvm.ptr
      %46 = llvm.load %4 : !llvm.ptr -> vector<4xf32>
      %47 = llvm.intr.fma(%43, %33, %46) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
      llvm.store %47, %4 : vector<4xf32>, !llvm.ptr
      %c2_i64 = arith.constant 2 : i64
      %48 = arith.addi %28, %c2_i64 : i64
      %49 = "nax.load"(%arg0, %48) : (!llvm.ptr, i64) -> f32
      %50 = vector.broadcast %49 : f32 to vector<4xf32>
      %51 = llvm.load %5 : !llvm.ptr -> vector<4xf32>
      %52 = llvm.intr.fma(%50, %31, %51) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
      llvm.store %52, %5 : vector<4xf32>, !llvm.ptr
      %53 = llvm.load %6 : !llvm.ptr -> vector<4xf32>
      %54 = llvm.intr.fma(%50, %33, %53) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
      llvm.store %54, %6 : vector<4xf32>, !llvm.ptr
      %c3_i64 = arith.constant 3 : i64
      %55 = arith.addi %28, %c3_i64 : i64
      %56 = "nax.load"(%arg0, %55) : (!llvm.ptr, i64) -> f32
      %57 = vector.broadcast %56 : f32 to vector<4xf32>
      %58 = llvm.load %7 : !llvm.ptr -> vector<4xf32>
      %59 = llvm.intr.fma(%57, %31, %58) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
      llvm.store %59, %7 : vector<4xf32>, !llvm.ptr
      %60 = llvm.load %8 : !llvm.ptr -> vector<4xf32>
      %61 = llvm.intr.fma(%57, %33, %60) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
      llvm.store %61, %8 : vector<4xf32>, !llvm.ptr
      %c4_i64_8 = arith.constant 4 : i64
      %62 = arith.addi %28, %c4_i64_8 : i64
      %63 = "nax.load"(%arg0, %62) : (!llvm.ptr, i64) -> f32
      %64 = vector.broadcast %63 : f32 to vector<4xf32>
      %65 = llvm.load %9 : !llvm.ptr -> vector<4xf32>
      %66 = llvm.intr.fma(%64, %31, %65) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
      llvm.store %66, %9 : vector<4xf32>, !llvm.ptr
      %67 = llvm.load %10 : !llvm.ptr -> vector<4xf32>
      %68 = llvm.intr.fma(%64, %33, %67) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
      llvm.store %68, %10 : vector<4xf32>, !llvm.ptr
      %c5_i64 = arith.constant 5 : i64
      %69 = arith.addi %28, %c5_i64 : i64
      %70 = "nax.load"(%arg0, %69) : (!llvm.ptr, i64) -> f32
      %71 = vector.broadcast %70 : f32 to vector<4xf32>
      %72 = llvm.load %11 : !llvm.ptr -> vector<4xf32>
      %73 = llvm.intr.fma(%71, %31, %72) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
      llvm.store %73, %11 : vector<4xf32>, !llvm.ptr
      %74 = llvm.load %12 : !llvm.ptr -> vector<4xf32>
      %75 = llvm.intr.fma(%71, %33, %74) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
      llvm.store %75, %12 : vector<4xf32>, !llvm.ptr
    }
    %c1_i64_0 = arith.constant 1 : i64
    %c6_i64 = arith.constant 6 : i64
    %c8_i64 = arith.constant 8 : i64
    %21 = arith.cmpi eq, %17, %c6_i64 : i64
    %22 = arith.cmpi eq, %18, %c8_i64 : i64
    %23 = arith.cmpi eq, %16, %c1_i64_0 : i64
    %24 = arith.andi %21, %22 : i1
    %25 = arith.andi %24, %23 : i1
    %26 = arith.extui %25 : i1 to i64
    %c1_i64_1 = arith.constant 1 : i64
    scf.for %arg7 = %c0_i64 to %26 step %c1_i64_1  : i64 {
      %c1_i64_3 = arith.constant 1 : i64
      scf.for %arg8 = %c0_i64 to %19 step %c1_i64_3  : i64 {
        %c0_i64_24 = arith.constant 0 : i64
        %64 = arith.muli %c0_i64_24, %15 : i64
        %c0_i64_25 = arith.constant 0 : i64
        %65 = arith.addi %64, %c0_i64_25 : i64
        %66 = "nax.load"(%arg2, %65) : (!llvm.ptr, i64) -> vector<4xf32>
        %67 = llvm.load %1 : !llvm.ptr -> vector<4xf32>
        %68 = arith.addf %67, %66 : vector<4xf32>
        llvm.store %68, %1 : vector<4xf32>, !llvm.ptr
        %c0_i64_26 = arith.constant 0 : i64
        %69 = arith.muli %c0_i64_26, %15 : i64
        %c4_i64_27 = arith.constant 4 : i64
        %70 = arith.addi %69, %c4_i64_27 : i64
        %71 = "nax.load"(%arg2, %70) : (!llvm.ptr, i64) -> vector<4xf32>
        %72 = llvm.load %2 : !llvm.ptr -> vector<4xf32>
        %73 = arith.addf %72, %71 : vector<4xf32>
        llvm.store %73, %2 : vector<4xf32>, !llvm.ptr
        %c1_i64_28 = arith.constant 1 : i64
        %74 = arith.muli %c1_i64_28, %15 : i64
        %c0_i64_29 = arith.constant 0 : i64
        %75 = arith.addi %74, %c0_i64_29 : i64
        %76 = "nax.load"(%arg2, %75) : (!llvm.ptr, i64) -> vector<4xf32>
        %77 = llvm.load %3 : !llvm.ptr -> vector<4xf32>
        %78 = arith.addf %77, %76 : vector<4xf32>
        llvm.store %78, %3 : vector<4xf32>, !llvm.ptr
        %c1_i64_30 = arith.constant 1 : i64
        %79 = arith.muli %c1_i64_30, %15 : i64
        %c4_i64_31 = arith.constant 4 : i64
        %80 = arith.addi %79, %c4_i64_31 : i64
        %81 = "nax.load"(%arg2, %80) : (!llvm.ptr, i64) -> vector<4xf32>
        %82 = llvm.load %4 : !llvm.ptr -> vector<4xf32>
        %83 = arith.addf %82, %81 : vector<4xf32>
        llvm.store %83, %4 : vector<4xf32>, !llvm.ptr
        %c2_i64_32 = arith.constant 2 : i64
        %84 = arith.muli %c2_i64_32, %15 : i64
        %c0_i64_33 = arith.constant 0 : i64
        %85 = arith.addi %84, %c0_i64_33 : i64
        %86 = "nax.load"(%arg2, %85) : (!llvm.ptr, i64) -> vector<4xf32>
        %87 = llvm.load %5 : !llvm.ptr -> vector<4xf32>
        %88 = arith.addf %87, %86 : vector<4xf32>
        llvm.store %88, %5 : vector<4xf32>, !llvm.ptr
        %c2_i64_34 = arith.constant 2 : i64
        %89 = arith.muli %c2_i64_34, %15 : i64
        %c4_i64_35 = arith.constant 4 : i64
        %90 = arith.addi %89, %c4_i64_35 : i64
        %91 = "nax.load"(%arg2, %90) : (!llvm.ptr, i64) -> vector<4xf32>
        %92 = llvm.load %6 : !llvm.ptr -> vector<4xf32>
        %93 = arith.addf %92, %91 : vector<4xf32>
        llvm.store %93, %6 : vector<4xf32>, !llvm.ptr
        %c3_i64_36 = arith.constant 3 : i64
        %94 = arith.muli %c3_i64_36, %15 : i64
        %c0_i64_37 = arith.constant 0 : i64
        %95 = arith.addi %94, %c0_i64_37 : i64
        %96 = "nax.load"(%arg2, %95) : (!llvm.ptr, i64) -> vector<4xf32>
        %97 = llvm.load %7 : !llvm.ptr -> vector<4xf32>
        %98 = arith.addf %97, %96 : vector<4xf32>
        llvm.store %98, %7 : vector<4xf32>, !llvm.ptr
        %c3_i64_38 = arith.constant 3 : i64
        %99 = arith.muli %c3_i64_38, %15 : i64
        %c4_i64_39 = arith.constant 4 : i64
        %100 = arith.addi %99, %c4_i64_39 : i64
        %101 = "nax.load"(%arg2, %100) : (!llvm.ptr, i64) -> vector<4xf32>
        %102 = llvm.load %8 : !llvm.ptr -> vector<4xf32>
        %103 = arith.addf %102, %101 : vector<4xf32>
        llvm.store %103, %8 : vector<4xf32>, !llvm.ptr
        %c4_i64_40 = arith.constant 4 : i64
        %104 = arith.muli %c4_i64_40, %15 : i64
        %c0_i64_41 = arith.constant 0 : i64
        %105 = arith.addi %104, %c0_i64_41 : i64
        %106 = "nax.load"(%arg2, %105) : (!llvm.ptr, i64) -> vector<4xf32>
        %107 = llvm.load %9 : !llvm.ptr -> vector<4xf32>
        %108 = arith.addf %107, %106 : vector<4xf32>
        llvm.store %108, %9 : vector<4xf32>, !llvm.ptr
        %c4_i64_42 = arith.constant 4 : i64
        %109 = arith.muli %c4_i64_42, %15 : i64
        %c4_i64_43 = arith.constant 4 : i64
        %110 = arith.addi %109, %c4_i64_43 : i64
        %111 = "nax.load"(%arg2, %110) : (!llvm.ptr, i64) -> vector<4xf32>
        %112 = llvm.load %10 : !llvm.ptr -> vector<4xf32>
        %113 = arith.addf %112, %111 : vector<4xf32>
        llvm.store %113, %10 : vector<4xf32>, !llvm.ptr
        %c5_i64_44 = arith.constant 5 : i64
        %114 = arith.muli %c5_i64_44, %15 : i64
        %c0_i64_45 = arith.constant 0 : i64
        %115 = arith.addi %114, %c0_i64_45 : i64
        %116 = "nax.load"(%arg2, %115) : (!llvm.ptr, i64) -> vector<4xf32>
        %117 = llvm.load %11 : !llvm.ptr -> vector<4xf32>
        %118 = arith.addf %117, %116 : vector<4xf32>
        llvm.store %118, %11 : vector<4xf32>, !llvm.ptr
        %c5_i64_46 = arith.constant 5 : i64
        %119 = arith.muli %c5_i64_46, %15 : i64
        %c4_i64_47 = arith.constant 4 : i64
        %120 = arith.addi %119, %c4_i64_47 : i64
        %121 = "nax.load"(%arg2, %120) : (!llvm.ptr, i64) -> vector<4xf32>
        %122 = llvm.load %12 : !llvm.ptr -> vector<4xf32>
        %123 = arith.addf %122, %121 : vector<4xf32>
        llvm.store %123, %12 : vector<4xf32>, !llvm.ptr
      }
      %c0_i64_4 = arith.constant 0 : i64
      %28 = arith.muli %c0_i64_4, %15 : i64
      %c0_i64_5 = arith.constant 0 : i64
      %29 = arith.addi %28, %c0_i64_5 : i64
      %30 = llvm.load %1 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%30, %arg2, %29) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c0_i64_6 = arith.constant 0 : i64
      %31 = arith.muli %c0_i64_6, %15 : i64
      %c4_i64 = arith.constant 4 : i64
      %32 = arith.addi %31, %c4_i64 : i64
      %33 = llvm.load %2 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%33, %arg2, %32) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c1_i64_7 = arith.constant 1 : i64
      %34 = arith.muli %c1_i64_7, %15 : i64
      %c0_i64_8 = arith.constant 0 : i64
      %35 = arith.addi %34, %c0_i64_8 : i64
      %36 = llvm.load %3 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%36, %arg2, %35) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c1_i64_9 = arith.constant 1 : i64
      %37 = arith.muli %c1_i64_9, %15 : i64
      %c4_i64_10 = arith.constant 4 : i64
      %38 = arith.addi %37, %c4_i64_10 : i64
      %39 = llvm.load %4 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%39, %arg2, %38) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c2_i64 = arith.constant 2 : i64
      %40 = arith.muli %c2_i64, %15 : i64
      %c0_i64_11 = arith.constant 0 : i64
      %41 = arith.addi %40, %c0_i64_11 : i64
      %42 = llvm.load %5 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%42, %arg2, %41) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c2_i64_12 = arith.constant 2 : i64
      %43 = arith.muli %c2_i64_12, %15 : i64
      %c4_i64_13 = arith.constant 4 : i64
      %44 = arith.addi %43, %c4_i64_13 : i64
      %45 = llvm.load %6 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%45, %arg2, %44) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c3_i64 = arith.constant 3 : i64
      %46 = arith.muli %c3_i64, %15 : i64
      %c0_i64_14 = arith.constant 0 : i64
      %47 = arith.addi %46, %c0_i64_14 : i64
      %48 = llvm.load %7 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%48, %arg2, %47) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c3_i64_15 = arith.constant 3 : i64
      %49 = arith.muli %c3_i64_15, %15 : i64
      %c4_i64_16 = arith.constant 4 : i64
      %50 = arith.addi %49, %c4_i64_16 : i64
      %51 = llvm.load %8 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%51, %arg2, %50) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c4_i64_17 = arith.constant 4 : i64
      %52 = arith.muli %c4_i64_17, %15 : i64
      %c0_i64_18 = arith.constant 0 : i64
      %53 = arith.addi %52, %c0_i64_18 : i64
      %54 = llvm.load %9 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%54, %arg2, %53) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c4_i64_19 = arith.constant 4 : i64
      %55 = arith.muli %c4_i64_19, %15 : i64
      %c4_i64_20 = arith.constant 4 : i64
      %56 = arith.addi %55, %c4_i64_20 : i64
      %57 = llvm.load %10 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%57, %arg2, %56) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c5_i64 = arith.constant 5 : i64
      %58 = arith.muli %c5_i64, %15 : i64
      %c0_i64_21 = arith.constant 0 : i64
      %59 = arith.addi %58, %c0_i64_21 : i64
      %60 = llvm.load %11 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%60, %arg2, %59) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c5_i64_22 = arith.constant 5 : i64
      %61 = arith.muli %c5_i64_22, %15 : i64
      %c4_i64_23 = arith.constant 4 : i64
      %62 = arith.addi %61, %c4_i64_23 : i64
      %63 = llvm.load %12 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%63, %arg2, %62) : (vector<4xf32>, !llvm.ptr, i64) -> ()
    }
    %27 = arith.subi %c1_i64_0, %26 : i64
    %c1_i64_2 = arith.constant 1 : i64
    scf.for %arg7 = %c0_i64 to %27 step %c1_i64_2  : i64 {
      %c0_i64_3 = arith.constant 0 : i64
      %28 = llvm.load %1 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%28, %arg3, %c0_i64_3) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c4_i64 = arith.constant 4 : i64
      %29 = llvm.load %2 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%29, %arg3, %c4_i64) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c8_i64_4 = arith.constant 8 : i64
      %30 = llvm.load %3 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%30, %arg3, %c8_i64_4) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c12_i64 = arith.constant 12 : i64
      %31 = llvm.load %4 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%31, %arg3, %c12_i64) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c16_i64 = arith.constant 16 : i64
      %32 = llvm.load %5 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%32, %arg3, %c16_i64) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c20_i64 = arith.constant 20 : i64
      %33 = llvm.load %6 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%33, %arg3, %c20_i64) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c24_i64 = arith.constant 24 : i64
      %34 = llvm.load %7 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%34, %arg3, %c24_i64) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c28_i64 = arith.constant 28 : i64
      %35 = llvm.load %8 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%35, %arg3, %c28_i64) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c32_i64 = arith.constant 32 : i64
      %36 = llvm.load %9 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%36, %arg3, %c32_i64) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c36_i64 = arith.constant 36 : i64
      %37 = llvm.load %10 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%37, %arg3, %c36_i64) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c40_i64 = arith.constant 40 : i64
      %38 = llvm.load %11 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%38, %arg3, %c40_i64) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c44_i64 = arith.constant 44 : i64
      %39 = llvm.load %12 : !llvm.ptr -> vector<4xf32>
      "nax.store"(%39, %arg3, %c44_i64) : (vector<4xf32>, !llvm.ptr, i64) -> ()
      %c1_i64_5 = arith.constant 1 : i64
      scf.for %arg8 = %c0_i64 to %17 step %c1_i64_5  : i64 {
        %c8_i64_6 = arith.constant 8 : i64
        %40 = arith.muli %arg8, %c8_i64_6 : i64
        %41 = arith.muli %arg8, %15 : i64
        %c1_i64_7 = arith.constant 1 : i64
        scf.for %arg9 = %c0_i64 to %18 step %c1_i64_7  : i64 {
          %42 = arith.addi %40, %arg9 : i64
          %43 = "nax.load"(%arg3, %42) : (!llvm.ptr, i64) -> f32
          %44 = arith.muli %arg9, %16 : i64
          %45 = arith.addi %41, %44 : i64
          llvm.store %43, %13 : f32, !llvm.ptr
          %c1_i64_8 = arith.constant 1 : i64
          scf.for %arg10 = %c0_i64 to %19 step %c1_i64_8  : i64 {
            %47 = "nax.load"(%arg2, %45) : (!llvm.ptr, i64) -> f32
            %48 = llvm.load %13 : !llvm.ptr -> f32
            %49 = arith.addf %48, %47 : f32
            llvm.store %49, %13 : f32, !llvm.ptr
          }
          %46 = llvm.load %13 : !llvm.ptr -> f32
          "nax.store"(%46, %arg2, %45) : (f32, !llvm.ptr, i64) -> ()
        }
      }
    }
    return
  }
  func.func @product_m0(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: i64, %arg3: i64) {
    %0 = llvm.getelementptr inbounds %arg0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %1 = llvm.load %0 : !llvm.ptr -> !llvm.ptr
    %2 = llvm.getelementptr inbounds %arg0[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %3 = llvm.load %2 : !llvm.ptr -> !llvm.ptr
    %4 = llvm.getelementptr inbounds %arg0[2] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %5 = llvm.load %4 : !llvm.ptr -> !llvm.ptr
    %6 = llvm.getelementptr inbounds %arg0[3] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %7 = llvm.load %6 : !llvm.ptr -> !llvm.ptr
    call @product_m0_body(%1, %3, %5, %7, %arg1, %arg2, %arg3) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64) -> ()
    return
  }
}
