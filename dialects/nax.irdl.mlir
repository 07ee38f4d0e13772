// nax's MLIR dialect, in IRDL: what the kernel IR needs that upstream
// dialects lack. Loaded at run time (melior's `load_irdl_dialects`) by the
// MLIR back end (compiler/back/mlir), whose rewrite patterns lower each op
// to the LLVM dialect; everything else in a kernel is upstream (`arith`,
// `math`, `vector`, `scf`, `func`, and `llvm` for allocas and intrinsics).
//
// A kernel's buffers are `!llvm.ptr` arguments and its size slots one
// `!llvm.ptr` to `i64`s; positions are linear element indices (`i64`),
// which the shared kernel lowering computes from the kernel IR's index maps.
irdl.dialect @nax {
  // Element `index` of the buffer at `base`: a scalar, or (a vector result)
  // that many consecutive elements, aligned only to one element.
  // `%v = "nax.load"(%base, %index) : (!llvm.ptr, i64) -> f32`
  irdl.operation @load {
    %ptr = irdl.is !llvm.ptr
    %i64 = irdl.is i64
    %value = irdl.any
    irdl.operands(base: %ptr, index: %i64)
    irdl.results(value: %value)
  }

  // Stores a scalar, or a vector at consecutive elements, at element `index`.
  // `"nax.store"(%v, %base, %index) : (f32, !llvm.ptr, i64) -> ()`
  irdl.operation @store {
    %ptr = irdl.is !llvm.ptr
    %i64 = irdl.is i64
    %value = irdl.any
    irdl.operands(value: %value, base: %ptr, index: %i64)
    irdl.results()
  }

  // The value of size slot `slot`: a run-time size the driver passes.
  // `%n = "nax.size"(%sizes) {slot = 2 : i64} : (!llvm.ptr) -> i64`
  irdl.operation @size {
    %ptr = irdl.is !llvm.ptr
    %i64 = irdl.is i64
    %slot = irdl.base "#builtin.integer"
    irdl.attributes { "slot" = %slot }
    irdl.operands(sizes: %ptr)
    irdl.results(value: %i64)
  }

  // Asks for the cache line of element `index` (elements of type `element`)
  // ahead of its use; a hint that never faults, so `index` may lie past the
  // buffer. `write` is `0 : i32` to read, `1 : i32` to write.
  // `"nax.prefetch"(%base, %index) {element = f32, write = 0 : i32} : (!llvm.ptr, i64) -> ()`
  irdl.operation @prefetch {
    %ptr = irdl.is !llvm.ptr
    %i64 = irdl.is i64
    %element = irdl.base "#builtin.type"
    %write = irdl.base "#builtin.integer"
    irdl.attributes { "element" = %element, "write" = %write }
    irdl.operands(base: %ptr, index: %i64)
    irdl.results()
  }
}
