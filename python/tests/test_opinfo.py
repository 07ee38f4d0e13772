"""The importer against PyTorch's own operator tests: the OpInfo database
(`torch.testing._internal.common_methods_invocations.op_db`, importable
with the `expecttest` package). Each sample input of an operator (f32,
f64, bf16, f16, int64 and bool; at most `SAMPLES` per dtype) is exported by
`torch.export`, imported by `nax.from_torch`, compiled on the interpreter
and llvm, and compared with PyTorch.

What must hold:

* over the whole database, no wrong answer (a float32 result off
  torch's by more than the tolerance is still right where it is as near
  the value computed in f64 as torch's: `nearer_than_torch`), and the importer either
  writes a program or refuses with `nax.UnsupportedOperator`;
* the book's table of the Core ATen operators (`docs/src/importer.md`)
  names every Core ATen operator once; an operator it calls covered
  passes every sample of the OpInfo tests it names, one covered partly
  passes some (the others refused, as the table says why).
"""

import collections
import pathlib
import re
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the importer's OpInfo sweep is skipped")
pytest.importorskip("expecttest", reason="expecttest is not installed: PyTorch's OpInfo database cannot be imported")

import nax  # noqa: E402
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

BOOK = pathlib.Path(__file__).resolve().parents[2] / "docs" / "src" / "importer.md"
DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.bool)
SAMPLES = 6
BACKENDS = ("interp", "llvm")
# Operators whose values torch leaves unspecified (only their shapes compare).
UNSPECIFIED = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"}


class Call(torch.nn.Module):
    """One sample as a module: its tensors are the arguments, the rest constants."""

    def __init__(self, op, sample):
        super().__init__()
        self.op, self.sample = op, sample

    def forward(self, *tensors):
        given = iter(tensors)

        def swap(value):
            if isinstance(value, torch.Tensor):
                return next(given)
            if isinstance(value, (list, tuple)):
                return type(value)(swap(v) for v in value)
            return value

        args = [swap(a) for a in (self.sample.input, *self.sample.args)]
        return self.op(*args, **{k: swap(v) for k, v in self.sample.kwargs.items()})


def tensors_of(sample) -> list:
    found = []

    def visit(value):
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v)

    for value in (sample.input, *sample.args, *sample.kwargs.values()):
        visit(value)
    return found


def tolerance(dtype) -> float:
    """Relative, and at the result's scale: 1e-5 in f32, 1e-10 in f64, four
    units of a half float's rounding (both sides round once from f32)."""
    if dtype in (torch.bfloat16, torch.float16):
        return 4 * torch.finfo(dtype).eps
    return 1e-10 if dtype == torch.float64 else 1e-5


def outcome(info, sample, dtype) -> tuple:
    """What one sample gives: `pass`, `refused` (the importer's reason),
    `not exported` (PyTorch's export or its own run fails), `invalid` (the
    importer wrote a program nax rejects), `crash` or `wrong`, with a note."""
    tensors = tensors_of(sample)
    if any(t.dtype not in DTYPES or t.layout != torch.strided for t in tensors):
        return "not exported", "a dtype nax has no kind for"
    module = Call(info.op, sample).eval()
    try:
        want = module(*tensors)
        program = torch.export.export(module, tuple(tensors), strict=False)
    except Exception as error:  # noqa: BLE001 - PyTorch's own refusals
        return "not exported", type(error).__name__
    if not isinstance(want, torch.Tensor) or want.dtype not in DTYPES or want.layout != torch.strided:
        return "not exported", "a result nax has no kind for (or a sparse one)"
    try:
        imported = nax.from_torch(program)
    except nax.UnsupportedOperator as error:
        return "refused", str(error)
    except Exception as error:  # noqa: BLE001 - any other exception is the importer's bug
        return "crash", f"{type(error).__name__}: {error}"
    expected = want.detach().float().numpy() if want.dtype in (torch.bfloat16, torch.float16) else want.detach().numpy()
    for backend in BACKENDS:
        try:
            result = torch.from_dlpack(imported.compile(backend=backend).forward(*tensors))
            got = (result.float() if result.dtype in (torch.bfloat16, torch.float16) else result).numpy()
        except nax.CompileError as error:
            return "invalid", f"{backend}: {str(error).splitlines()[0]}"
        except Exception as error:  # noqa: BLE001 - a compiled program must run
            return "crash", f"{backend}: {type(error).__name__}: {error}"
        if got.shape != expected.shape and got.size == expected.size:
            got = got.reshape(expected.shape)
        try:
            if info.name in UNSPECIFIED:
                # torch leaves the values unspecified: the shape is the answer.
                assert got.shape == expected.shape, f"shape {got.shape}, not {expected.shape}"
            elif expected.dtype == bool:
                np.testing.assert_array_equal(got, expected)
            else:
                finite = np.abs(expected[np.isfinite(expected)]) if expected.size else np.zeros(0)
                scale = max(1.0, float(finite.max())) if finite.size and dtype in (torch.bfloat16, torch.float16) else 1.0
                np.testing.assert_allclose(
                    got.astype(np.float64), expected.astype(np.float64), rtol=tolerance(dtype), atol=tolerance(dtype) * scale, equal_nan=True
                )
        except AssertionError as error:
            if not nearer_than_torch(module, tensors, got, expected, dtype):
                return "wrong", f"{backend} {dtype}: {str(error).strip().splitlines()[:4]}"
    return "pass", ""


def nearer_than_torch(module, tensors, got, expected, dtype) -> bool:
    """Whether nax's result (f32, bf16 or f16), off torch's by more than the
    tolerance, is as near the exact value (the module run in f64 on the
    same inputs) as torch's is: each element within twice torch's own
    error, or the tolerance at the result's scale. A sum of large terms
    that cancel (a convolution's) rounds differently in another order, and
    torch computes some half-precision operators in half precision
    throughout (grid sampling's positions): neither is nax's error."""
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return False
    try:
        exact = module(*[t.double() if t.dtype == dtype else t for t in tensors]).detach().numpy()
    except Exception:  # noqa: BLE001 - the operator has no f64 form: no exact value to compare with
        return False
    finite = np.abs(exact[np.isfinite(exact)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    ours, theirs = np.abs(got.astype(np.float64) - exact), np.abs(expected.astype(np.float64) - exact)
    same = (got == expected) | (np.isnan(got) & np.isnan(expected))
    return bool(np.all(same | (ours <= np.maximum(2 * theirs, tolerance(dtype) * scale))))


def sweep(info) -> collections.Counter:
    """Every sample of one OpInfo entry's supported dtypes: outcome counts, with notes."""
    counts, notes = collections.Counter(), collections.defaultdict(set)
    for dtype in DTYPES:
        if dtype not in info.supported_dtypes("cpu"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                samples = list(info.sample_inputs("cpu", dtype, requires_grad=False))[:SAMPLES]
            except Exception:  # noqa: BLE001 - PyTorch cannot make samples for it
                continue
            for sample in samples:
                kind, note = outcome(info, sample, dtype)
                counts[kind] += 1
                if note:
                    notes[kind].add(note[:300])
    return counts, notes


def full_name(info) -> str:
    return info.name + ("." + info.variant_test_name if info.variant_test_name else "")


@pytest.fixture(scope="module")
def results():
    """The sweep over the whole database, once."""
    return {full_name(info): sweep(info) for info in op_db}


def table() -> list:
    """The book's rows: (operator, status, OpInfo names, note)."""
    rows = []
    for line in BOOK.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| `") else None
        if cells and len(cells) == 4:
            operator = cells[0].strip("`")
            names = re.findall(r"`([^`]+)`", cells[2])
            rows.append((operator, cells[1], names, cells[3]))
    return rows


def test_no_sample_gives_a_wrong_answer_or_crashes_the_importer(results):
    failures = [
        f"{name}: {kind}: {sorted(notes[kind])[:2]}" for name, (counts, notes) in sorted(results.items()) for kind in ("wrong", "crash") if counts[kind]
    ]
    assert not failures, "\n".join(failures)
    assert sum(counts["pass"] for counts, _ in results.values()) > 1000


def core_aten() -> set:
    """The Core ATen operators (those with an overload tagged `core`), as
    registered once the OpInfo database is imported (exports register more)."""
    core = set()
    for name in dir(torch.ops.aten):
        packet = getattr(torch.ops.aten, name)
        if hasattr(packet, "overloads") and any(torch.Tag.core in getattr(packet, o).tags for o in packet.overloads()):
            core.add(name)
    return core


CORE = core_aten()


def test_the_book_lists_every_core_aten_operator_once():
    core = CORE
    listed = [operator for operator, _, _, _ in table()]
    assert sorted(set(listed)) == sorted(listed), "an operator is listed twice"
    assert set(listed) == core, f"missing: {sorted(core - set(listed))}; not Core ATen: {sorted(set(listed) - core)}"
    assert all(status in ("covered", "partly", "not yet", "not expressible") for _, status, _, _ in table())


def test_covered_operators_pass_their_opinfo_samples(results):
    failures = []
    for operator, status, names, note in table():
        if status not in ("covered", "partly"):
            continue
        # Without an OpInfo test, the note names the import that meets it.
        assert names or "test_importer.py" in note or "import" in note, f"{operator}: covered, but no test is named"
        for name in names:
            assert name in results, f"{operator}: no OpInfo test is named {name}"
            counts, notes = results[name]
            if counts["pass"] == 0:
                failures.append(f"{operator} ({name}): no sample passes: {dict(counts)} {dict(notes)}")
            elif status == "covered" and set(counts) - {"pass", "not exported"}:
                failures.append(f"{operator} ({name}): covered, but {dict(counts)}: {dict(notes)}")
    assert not failures, "\n".join(failures)
