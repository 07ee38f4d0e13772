"""Type stubs of nax's native module (re-exported by ``nax``)."""

import os
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

Label = Union[str, int]
ArrayLike = Any  # a numpy array, a torch tensor, any object with __dlpack__, or a nax.Tensor

class Error(ValueError):
    """nax refused a call, a tensor, a file or a library."""

class CollectiveError(Error):
    """A collective of a sharded function failed (a rank died, the engine timed out)."""

class CompileError(ValueError):
    """A program that does not check; ``str(e)`` is the rendered diagnostics."""

    diagnostics: list[dict[str, Any]]

class Tensor:
    """A tensor with a name or None per axis and optional coordinate labels."""

    __array_ufunc__: None

    def __init__(
        self,
        data: ArrayLike,
        names: Optional[Sequence[Optional[str]]] = None,
        coords: Optional[Mapping[str, Sequence[Label]]] = None,
    ) -> None: ...
    @property
    def names(self) -> Tuple[Optional[str], ...]: ...
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def coords(self) -> dict[str, Tuple[Label, ...]]: ...
    @property
    def offsets(self) -> Tuple[int, ...]:
        """Where a sharded function's result block starts in the whole result (zeros otherwise)."""
    @property
    def global_shape(self) -> Tuple[int, ...]:
        """The whole result's sizes for a sharded function's block (the shape otherwise)."""
    def numpy(self) -> Any: ...
    @staticmethod
    def from_xarray(array: Any) -> "Tensor": ...
    def to_xarray(self) -> Any: ...
    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> Any: ...
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    def __len__(self) -> int: ...
    def __add__(self, other: Any) -> "Tensor": ...
    def __radd__(self, other: Any) -> "Tensor": ...
    def __sub__(self, other: Any) -> "Tensor": ...
    def __rsub__(self, other: Any) -> "Tensor": ...
    def __mul__(self, other: Any) -> "Tensor": ...
    def __rmul__(self, other: Any) -> "Tensor": ...
    def __truediv__(self, other: Any) -> "Tensor": ...
    def __rtruediv__(self, other: Any) -> "Tensor": ...
    def __eq__(self, other: Any) -> "Tensor": ...  # type: ignore[override]
    def __ne__(self, other: Any) -> "Tensor": ...  # type: ignore[override]
    def __lt__(self, other: Any) -> "Tensor": ...
    def __le__(self, other: Any) -> "Tensor": ...
    def __gt__(self, other: Any) -> "Tensor": ...
    def __ge__(self, other: Any) -> "Tensor": ...

class Function:
    """A compiled function: call it with tensors and host scalars."""

    @property
    def name(self) -> str: ...
    @property
    def signature(self) -> str: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Tensor | tuple[Tensor, ...]:
        """The result, or a named tuple of several results (their declared names as fields).
        On torch tensors that require a gradient: torch tensors whose backward runs nax's."""
        ...
    def _call(self, *args: Any, **kwargs: Any) -> Tensor | tuple[Tensor, ...]: ...
    def backward(self, *names: str) -> "Function":
        """The backward function by these parameters or weights: called with the
        arguments and `d_RESULT` per float result, it returns `(value, d_NAME...)`."""
        ...
    @property
    def _parameters(self) -> list[str]: ...
    @property
    def _result_names(self) -> list[str]: ...
    @property
    def _result_gradients(self) -> list[Optional[str]]: ...

class ShardedFunction:
    """One rank's part of a function split over a mesh: every rank calls it with its blocks."""

    @property
    def name(self) -> str: ...
    @property
    def signature(self) -> str: ...
    @property
    def weight_bytes(self) -> int:
        """The bytes of the weights this rank holds: its blocks."""
    def __call__(self, *args: Any, **kwargs: Any) -> Tensor | tuple[Tensor, ...]: ...

class Module:
    """A compiled program: its functions as attributes and by subscript."""

    @property
    def functions(self) -> list[str]: ...
    @property
    def weight_packings(self) -> int:
        """How many times its products packed a weight (each once per binding)."""
    def with_weights(self, weights: Union[str, "os.PathLike[str]", dict[str, Any]]) -> "Module":
        """The same compiled program with these weights (no recompilation)."""
        ...
    def plan(self, name: str) -> str:
        """What `nax plan` prints for a function of a module compiled with a mesh."""
        ...
    def __getattr__(self, name: str) -> Function | ShardedFunction: ...
    def __getitem__(self, name: str) -> Function | ShardedFunction: ...

class LibraryFunction:
    """A function of an AOT library."""

    def __call__(self, *args: Any, **kwargs: Any) -> Tensor | tuple[Tensor, ...]:
        """The result, or a named tuple of several results (their declared names as fields)."""
        ...

class Library:
    """An AOT library opened with its weights."""

    @property
    def functions(self) -> list[str]: ...
    def __getattr__(self, name: str) -> LibraryFunction: ...
    def __getitem__(self, name: str) -> LibraryFunction: ...

def compile(
    source: Union[str, "os.PathLike[str]"],
    backend: str = "llvm",
    weights: Union[None, str, "os.PathLike[str]", Mapping[str, ArrayLike]] = None,
    threads: int = 0,
    optimize: bool = True,
    check_bounds: bool = False,
    mesh: Optional[Mapping[str, int]] = None,
    shard: Optional[Mapping[str, str]] = None,
    gather: bool = False,
    group: Any = None,
) -> Module: ...
def load(path: Union[str, "os.PathLike[str]"], weights: Union[None, str, "os.PathLike[str]"] = None, threads: int = 0) -> Library: ...
