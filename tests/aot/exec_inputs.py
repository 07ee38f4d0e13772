"""Writes the shared execution cases' inputs for the AOT tests (tests/aot.rs).

    python3 exec_inputs.py SHARED_EXEC_DIR OUT_DIR

For each case of SHARED_EXEC_DIR/cases.py: OUT_DIR/NAME/in.safetensors (and
weights.safetensors), with the cases' NAME.axes metadata, exactly as
run_exec.py writes them for `nax run`, and case.json (the function, the
host arguments, whether the case is a rejection)."""

import json
import os
import sys

exec_dir, out_dir = sys.argv[1], sys.argv[2]
sys.path.insert(0, exec_dir)
sys.dont_write_bytecode = True

import cases  # noqa: E402
from run_exec import write_tensors  # noqa: E402

for case in cases.CASES:
    d = os.path.join(out_dir, case.name)
    os.makedirs(d, exist_ok=True)
    inputs, weights = case.tensors()
    write_tensors(os.path.join(d, "in.safetensors"), inputs, case.axes)
    if weights:
        write_tensors(os.path.join(d, "weights.safetensors"), weights, case.axes)
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump({"fn": case.fn, "args": case.args, "reject": case.reject}, f)
