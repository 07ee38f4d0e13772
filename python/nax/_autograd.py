"""PyTorch's autograd through nax functions.

A nax function called on torch tensors that require a gradient (with
torch's gradients enabled) runs as a ``torch.autograd.Function``: its
forward is the nax call (the results are torch tensors sharing nax's
memory), and its backward is the function's backward function
(``Function.backward``, the language's ``grad`` of the sum of
each float result times its gradient), compiled once per function and set
of differentiated arguments. The backward recomputes the forward from the
saved arguments: nothing but the arguments is kept between the two.
"""

import collections

import torch


def _torch(value):
    """A nax result as a torch tensor, sharing its memory."""
    return torch.from_dlpack(value)


class _Call(torch.autograd.Function):
    @staticmethod
    def forward(ctx, function, names, wrt, *values):
        ctx.function, ctx.names, ctx.wrt = function, names, wrt
        tensors = [(i, v) for i, v in enumerate(values) if isinstance(v, torch.Tensor)]
        ctx.save_for_backward(*[v for _, v in tensors])
        ctx.tensor_positions = [i for i, _ in tensors]
        ctx.others = [None if isinstance(v, torch.Tensor) else v for v in values]
        plain = {n: (v.detach() if isinstance(v, torch.Tensor) else v) for n, v in zip(names, values)}
        result = function._call(**plain)
        several = isinstance(result, tuple)
        ctx.result_type = type(result) if several else None
        outputs = tuple(_torch(r) for r in result) if several else (_torch(result),)
        gradients = function._result_gradients
        ctx.mark_non_differentiable(*[o for o, g in zip(outputs, gradients) if g is None])
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        values = list(ctx.others)
        for i, t in zip(ctx.tensor_positions, ctx.saved_tensors):
            values[i] = t.detach()
        arguments = dict(zip(ctx.names, values))
        for name, g in zip(ctx.function._result_gradients, grads):
            if name is not None:
                arguments[name] = g.contiguous()
        backward = ctx.function.backward(*ctx.wrt)
        derivatives = backward._call(**arguments)
        by_name = {name: _torch(getattr(derivatives, f"d_{name}")) for name in ctx.wrt}
        return (None, None, None, *[by_name.get(n) for n in ctx.names])


def call(function, args, kwargs):
    """Calls ``function`` through autograd: its results as torch tensors
    (a named tuple of them for several results) whose gradients flow back
    to the arguments that require one."""
    params = function._parameters
    if len(args) > len(params):
        return function._call(*args, **(kwargs or {}))
    bound = dict(zip(params, args))
    bound.update(kwargs or {})
    names = tuple(bound)
    wrt = tuple(n for n in names if isinstance(bound[n], torch.Tensor) and bound[n].requires_grad and bound[n].is_floating_point())
    outputs = _Call.apply(function, names, wrt, *bound.values())
    if len(outputs) == 1 and len(function._result_gradients) == 1:
        return outputs[0]
    results = collections.namedtuple(f"{function.name}_results", function._result_names, rename=True)
    return results(*outputs)
