"""torch tensors in and out, without copies (skipped without PyTorch)."""

import numpy as np
import pytest

import nax

SOURCE = "def mix(x: [n d], y: [d]) -> [n d] {\n    return x * y + 1.0\n}\n"


def test_torch_tensors_of_any_layout_give_the_interpreters_result(torch):
    m, reference = nax.compile(SOURCE), nax.compile(SOURCE, backend="interp")
    base = torch.randn(6, 8)
    y = torch.randn(4)
    views = {
        "contiguous": base[:3, :4].contiguous(),
        "transposed": base[:4, :3].t(),
        "sliced": base[::2, 1:5],
        "offset": base[3:, 4:],
    }
    for label, x in views.items():
        want = np.asarray(reference.mix(x.contiguous().numpy(), y.numpy()))
        got = np.asarray(m.mix(x, y))
        assert np.allclose(got, want, rtol=1e-6), label


def test_results_go_to_torch_without_a_copy(torch):
    m = nax.compile(SOURCE)
    r = m.mix(torch.ones(2, 3), torch.ones(3))
    shared = torch.from_dlpack(r)
    assert shared.shape == (2, 3) and shared.dtype == torch.float32
    shared[0, 0] = 7.0
    assert np.asarray(r)[0, 0] == 7.0


def test_a_torch_tensor_of_another_dtype_is_refused_not_copied(torch):
    m = nax.compile(SOURCE)
    with pytest.raises(nax.Error, match="f32"):
        m.mix(torch.ones(2, 3, dtype=torch.float64), torch.ones(3))
    with pytest.raises(nax.Error, match="int16|no dtype"):
        m.mix(torch.ones(2, 3, dtype=torch.int16), torch.ones(3))


def test_named_torch_tensors(torch):
    a = nax.Tensor(torch.zeros(4, 2, 3), names=(None, "x", "y"))
    b = nax.Tensor(torch.arange(6).reshape(3, 2), names=("y", "x"))
    s = a + b
    assert s.names == (None, "x", "y") and s.dtype == "f32"
    assert np.asarray(s)[0].tolist() == [[0, 2, 4], [1, 3, 5]]
