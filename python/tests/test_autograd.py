"""PyTorch's autograd through nax functions (LANGUAGE.md section 15): a
nax function called on tensors that require a gradient gives torch
tensors whose backward runs nax's compiled backward function; a torch
model with a nax block trains as the same model written in torch."""

import numpy as np
import pytest

import nax

BLOCK = """
def block(x: [b d], w: [d e], g: [e]) -> [b e] {
    h = x @ w
    return g * h * rsqrt(mean(h * h, e) + 1e-5) + tanh(h)
}

def pair(x: [b d], w: [d e]) -> (h: [b e], top: Int[b]) {
    h = relu(x @ w)
    return h, argmax(h, e)
}
"""


def torch_block(torch, x, w, g):
    h = x @ w
    return g * h * torch.rsqrt((h * h).mean(-1, keepdim=True) + 1e-5) + torch.tanh(h)


def test_gradients_flow_back_through_a_nax_function(torch):
    m = nax.compile(BLOCK)
    torch.manual_seed(0)
    x, w, g = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True), torch.randn(5)
    y = m.block(x, w, g)
    assert isinstance(y, torch.Tensor) and y.requires_grad
    dy = torch.randn(3, 5)
    (y * dy).sum().backward()
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    (torch_block(torch, x2, w2, g) * dy).sum().backward()
    assert torch.allclose(y, torch_block(torch, x, w, g), rtol=1e-5, atol=1e-6)
    assert torch.allclose(x.grad, x2.grad, rtol=1e-4, atol=1e-5)
    assert torch.allclose(w.grad, w2.grad, rtol=1e-4, atol=1e-5)
    assert g.grad is None


def test_several_results_and_an_integer_one(torch):
    m = nax.compile(BLOCK)
    x, w = torch.randn(2, 4, requires_grad=True), torch.randn(4, 3)
    out = m.pair(x, w=w)
    assert out._fields == ("h", "top") and out.top.dtype == torch.int64 and not out.top.requires_grad
    out.h.sum().backward()
    want = (torch.relu(x @ w) > 0).float() @ w.t()
    assert torch.allclose(x.grad, want, rtol=1e-5, atol=1e-6)


def test_the_backward_function_by_hand(torch):
    m = nax.compile(BLOCK)
    back = m.block.backward("x", "w")
    assert "d_result" in back.signature and "d_x" in back.signature
    x, w, g, dy = (np.random.default_rng(1).standard_normal(s).astype(np.float32) for s in ((3, 4), (4, 5), (5,), (3, 5)))
    value, d_x, d_w = back(x, w, g, dy)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    total = (torch_block(torch, xt, wt, torch.tensor(g)) * torch.tensor(dy)).sum()
    total.backward()
    assert np.allclose(np.asarray(value), total.item(), rtol=1e-5)
    assert np.allclose(np.asarray(d_x), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    assert np.allclose(np.asarray(d_w), wt.grad.numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(nax.Error, match="no backward function of `pair`: `top`|neither a parameter"):
        m.pair.backward("top")


def test_a_torch_model_with_a_nax_block_trains_as_the_torch_model(torch):
    m = nax.compile(BLOCK)

    class Model(torch.nn.Module):
        def __init__(self, use_nax):
            super().__init__()
            torch.manual_seed(3)
            self.inp = torch.nn.Linear(6, 4)
            self.w = torch.nn.Parameter(torch.randn(4, 5) * 0.5)
            self.g = torch.nn.Parameter(torch.ones(5))
            self.out = torch.nn.Linear(5, 2)
            self.use_nax = use_nax

        def forward(self, x):
            h = self.inp(x)
            h = m.block(h, self.w, self.g) if self.use_nax else torch_block(torch, h, self.w, self.g)
            return self.out(h)

    def train(use_nax):
        model = Model(use_nax)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        data = torch.Generator().manual_seed(7)
        for _ in range(10):
            x = torch.randn(8, 6, generator=data)
            target = torch.randn(8, 2, generator=data)
            optimizer.zero_grad()
            loss = ((model(x) - target) ** 2).mean()
            loss.backward()
            optimizer.step()
        return model

    with_nax, pure = train(True), train(False)
    for (name, a), (_, b) in zip(with_nax.named_parameters(), pure.named_parameters()):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-5), name
