"""The cost of one call from Python of a tiny compiled function (x + y on 8
float32), by timeit: numpy arguments positionally and by keyword, and
nax.Tensor arguments, beside numpy's own `np.add` on the same arrays.

    python examples/python/overhead.py [CALLS]
"""

import sys
import timeit

import numpy as np

import nax

m = nax.compile("def add(x: [n], y: [n]) -> [n] {\n    return x + y\n}\n")
add = m.add
x, y = np.ones(8, np.float32), np.ones(8, np.float32)
tx, ty = nax.Tensor(x, names=("n",)), nax.Tensor(y, names=("n",))

if __name__ == "__main__":
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    for label, call in [
        ("add(x, y), numpy arrays", lambda: add(x, y)),
        ("add(x=x, y=y), numpy arrays", lambda: add(x=x, y=y)),
        ("add(tx, ty), nax.Tensors", lambda: add(tx, ty)),
        ("np.add(x, y), for scale", lambda: np.add(x, y)),
    ]:
        call()
        best = min(timeit.repeat(call, number=calls, repeat=5)) / calls
        print(f"{best * 1e6:7.2f} us  {label}")
