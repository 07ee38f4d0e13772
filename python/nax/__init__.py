"""nax from Python: compile tensor programs with named axes and call them on
numpy arrays, torch tensors or any ``__dlpack__`` object, without copies.

    import nax, numpy as np
    m = nax.compile('def scale(x: [n d], s: float) -> [n d] {\\n    return x * s\\n}\\n')
    y = m.scale(np.ones((2, 3), np.float32), 2.0)   # a nax.Tensor
    np.asarray(y)                                   # shares y's memory

- ``nax.compile(source, backend="llvm", weights=None, threads=0, optimize=True)``
  checks and compiles a program (its text, or a path to a ``.nax`` file);
  its functions are attributes of the result (``m.f``, ``m["f"]``,
  ``m.functions``).
- ``nax.load(path, weights=None, threads=0)`` opens a library built by
  ``nax build --emit so``.
- ``nax.Tensor(data, names=None, coords=None)`` names a tensor's axes (and
  labels them); ``+ - * /`` and comparisons align operands by name
  (the host boundary's rules).
- ``nax.from_torch(module, args, dynamic_shapes=...)`` writes a PyTorch
  program (``torch.export``) as nax source with named axes (``nax.importer``).
- ``nax.compile(..., mesh={"tp": 2}, shard={"H": "tp"})`` splits every
  function over the processes of ``torch.distributed``'s group by axis
  name; ``module.plan("f")`` shows each rank's sizes and collectives.
- ``nax.CompileError`` (a program that does not check: ``.diagnostics``)
  and ``nax.Error`` (a bad call, tensor, file or library; a failed
  collective is ``nax.CollectiveError``) are ValueErrors.

The reference is the book's chapter "The Python package" (``docs/src/python.md``).
"""

from ._nax import CollectiveError, CompileError, Error, Function, Library, LibraryFunction, Module, ShardedFunction, Tensor, compile, load
from .importer import Imported, UnsupportedOperator, from_torch

__all__ = [
    "CollectiveError",
    "CompileError",
    "Error",
    "Function",
    "Imported",
    "Library",
    "LibraryFunction",
    "Module",
    "ShardedFunction",
    "Tensor",
    "UnsupportedOperator",
    "compile",
    "from_torch",
    "load",
]
