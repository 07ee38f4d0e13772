"""PyTorch programs as nax source with named axes (``nax.from_torch``).

    imported = nax.from_torch(model, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    print(imported.source)          # the nax program, every axis named
    m = imported.compile()          # as nax.compile, with the module's weights
    imported.save("out/")           # out/model.nax and out/weights.safetensors

The module is exported with ``torch.export`` (or an ``ExportedProgram`` is
taken as it is), and its ATen graph is written as one nax function,
``forward``, one statement per operation, named after the graph's nodes.

Names, not numbers: a dynamic dim is named as its ``torch.export.Dim``; a
static size N is ``dN`` (``d768``), the same name wherever that size
stands, so that equal axes line up by name as torch lines them up by
position; a second axis of the same size in one tensor is ``dN_2`` (then
``_3``...). ``axis_names`` renames sizes: ``{768: "D", 3072: "F"}`` (a
static size) or ``{"batch": "b"}`` (a dim). Each parameter and buffer is a
``param`` named after its state-dict name (``fc1.weight`` is
``fc1_weight``). A program loaded from a file (``torch.export.load``)
keeps no ``Dim`` names: its dynamic dims are named by their symbols
(``s0``) unless ``axis_names`` names them. An operator this importer
cannot write is an
``UnsupportedOperator`` naming the ATen operator, the node, and the line of
the module's source that made it.

An axis of size 1 is absent from the nax value (a parameter's or an
argument's is dropped at once, a result's restored at the end), so that
broadcasting by name does what torch's broadcasting does by position.

A program of several outputs is a function of several results, named
after the graph's nodes. Weights keep their
dtype (f32, f16, bf16): a half-precision model computes in it, as
PyTorch does, and its conversions are nax's (`float(x)`, `bf16(x)`,
`f16(x)`: Llama's RMSNorm computes in f32 between two).

Which operators it writes: the book's "Importing PyTorch: the operators"
(docs/src/importer.md) lists every operator of PyTorch's Core ATen set as
covered, covered partly (which arguments not), not yet, or not expressible
(why), each checked on PyTorch's own OpInfo samples
(python/tests/test_opinfo.py). Hugging Face's GPT-2, Llama, BERT,
GPT-NeoX, GPT-J, OPT, Falcon, T5's encoder, ResNet, ConvNeXt, ViT,
Whisper's encoder, SegFormer, Wav2Vec2 and Swin import whole. Arguments of a
form an operator's writer does not know are refused the same way, never a
traceback from inside the importer. An operator the language has no word
for is written as what it computes, exactly, whatever it costs: a scatter
as a mask of the written positions, a sort as ranks by comparison, a
convolution or a pool as its taps (nax/_windows.py, and the writes by
position in nax/_writes.py).
"""

from __future__ import annotations

import functools
import math
import operator
import os
import re

from ._windows import WindowWriter
from ._writes import PositionWriter

# Elementwise ATen operators written as one nax expression of their
# operand (`{0}`), in any float dtype (masks converted as torch promotes them).
_UNARY = {
    "silu": "silu({})",
    "sigmoid": "sigmoid({})",
    "tanh": "tanh({})",
    "exp": "exp({})",
    "rsqrt": "rsqrt({})",
    "sqrt": "sqrt({})",
    "cos": "cos({})",
    "sin": "sin({})",
    "neg": "-{}",
    "log": "log({})",
    "log1p": "log1p({})",
    "expm1": "expm1({})",
    "erf": "erf({})",
    "log2": "log({}) * 1.4426950408889634",
    "log10": "log({}) * 0.4342944819032518",
    "sinh": "0.5 * (expm1({0}) - expm1(-{0}))",
    "cosh": "0.5 * (exp({0}) + exp(-{0}))",
    "tan": "sin({0}) / cos({0})",
    "isnan": "{0} != {0}",
}

_KEYWORDS = {"dim", "param", "def", "return", "and", "or", "as", "for", "in", "yield", "inf", "true", "false"}


class UnsupportedOperator(ValueError):
    """An ATen operator the importer cannot write as nax (the message names
    the operator, the graph node and the module's source line)."""


class Imported:
    """A PyTorch program as nax source, with its weights."""

    def __init__(self, source: str, weights: dict, function: str):
        self.source = source
        """The nax program."""
        self.weights = weights
        """The module's parameters and buffers by their nax names (torch tensors)."""
        self.function = function
        """The name of the nax function the module's forward became."""

    def compile(self, **options):
        """``nax.compile(self.source, weights=self.weights, **options)``."""
        from . import compile as compile_source

        return compile_source(self.source, weights=self.weights, **options)

    def save(self, directory) -> None:
        """Writes ``model.nax`` and ``weights.safetensors`` into ``directory``
        (made if absent), ready for ``nax run`` and ``nax build``."""
        from safetensors.torch import save_file

        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "model.nax"), "w") as f:
            f.write(self.source)
        # Tied weights (a shared embedding and head) are written apart.
        tensors, seen = {}, set()
        for name, tensor in self.weights.items():
            shared = tensor.untyped_storage().data_ptr() in seen
            seen.add(tensor.untyped_storage().data_ptr())
            tensors[name] = tensor.clone() if shared else tensor
        save_file(tensors, os.path.join(directory, "weights.safetensors"))


def from_torch(module, args=(), kwargs=None, dynamic_shapes=None, axis_names=None) -> Imported:
    """Exports ``module`` with ``torch.export`` (an ``ExportedProgram`` is
    taken as given) and writes it as nax source with named axes."""
    import torch

    if isinstance(module, torch.export.ExportedProgram):
        program = module
    else:
        program = torch.export.export(module, tuple(args), kwargs=kwargs, dynamic_shapes=dynamic_shapes, strict=False)
    return _Writer(program, dynamic_shapes, axis_names or {}).write()


def identifier(name: str) -> str:
    """A nax identifier for a state-dict or node name."""
    ident = re.sub(r"\W", "_", name)
    if not ident or ident[0].isdigit():
        ident = "v_" + ident
    return ident + "_" if ident in _KEYWORDS else ident


class _Writer(WindowWriter, PositionWriter):
    def __init__(self, program, dynamic_shapes, axis_names):
        self.program = program
        self.axis_names = axis_names
        self.dims = {}  # static size -> its name
        self.declared = {}  # dim name -> static size: every name a static size has
        self.symbols = {}  # sympy symbol text -> dim name
        self.axes = {}  # node name -> axis names
        self.kinds = {}  # node name -> nax kind, where not plain (softmax's Prob(a))
        self.splits = {}  # a split's node name -> (its operand, axis, [(start, stop)])
        self.pairs = {}  # a node of two results (max over a dim) -> each one's (value, axes)
        self.aranges = {}  # node name -> the axis whose positions it holds (arange, unsqueezed, plus 0; None: of size 1)
        self.derived = {}  # `seq_2` -> `seq`: a second name for a size
        self.scoped = set()  # axis names the body has bound so far
        self.values = {}  # node name -> nax expression (a name, or a literal)
        self.lines = []
        self.names = set()
        self._name_dynamic_dims(dynamic_shapes)

    # ---- names ------------------------------------------------------------

    def _name_dynamic_dims(self, dynamic_shapes):
        """Each dynamic dim's symbol gets its ``Dim``'s name."""
        if not dynamic_shapes:
            return
        placeholders = {n.name: n for n in self.program.graph.nodes if n.op == "placeholder"}
        specs = dynamic_shapes.items() if isinstance(dynamic_shapes, dict) else []
        for arg, spec in specs:
            node = placeholders.get(arg)
            if node is None or not isinstance(spec, dict):
                continue
            shape = node.meta["val"].shape
            for position, dim in spec.items():
                size = shape[position]
                if hasattr(size, "node") and getattr(dim, "__name__", None):
                    name = self.axis_names.get(dim.__name__, dim.__name__)
                    self.symbols.setdefault(str(size.node.expr), identifier(name))

    def size_name(self, size) -> str:
        """The name of one size: a dynamic dim's, a product's (its factors'
        names joined: ``batch_seq``), or ``dN``."""
        if hasattr(size, "node"):
            expr = size.node.expr
            text = str(expr)
            if text not in self.symbols:
                if expr.is_Mul and all(f.is_Symbol or f.is_Integer for f in expr.args):
                    factors = [self.size_name(int(f)) if f.is_Integer else self.symbols.setdefault(str(f), identifier(str(f))) for f in expr.args]
                    self.symbols[text] = "_".join(factors)
                elif not re.fullmatch(r"\w+", text):
                    raise UnsupportedOperator(f"a size computed from dynamic dims ({text}) has no name yet")
                else:
                    self.symbols[text] = identifier(self.axis_names.get(text, text))
            return self.symbols[text]
        size = int(size)
        if size not in self.dims:
            self.dims[size] = identifier(str(self.axis_names.get(size, f"d{size}")))
            self.declared[self.dims[size]] = size
        return self.dims[size]

    def axes_of(self, shape) -> list:
        """The canonical names of a shape's axes: a size's name, with
        ``_2``, ``_3``... for its later axes in the same tensor; ``None`` for
        an axis of size 1, which the nax value does not have (nax's
        broadcasting by name then does what torch's does by position)."""
        names = []
        for size in shape:
            if not hasattr(size, "node") and int(size) == 1:
                names.append(None)
                continue
            base = self.size_name(size)
            name, k = base, 1
            while name in names:
                k += 1
                name = f"{base}_{k}"
            if base in self.declared:
                self.declared[name] = self.declared[base]
            elif name != base:
                self.derived[name] = base
            names.append(name)
        return names

    def fresh(self, want: str) -> str:
        name, k = identifier(want), 1
        while name in self.names:
            k += 1
            name = f"{identifier(want)}_{k}"
        self.names.add(name)
        return name

    # ---- the program -------------------------------------------------------

    def write(self) -> Imported:
        signature = self.program.graph_signature
        state = {**self.program.state_dict, **getattr(self.program, "constants", {})}
        params, inputs, weights = [], [], {}
        for spec in signature.input_specs:
            node = next(n for n in self.program.graph.nodes if n.op == "placeholder" and n.name == spec.arg.name)
            value = node.meta["val"]
            if str(getattr(value, "layout", "torch.strided")) != "torch.strided":
                raise UnsupportedOperator(f"the argument `{spec.arg.name}` is a {value.layout} tensor: nax's tensors are dense")
            axes = self.axes_of(value.shape)
            kind = _kind(value.dtype)
            declared = " ".join(a or "1" for a in axes)
            if spec.target is not None:
                name = self.fresh(spec.target)
                weights[name] = state[spec.target].detach().contiguous()
                params.append(f"param {name}: {kind}[{declared}]")
            else:
                name = self.fresh(spec.arg.name)
                inputs.append(f"{name}: {kind}[{declared}]")
            if None in axes:
                # Axes of size 1 go at once (see `axes_of`).
                squeezed = self.fresh(name + "_squeezed")
                self.lines.append(f"{squeezed} = rearrange({name}, {declared} -> {' '.join(present(axes))})")
                name = squeezed
            self.values[node.name], self.axes[node.name] = name, axes
            self.scoped.update(present(axes))
        outputs = []
        for node in self.program.graph.nodes:
            if node.op == "call_function":
                self.operation(node)
            elif node.op == "output":
                outputs = list(node.args[0])
        if not outputs:
            raise UnsupportedOperator("the program returns nothing")
        types, returned = [], []
        for result in outputs:
            if not hasattr(result, "name") or result.name not in self.values:
                raise UnsupportedOperator(f"the program returns {result!r}, which is not a tensor it computes")
            kind = self.kinds.get(result.name, _kind(result.meta["val"].dtype))
            axes = self.axes[result.name]
            declared = " ".join(a or "1" for a in axes)
            types.append(f"{kind}[{declared}]")
            value = self.values[result.name]
            returned.append(f"rearrange({value}, {' '.join(present(axes))} -> {declared})" if None in axes else value)
        if len(outputs) == 1:
            result_type = types[0]
        else:
            # Several results (LANGUAGE.md section 14), named after their nodes.
            names = []
            for r in outputs:
                name = identifier(r.name)
                while name in names:
                    name += "_again"
                names.append(name)
            result_type = "(" + ", ".join(f"{n}: {t}" for n, t in zip(names, types)) + ")"
        returned = ", ".join(returned)
        dims = [f"dim {name} = {size}" for name, size in sorted(self.declared.items(), key=lambda item: (item[1], item[0]))]
        header = "# Imported from torch.export by nax.from_torch.\n"
        body = "".join(f"    {line}\n" for line in self.lines)
        function = "forward"
        source = (
            header
            + "\n".join(dims + [""] + params + [""])
            + f"\ndef {function}({', '.join(inputs)}) -> {result_type} {{\n{body}    return {returned}\n}}\n"
        )
        return Imported(source, weights, function)

    # ---- operations ----------------------------------------------------------

    def operation(self, node):
        target = node.target
        name = getattr(target, "__name__", str(target))
        op = name.split(".")[0]
        handler = getattr(self, "op_" + op, None)
        if handler is None and op.endswith("_copy"):
            # `t_copy`, `view_copy`...: a functional program's views are copies.
            handler = getattr(self, "op_" + op.removesuffix("_copy"), None)
        if handler is None and op in _UNARY:
            handler = lambda node: self.unary(node, _UNARY[op])  # noqa: E731
        value = node.meta.get("val")
        if str(getattr(value, "layout", "torch.strided")) != "torch.strided":
            self.unsupported(node, name, f"a {value.layout} result: nax's tensors are dense")
        shape = getattr(value, "shape", None)
        if shape is not None and 0 in [s for s in shape if not hasattr(s, "node")]:
            # An empty result, whatever the operator: of its shape, no elements.
            handler = lambda node: self.constructed(node, "zeros")  # noqa: E731
        if handler is None:
            self.unsupported(node, name)
        try:
            handler(node)
        except (TypeError, ValueError, IndexError, KeyError, ZeroDivisionError, AttributeError) as error:
            if isinstance(error, UnsupportedOperator):
                raise
            # Arguments of a form the handler does not know: a clean refusal
            # naming the operator, not a traceback from inside the importer.
            self.unsupported(node, name, f"the importer cannot write this form of it ({type(error).__name__}: {error})")

    def unsupported(self, node, name, why="nax.from_torch does not support it yet"):
        trace = (node.meta.get("stack_trace") or "").strip().splitlines()
        where = next((line.strip() for line in reversed(trace) if line.strip().startswith("File ")), "an unknown place")
        raise UnsupportedOperator(f"aten.{name} (node `{node.name}`, from {where}): {why}")

    def bind(self, node, expr: str, natural: list):
        """Binds a node's value, its axes renamed to the canonical names of
        its shape where nax's differ."""
        axes = self.axes_of(node.meta["val"].shape)
        if present(natural) != present(axes):
            expr = f"({expr}) as [{' '.join(present(axes))}]"
        name = self.fresh(node.name)
        self.lines.append(f"{name} = {expr}")
        self.values[node.name], self.axes[node.name] = name, axes
        self.scoped.update(present(axes))

    def operand(self, arg):
        """An argument's expression and axes (a number: no axes)."""
        if hasattr(arg, "name") and arg.name in self.values:
            return self.values[arg.name], self.axes[arg.name]
        if isinstance(arg, bool):
            return ("true" if arg else "false"), None
        if isinstance(arg, int):
            return str(arg), None
        if isinstance(arg, float):
            return repr(arg), None
        raise UnsupportedOperator(f"an argument {arg!r} nax.from_torch cannot read")

    def identity(self, node, arg=0):
        source = node.args[arg]
        value, axes = self.operand(source)
        self.values[node.name], self.axes[node.name] = value, axes
        if source.name in self.aranges:
            self.aranges[node.name] = self.aranges[source.name]
        if node.args[0].name in self.kinds:
            self.kinds[node.name] = self.kinds[node.args[0].name]

    op_contiguous = op_clone = op_alias = op_detach = op_detach_ = op_lift_fresh = identity

    def op_dropout(self, node):
        """The identity of an evaluation; dropout in training is random."""
        p = node.args[1] if len(node.args) > 1 else node.kwargs.get("p", 0.5)
        train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train", False)
        if train and p:
            self.unsupported(node, "dropout", "dropout in training draws random numbers, which nax's functions do not")
        self.identity(node)

    def unary(self, node, template):
        value, axes = self.operand(node.args[0])
        self.bind(node, template.format(self.numeric(node, node.args[0], value)), axes)

    def in_double(self, node, formula):
        """`formula(x, axes)` of the operand (held once as `x`), computed in
        f64 and rounded once to the result's dtype: a formula of several
        steps rounds at each, and in f64 those roundings are far below the
        result's (the inverse trigonometric and hyperbolic functions, the
        language has no built-ins for, land within an ulp of f32's)."""
        value, axes = self.operand(node.args[0])
        value = self.numeric(node, node.args[0], value)
        kind = _kind(node.meta["val"].dtype)
        value = self.held(f"{node.name}_operand", value if kind == "f64" else f"f64({value})", present(axes or []))
        expr = formula(value, present(axes or []))
        self.bind(node, expr if kind == "f64" else f"{_float_kind(node)}({expr})", axes)

    def op_atanh(self, node):
        """`atanh(x) = sign(x) * log1p(2|x| / (1 - |x|)) / 2` (1 - |x| exact
        near 1, log1p exact near 0); below 1e-9, x itself (-0 stays -0)."""
        self.in_double(node, lambda x, _: f"where(abs({x}) < 1e-9, {x}, sign({x}) * 0.5 * log1p(2.0 * abs({x}) / (1.0 - abs({x}))))")

    def op_asinh(self, node):
        """`asinh(x) = sign(x) * log1p(|x| + x^2 / (1 + sqrt(1 + x^2)))`; past
        2^28 (where x^2 would lose or overflow), log|x| + log 2; below 1e-9,
        x itself."""
        self.in_double(
            node,
            lambda x, _: f"where(abs({x}) < 1e-9, {x}, sign({x}) * where(abs({x}) > 268435456.0, log(abs({x})) + 0.6931471805599453, "
            f"log1p(abs({x}) + {x} * {x} / (1.0 + sqrt(1.0 + {x} * {x})))))",
        )

    def arctangent(self, node, x, axes) -> str:
        """atan of `x` (an f64 name), Cephes's: |x| reduced to [0, 0.66]
        (above tan(3pi/8), pi/2 - atan(1/|x|); above 0.66, pi/4 +
        atan((|x| - 1) / (|x| + 1))), then a rational function, the bits of
        pi/2 and pi/4 below their rounding added to the small part, the
        sign restored (x itself below 1e-9)."""
        big, mid, more = 2.414213562373095, 0.66, 6.123233995736765886130e-17
        a = self.held(f"{node.name}_magnitude", f"abs({x})", axes)
        reduced = self.held(f"{node.name}_reduced", f"where({a} > {big!r}, -1.0 / {a}, where({a} > {mid!r}, ({a} - 1.0) / ({a} + 1.0), {a}))", axes)
        z = self.held(f"{node.name}_square", f"{reduced} * {reduced}", axes)
        p = [-8.750608600031904122785e-1, -1.615753718733365076637e1, -7.500855792314704667340e1, -1.228866684490136173410e2, -6.485021904942025371773e1]
        q = [2.485846490142306297962e1, 1.650270098316988542046e2, 4.328810604912902668951e2, 4.853903996359136964868e2, 1.945506571482613964425e2]
        numerator = f"(((({p[0]!r} * {z} + {p[1]!r}) * {z} + {p[2]!r}) * {z} + {p[3]!r}) * {z} + {p[4]!r})"
        denominator = f"((((({z} + {q[0]!r}) * {z} + {q[1]!r}) * {z} + {q[2]!r}) * {z} + {q[3]!r}) * {z} + {q[4]!r})"

        constant = _f64
        series = f"{reduced} * ({z} * {numerator} / {denominator}) + {reduced}"
        series = f"({series}) + where({a} > {big!r}, {constant(more)}, where({a} > {mid!r}, {constant(0.5 * more)}, {constant(0.0)}))"
        base = f"where({a} > {big!r}, {constant(1.5707963267948966)}, where({a} > {mid!r}, {constant(0.7853981633974483)}, {constant(0.0)}))"
        # Below 1e-9, atan(x) rounds to x (x^3/3 is below half its ulp): -0 stays -0.
        return f"where(abs({x}) < 1e-9, {x}, sign({x}) * ({base} + ({series})))"

    def op_atan(self, node):
        self.in_double(node, lambda x, axes: self.arctangent(node, x, axes))

    def op_asin(self, node):
        """`asin(x) = atan(x / sqrt((1 - x)(1 + x)))` (1 - x exact near 1)."""
        self.in_double(node, lambda x, axes: self.arctangent(node, self.held(f"{node.name}_ratio", f"{x} / sqrt((1.0 - {x}) * (1.0 + {x}))", axes), axes))

    def op_acos(self, node):
        """`acos(x) = 2 atan(sqrt((1 - x) / (1 + x)))`."""
        self.in_double(node, lambda x, axes: f"2.0 * ({self.arctangent(node, self.held(f'{node.name}_ratio', f'sqrt((1.0 - {x}) / (1.0 + {x}))', axes), axes)})")

    def op_atan2(self, node):
        """`atan2(y, x)`: atan(y / x), plus pi toward y's sign where x < 0
        (y's sign bit: -0 counts, as C's atan2); both zero, 0 or pi by x's
        sign bit; both infinite, pi/4 or 3pi/4. In f64, rounded once."""
        out, [(y, _), (x, _)] = self.aligned(node, node.args[:2])
        axes = present(out)
        kind = _kind(node.meta["val"].dtype)
        y, x = (self.held(f"{node.name}_{role}", f"f64({self.numeric(node, arg, v)})", axes) for role, v, arg in (("y", y, node.args[0]), ("x", x, node.args[1])))
        quotient = self.held(f"{node.name}_quotient", f"{y} / {x}", axes)
        angle = self.held(f"{node.name}_angle", self.arctangent(node, quotient, axes), axes)

        constant = _f64
        below = f"({y} < 0.0 or ({y} == 0.0 and 1.0 / {y} < 0.0))"
        left = f"({x} < 0.0 or ({x} == 0.0 and 1.0 / {x} < 0.0))"
        half_turn = f"where({below}, {constant(-math.pi)}, {constant(math.pi)})"
        value = f"where({x} < 0.0, {angle} + {half_turn}, {angle})"
        # x zero (of either sign) and y not: a quarter turn toward y.
        value = f"where({x} == 0.0 and ({y} < 0.0 or {y} > 0.0), where({below}, {constant(-math.pi / 2)}, {constant(math.pi / 2)}), {value})"
        value = f"where({y} == 0.0 and {x} == 0.0, where({left}, {half_turn}, {y}), {value})"
        corner = f"where({x} > 0.0, {constant(math.pi / 4)}, {constant(3 * math.pi / 4)})"
        value = f"where(abs({y}) == inf and abs({x}) == inf, where({below}, -{corner}, {corner}), {value})"
        self.bind(node, value if kind == "f64" else f"{_float_kind(node)}({value})", out)

    def op_acosh(self, node):
        """`acosh(x) = log1p(t + sqrt(2t + t^2))`, t = x - 1 (exact near 1);
        past 2^28, log x + log 2; below 1, nan (a square root of a negative)."""
        self.in_double(
            node,
            lambda x, _: f"where({x} > 268435456.0, log({x}) + 0.6931471805599453, log1p(({x} - 1.0) + sqrt(2.0 * ({x} - 1.0) + ({x} - 1.0) * ({x} - 1.0))))",
        )

    def converted(self, arg, value, dtype):
        """`value` (of node `arg`) in the float dtype `dtype`, where it is of another."""
        import torch

        functions = {torch.float32: "float", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64"}
        have = getattr(getattr(arg, "meta", {}).get("val"), "dtype", None)
        if have == dtype or dtype not in functions:
            return value
        return f"{functions[dtype]}({value})"

    def numeric(self, node, arg, value):
        """A mask operand of arithmetic as numbers of the result's dtype
        (torch promotes `True` to 1 and 1.0; nax's arithmetic takes no masks)."""
        if not self.is_mask(arg):
            return value
        result = str(node.meta["val"].dtype)
        if result == "torch.bool":
            return value
        return f"{'int' if result in ('torch.int64', 'torch.int32') else 'float'}({value})"

    def literal(self, node, value) -> str:
        """`value` as a literal of the node's result's category: an integer,
        a bool for masks, else a float."""
        if self.integral(node):
            return str(int(value))
        if str(node.meta["val"].dtype) == "torch.bool":
            return "true" if value else "false"
        return repr(float(value))

    def integral(self, node) -> bool:
        """Whether the node's result is an integer tensor (nax's built-ins
        but negation give Real; torch keeps the integer dtype)."""
        return str(node.meta["val"].dtype) in ("torch.int64", "torch.int32")

    def op_relu(self, node):
        self.unary(node, "maximum({}, 0)" if self.integral(node) else "relu({})")

    def op_abs(self, node):
        self.unary(node, "where({0} < 0, -{0}, {0})" if self.integral(node) else "abs({})")

    def op_floor(self, node):
        self.unary(node, "{}" if self.integral(node) else "floor({})")

    def op_ceil(self, node):
        self.unary(node, "{}" if self.integral(node) else "ceil({})")

    def op_round(self, node):
        """`round(x)`, half to even; to `decimals` as torch's: `round(x * 10^d) / 10^d`
        (for d below 0, `round(x / 10^-d) * 10^-d`)."""
        decimals = node.args[1] if len(node.args) > 1 else node.kwargs.get("decimals", 0)
        if self.integral(node) or not decimals:
            self.unary(node, "{}" if self.integral(node) else "round({})")
        else:
            scale = repr(10.0 ** abs(decimals))
            self.unary(node, f"round({{0}} * {scale}) / {scale}" if decimals > 0 else f"round({{0}} / {scale}) * {scale}")

    def op_sign(self, node):
        if str(node.meta["val"].dtype) == "torch.bool":
            self.identity(node)
        else:
            self.unary(node, "int(sign({}))" if self.integral(node) else "sign({})")

    def op_trunc(self, node):
        self.unary(node, "{}" if self.integral(node) else "where({0} < 0.0, ceil({0}), floor({0}))")

    def op_isinf(self, node):
        if self.is_float(node.args[0]):
            self.unary(node, "abs({}) == inf")
        else:
            self.unary(node, "{0} != {0}")

    def op_logical_not(self, node):
        self.unary(node, "!{}" if self.is_mask(node.args[0]) else "{} == 0")

    def op_bitwise_not(self, node):
        if not self.is_mask(node.args[0]):
            self.unsupported(node, "bitwise_not", "bitwise operators of integers are not in nax's language")
        self.unary(node, "!{}")

    def op_elu(self, node):
        alpha, scale, input_scale = (list(node.args[1:]) + [1.0, 1.0, 1.0])[:3]
        self.unary(node, f"{float(scale)!r} * where({{0}} > 0.0, {{0}}, {float(alpha)!r} * expm1({{0}} * {float(input_scale)!r}))")

    def op_leaky_relu(self, node):
        slope = node.args[1] if len(node.args) > 1 else 0.01
        self.unary(node, f"where({{0}} > 0.0, {{0}}, {float(slope)!r} * {{0}})")

    def op_hardtanh(self, node):
        low = node.args[1] if len(node.args) > 1 else -1.0
        high = node.args[2] if len(node.args) > 2 else 1.0
        self.unary(node, f"minimum(maximum({{}}, {self.literal(node, low)}), {self.literal(node, high)})")

    def is_mask(self, arg) -> bool:
        """Whether the argument is a bool tensor (not a number, nor a size)."""
        return str(getattr(getattr(arg, "meta", {}).get("val"), "dtype", None)) == "torch.bool"

    def is_float(self, arg) -> bool:
        dtype = getattr(getattr(arg, "meta", {}).get("val"), "dtype", None)
        return dtype is not None and dtype.is_floating_point

    def op_reciprocal(self, node):
        self.unary(node, "1.0 / {}")

    def op_softplus(self, node):
        beta = node.args[1] if len(node.args) > 1 else node.kwargs.get("beta", 1)
        threshold = node.args[2] if len(node.args) > 2 else node.kwargs.get("threshold", 20)
        if beta != 1 or threshold != 20:
            self.unsupported(node, "softplus", "a beta or threshold other than torch's defaults is not supported")
        self.unary(node, "softplus({})")

    def op_gelu(self, node):
        if node.kwargs.get("approximate", "none") == "tanh":
            self.unary(node, "0.5 * {0} * (1.0 + tanh(0.7978845608028654 * ({0} + 0.044715 * {0} * {0} * {0})))")
        else:
            self.unary(node, "gelu({})")

    def aligned(self, node, args):
        """Operands lined up with the result, as torch broadcasts them (from
        the right): each axis renamed to the result's name at its position;
        where no operand has every axis of the result and one's are not a
        prefix or suffix of the result's, the first is repeated to the
        result's axes, so nax's result keeps the canonical order."""
        out = self.axes_of(node.meta["val"].shape)
        full = present(out)
        operands = [self.lined_up(node, arg, out) for arg in args]
        known = [axes for _, axes in operands if axes is not None]
        ordered = any(axes == full for axes in known) and all(axes == full[: len(axes)] or axes == full[len(full) - len(axes) :] for axes in known)
        if known and not ordered:
            # The others first, as statements: their names are then sizes
            # in scope, which the repeat's new axes take.
            for k in range(1, len(operands)):
                value, axes = operands[k]
                if axes is not None and " as [" in value:
                    held = self.fresh(f"{node.name}_operand")
                    self.lines.append(f"{held} = {value}")
                    self.scoped.update(axes)
                    operands[k] = (held, axes)
            value, axes = operands[0]
            operands[0] = (self.repeat(value, axes or [], full), full)
        return out, operands

    def lined_up(self, node, arg, out) -> tuple:
        """`arg`'s value and axes, its axes renamed to those of `out` at
        their positions from the right (as torch broadcasts); a number as it is."""
        value, axes = self.operand(arg)
        if axes is None:
            return value, None
        at = len(out) - len(axes)
        names = [out[at + i] if at + i >= 0 else None for i, name in enumerate(axes) if name is not None]
        if None in names:
            self.unsupported(node, str(node.target), "an operand larger than the result along an axis")
        if names != present(axes):
            value = f"({value} as [{' '.join(names)}])"
        return value, names

    def binary(self, node, symbol):
        # Positions plus 0 are positions; a mask and `true` is the mask.
        second = node.args[1]
        neutral = (symbol == "+" and type(second) is int and second == 0) or (symbol == "and" and second is True)
        if neutral and hasattr(node.args[0], "name"):
            self.identity(node)
            return
        if symbol == "and":
            for k in (0, 1):
                if self.operand(node.args[k])[0] == "true" and hasattr(node.args[1 - k], "name"):
                    self.identity(node, 1 - k)
                    return
        out, [(a, _), (b, _)] = self.aligned(node, node.args[:2])
        if symbol in ("+", "-", "*", "/"):
            if str(node.meta["val"].dtype) == "torch.bool":
                # torch's sum and product of masks are their `or` and `and`.
                symbol = {"+": "or", "*": "and"}.get(symbol)
                if symbol is None:
                    self.unsupported(node, str(node.target), "subtracting or dividing masks is not defined")
            else:
                a, b = self.numeric(node, node.args[0], a), self.numeric(node, node.args[1], b)
        alpha = node.kwargs.get("alpha", 1)
        if alpha != 1:
            b = f"{float(alpha)!r} * {b}"
        self.bind(node, f"{a} {symbol} {b}", out)

    def op_eq(self, node):
        self.binary(node, "==")

    def op_ne(self, node):
        self.binary(node, "!=")

    def op_lt(self, node):
        self.binary(node, "<")

    def op_le(self, node):
        self.binary(node, "<=")

    def op_gt(self, node):
        self.binary(node, ">")

    def op_ge(self, node):
        self.binary(node, ">=")

    def op___and__(self, node):
        self.logical(node, "and")

    def op___or__(self, node):
        self.logical(node, "or")

    def logical(self, node, symbol):
        """`and`/`or` of masks (bitwise operators of integers have no nax form)."""
        if str(node.meta["val"].dtype) != "torch.bool":
            self.unsupported(node, str(node.target), "bitwise operators of integers are not in nax's language")
        self.binary(node, symbol)

    op_bitwise_and = op___and__
    op_bitwise_or = op___or__

    def truthy(self, node, symbol):
        """`logical_and`/`logical_or`: numbers are true where nonzero."""
        out, operands = self.aligned(node, node.args[:2])
        parts = [value if self.is_mask(arg) else f"({value} != 0)" for arg, (value, _) in zip(node.args[:2], operands)]
        self.bind(node, f" {symbol} ".join(parts), out)

    def op_logical_xor(self, node):
        out, operands = self.aligned(node, node.args[:2])
        parts = [value if self.is_mask(arg) else f"({value} != 0)" for arg, (value, _) in zip(node.args[:2], operands)]
        self.bind(node, f"{parts[0]} != {parts[1]}", out)

    def op_bitwise_xor(self, node):
        if str(node.meta["val"].dtype) != "torch.bool":
            self.unsupported(node, "bitwise_xor", "bitwise operators of integers are not in nax's language")
        self.op_logical_xor(node)

    def op_logical_and(self, node):
        self.truthy(node, "and")

    def op_logical_or(self, node):
        self.truthy(node, "or")

    def function(self, node, name, count):
        """`name(a, b, ...)` of the first `count` arguments, lined up as torch broadcasts them."""
        out, operands = self.aligned(node, node.args[:count])
        self.bind(node, f"{name}({', '.join(value for value, _ in operands)})", out)

    def op_min(self, node):
        self.extreme(node, "min")

    def op_max(self, node):
        self.extreme(node, "max")

    def extreme(self, node, reduction):
        """`torch.max(a, b)` (`min`) elementwise, of the whole tensor, or over a dim with its indices."""
        if len(node.args) >= 2 and isinstance(node.args[1], int) and not isinstance(node.args[1], bool):
            self.extremum_with_index(node, reduction, "arg" + reduction)
        elif len(node.args) == 1:
            self.whole(node, reduction)
        else:
            self.extremum(node, reduction + "imum", {"max": "or", "min": "and"}[reduction])

    def whole(self, node, reduction):
        """`max(x)`, `min(x)`: over every axis; of masks, whether any (every)
        element is true."""
        x, axes = self.operand(node.args[0])
        if self.is_mask(node.args[0]):
            x = f"int({x})" if reduction == "max" else f"int(!{x})"
            after = " > 0" if reduction == "max" else " == 0"
            reduction = "sum"
        else:
            after = ""
        x = over(reduction, x, present(axes or []))
        self.bind(node, f"({x}){after}" if after else x, [])

    def extremum_with_index(self, node, reduction, arg_reduction):
        """`max(x, dim)`: the values and their indices, a pair its `getitem`s
        take (of masks, as the integers 0 and 1)."""
        x, axes = self.operand(node.args[0])
        axes = axes or [None]
        mask = self.is_mask(node.args[0])
        dim = node.args[1] % len(axes)
        keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        left = [None if i == dim else a for i, a in enumerate(axes)] if keep else [a for i, a in enumerate(axes) if i != dim]
        values, indices = self.fresh(f"{node.name}_values"), self.fresh(f"{node.name}_indices")
        if axes[dim] is None:
            self.first_of_one(values, indices, x, left)
        else:
            numbers = f"int({x})" if mask else x
            self.lines.append(f"{values} = {reduction}({numbers}, {axes[dim]})" + (" > 0" if mask else ""))
            self.lines.append(f"{indices} = {arg_reduction}({numbers}, {axes[dim]})")
        self.pairs[node.name] = [(values, left), (indices, left)]

    def first_of_one(self, values, indices, x, axes):
        """A reduction over one element with its index (`values`, `indices`
        the statements' names): the element itself, at index 0."""
        self.lines.append(f"{values} = {x}")
        self.lines.append(f"{indices} = {self.repeat('0', [], present(axes)) if present(axes) else '0'}")

    def op_sort(self, node):
        """`torch.sort(x, dim, descending)`: each element's rank along the
        axis (how many come before it: smaller, or equal and earlier, so the
        sort is stable, an order torch's unstable sort may give too; nan
        above everything, as torch's), then the element of each rank (a sum
        against a mask of the ranks): the values and their indices, a pair
        its `getitem`s take. Quadratic in the axis's length: comparisons,
        not a sorting network."""
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", -1)
        descending = node.args[2] if len(node.args) > 2 else node.kwargs.get("descending", False)
        self.sorted(node, dim, descending, None)

    def op_topk(self, node):
        """`torch.topk(x, k, dim, largest)`: the first k of the sort (sorted,
        whatever `sorted` asks: any order is torch's to choose)."""
        dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", -1)
        largest = node.args[3] if len(node.args) > 3 else node.kwargs.get("largest", True)
        self.sorted(node, dim, largest, node.args[1])

    def sorted(self, node, dim, descending, first):
        """The pair (values, indices) of the sort along `dim`, its `first` ranks (all: `None`)."""
        x, axes = self.operand(node.args[0])
        axes = axes or [None]
        dim %= len(axes)
        along = axes[dim]
        if hasattr(node.args[0].meta["val"].shape[dim], "node"):
            self.unsupported(node, str(node.target), "sorting an axis of dynamic size is not supported yet")
        values, indices = self.fresh(f"{node.name}_values"), self.fresh(f"{node.name}_indices")
        out = self.axes_of(node.meta["val"][0].shape)
        self.pairs[node.name] = [(values, out), (indices, out)]
        if along is None:
            self.first_of_one(values, indices, x, out)
            return
        others = [a for a in present(axes) if a != along]
        other = self.fresh(f"{along}_other")
        numbers = f"int({x})" if self.is_mask(node.args[0]) else x
        # x[i] as a column (i along `along`) and x[j] as a row (j along `other`).
        column = f"rearrange({numbers}, {' '.join(present(axes))} -> {' '.join(others + [along, '1'])})"
        moved = numbers if others + [along] == present(axes) else f"rearrange({numbers}, {' '.join(present(axes))} -> {' '.join(others + [along])})"
        row = self.held(f"{node.name}_row", f"({moved}) as [{' '.join(others + [other])}]", others + [other])
        row = f"rearrange({row}, {' '.join(others + [other])} -> {' '.join(others + ['1', other])})"
        ahead = f"{row} > {column}" if descending else f"{row} < {column}"
        tie = f"{row} == {column}"
        if self.is_float(node.args[0]):
            # nan above every number; two nans tie.
            above = f"({row} != {row} and {column} == {column})" if descending else f"({column} != {column} and {row} == {row})"
            ahead, tie = f"({ahead}) or {above}", f"{tie} or ({row} != {row} and {column} != {column})"
        earlier = f"arange({other}) < rearrange(arange({along}), {along} -> {along} 1)"
        rank = self.held(f"{node.name}_rank", f"sum(int(({ahead}) or (({tie}) and {earlier})), {other})", others + [along])
        # The element of rank k (k along `along`, i along `other`).
        ranked = f"rearrange(({rank} as [{' '.join(others + [other])}]), {' '.join(others + [other])} -> {' '.join(others + ['1', other])})"
        hit = self.held(f"{node.name}_of_rank", f"rearrange(arange({along}), {along} -> {along} 1) == {ranked}", others + [along, other])
        picked = f"sum(where({hit}, {row}, 0), {other})"
        picked = f"{picked} > 0" if self.is_mask(node.args[0]) else picked
        position = f"sum(where({hit}, arange({other}), 0), {other})"
        order = others + [along]
        if first is not None:
            if out[dim] is None:
                picked, position, order = f"({picked})[{along} = 0]", f"({position})[{along} = 0]", others
            else:
                kept = self.fresh(f"{along}_first")
                picked, position = f"({picked})[{along} = 0:{first} as {kept}]", f"({position})[{along} = 0:{first} as {kept}]"
                order = others + [kept]
        target = [a for a in (axes[i] if i != dim else order[-1] if first is None or out[dim] is not None else None for i in range(len(axes))) if a is not None]
        for name, value in ((values, picked), (indices, position)):
            moved = f"rearrange({value}, {' '.join(order)} -> {' '.join(target)})" if order != target else value
            self.lines.append(f"{name} = ({moved}) as [{' '.join(present(out))}]" if target != present(out) else f"{name} = {moved}")
        self.scoped.update(present(out))

    def op_repeat_interleave(self, node):
        """`x.repeat_interleave(r, dim)`: each element r times along the axis
        (`repeat(x, ... a ... -> ... (a r) ...)`)."""
        repeats = node.args[1]
        dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim")
        x, axes = self.operand(node.args[0])
        if not isinstance(repeats, int) or dim is None:
            self.unsupported(node, "repeat_interleave", "repeats given as a tensor, or without a dim, are not supported yet")
        dim %= len(axes)
        if axes[dim] is None:
            self.unsupported(node, "repeat_interleave", "repeating an axis of size 1 is not supported yet")
        have = present(axes)
        copies = self.fresh("r")
        grouped = [f"({a} {copies})" if i == dim else a for i, a in enumerate(axes) if a is not None]
        natural = ["_merged" if i == dim else a for i, a in enumerate(axes) if a is not None]
        self.bind(node, f"repeat({x}, {' '.join(have)} -> {' '.join(grouped)}, {copies}={repeats})", natural)

    def op_maximum(self, node):
        self.extremum(node, "maximum", "or")

    def op_minimum(self, node):
        self.extremum(node, "minimum", "and")

    def extremum(self, node, function, of_masks):
        """`maximum`/`minimum` of numbers; of masks, their `or`/`and`."""
        if str(node.meta["val"].dtype) == "torch.bool":
            self.binary(node, of_masks)
        else:
            out, [(a, _), (b, _)] = self.aligned(node, node.args[:2])
            self.bind(node, f"{function}({self.numeric(node, node.args[0], a)}, {self.numeric(node, node.args[1], b)})", out)

    def op_where(self, node):
        self.function(node, "where", 3)

    def op_clamp(self, node):
        """`clamp(x, lo, hi)`; a missing bound is no bound."""
        low = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
        high = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
        bounds = [b for b in (low, high) if b is not None]
        out, operands = self.aligned(node, [node.args[0], *bounds])
        values = iter(value if hasattr(arg, "name") else self.literal(node, arg) for arg, (value, _) in zip([node.args[0], *bounds], operands))
        x = next(values)
        if low is not None:
            x = f"maximum({x}, {next(values)})"
        if high is not None:
            x = f"minimum({x}, {next(values)})"
        self.bind(node, x, out)

    def op_masked_fill(self, node):
        value = node.args[2]
        if hasattr(value, "name"):
            # A rank-0 tensor of the value: `where`, in x's dtype.
            out, [(x, _), (mask, _), (fill, _)] = self.aligned(node, node.args[:3])
            self.bind(node, f"where({mask}, {self.converted(value, fill, node.meta['val'].dtype)}, {x})", out)
            return
        out, [(x, _), (mask, _)] = self.aligned(node, node.args[:2])
        # The fill in the tensor's category: a bool for masks, a number of its kind else.
        dtype = str(node.meta["val"].dtype)
        if dtype == "torch.bool":
            fill = "true" if value else "false"
        elif self.integral(node):
            fill = str(int(value))
        else:
            fill = "-inf" if value == float("-inf") else ("inf" if value == float("inf") else repr(float(value)))
        self.bind(node, f"masked_fill({x}, {mask}, {fill})", out)

    def op_arange(self, node):
        """`arange(end)`, `arange(start, end, step)`: the positions of the
        result's axis, scaled and shifted, in the result's dtype."""
        args = node.args
        start, step = (0, 1) if len(args) == 1 else (args[0], args[2] if len(args) > 2 else 1)
        if len(args) > 1 and any(hasattr(a, "name") for a in args):
            self.unsupported(node, "arange", "a start or a step with an end of dynamic size is not supported yet")
        out = self.axes_of(node.meta["val"].shape)
        kind = _kind(node.meta["val"].dtype)
        if out == [None]:
            first = self.literal(node, start)
            self.bind(node, first if kind in ("Int", "Real") else f"full({kind}[], {first})", [])
            if kind == "Int" and start == 0:
                # The one position of an axis of size 1 (absent, so `None`).
                self.aranges[node.name] = None
            return
        positions = f"arange({out[0]})" if kind == "Int" else f"{'float' if kind == 'Real' else kind}(arange({out[0]}))"
        if step != 1:
            positions = f"{positions} * {self.literal(node, step)}"
        if start != 0:
            positions = f"{positions} + {self.literal(node, start)}"
        self.bind(node, positions, out)
        if kind == "Int" and start == 0 and step == 1:
            self.aranges[node.name] = out[0]

    def op_add(self, node):
        self.binary(node, "+")

    def in_place(self, node, functional):
        """`x.add_(y)` and its siblings (in torch.export's training IR):
        the functional operation, whose value the mutated operand takes for
        every later use."""
        functional(self, node)
        source = node.args[0]
        if hasattr(source, "name"):
            self.values[source.name], self.axes[source.name] = self.values[node.name], self.axes[node.name]

    def op_add_(self, node):
        self.in_place(node, _Writer.op_add)

    def op_sub_(self, node):
        self.in_place(node, _Writer.op_sub)

    def op_mul_(self, node):
        self.in_place(node, _Writer.op_mul)

    def op_div_(self, node):
        self.in_place(node, _Writer.op_div)

    def op_sub(self, node):
        self.binary(node, "-")

    def op_mul(self, node):
        self.binary(node, "*")

    def op_div(self, node):
        """True division, or rounded down (`floor`) or towards zero (`trunc`)."""
        mode = node.kwargs.get("rounding_mode")
        if mode is None:
            self.binary(node, "/")
            return
        if self.integral(node):
            self.unsupported(node, "div", "integer division with a rounding mode is not supported yet")
        self.binary(node, "/")
        quotient = self.values[node.name]
        rounded = f"floor({quotient})" if mode == "floor" else f"where({quotient} < 0.0, ceil({quotient}), floor({quotient}))"
        self.bind(node, rounded, self.axes[node.name])

    def op_pow(self, node):
        """A small whole power as products (`x * x * x` for GPT-2's gelu:
        a general `pow` is an exponential and a logarithm per element);
        else `pow` of floats, the operands lined up as torch broadcasts them."""
        base, power = node.args[0], node.args[1]
        if self.integral(node):
            if not (isinstance(power, int) and power >= 0 and hasattr(base, "name")):
                # An exponent's bits need integer division, which the language has not.
                self.unsupported(node, "pow", "an integer power by a tensor of exponents is not expressible in nax")
            x, axes = self.operand(base)
            self.bind(node, self.squarings(x, axes, power) if power else f"({x} * 0 + 1)", axes)
            return
        if isinstance(power, (int, float)) and hasattr(base, "name"):
            x, axes = self.operand(base)
            x = self.numeric(node, base, x)
            if float(power) in (2.0, 3.0, 4.0):
                self.bind(node, " * ".join([x] * int(power)), axes)
            else:
                self.bind(node, f"pow({x}, {float(power)!r})", axes)
            return
        out, [(a, _), (b, _)] = self.aligned(node, [base, power])
        self.bind(node, f"pow({self.numeric(node, base, a)}, {self.numeric(node, power, b)})", out)

    def squarings(self, x, axes, power) -> str:
        """`x` to a positive whole `power` by repeated squaring (each square a
        statement; integers wrap as torch's)."""
        factors = []
        while True:
            if power & 1:
                factors.append(x)
            power >>= 1
            if not power:
                return " * ".join(factors)
            x = self.held("squared", f"{x} * {x}", axes)

    def reduction(self, node, name):
        """`name(x, a)` over each axis of `dim` (every axis without one), kept
        as size 1 with `keepdim` (the third argument)."""
        x, axes = self.operand(node.args[0])
        self.reduce_then(node, self.numeric(node, node.args[0], x), axes, name, "", keep_at=2)

    def op_mean(self, node):
        self.reduction(node, "mean")

    def op_sum(self, node):
        self.reduction(node, "sum")

    def op_amax(self, node):
        self.reduction(node, "max")

    def op_amin(self, node):
        self.reduction(node, "min")

    def op_prod(self, node):
        self.reduction(node, "prod")

    def op_expand(self, node):
        """Broadcast axes of size 1 made real, by `repeat`; the operand's
        axes take the result's names at their positions (from the right, as
        torch lines them up), which may differ from theirs."""
        x, out = self.broadcast(node, node.args[0])
        if x == self.operand(node.args[0])[0]:
            self.identity(node)
            self.axes[node.name] = out
            return
        self.bind(node, x, out)

    def broadcast(self, node, arg):
        """`arg`'s value lined up with the node's result as torch
        broadcasts (from the right): its axes renamed to the result's at
        their positions, the axes it lacks repeated; and the result's axes."""
        out = self.axes_of(node.meta["val"].shape)
        x, renamed = self.lined_up(node, arg, out)
        renamed = renamed or []
        return (x if renamed == present(out) else self.repeat(x, renamed, present(out))), out

    def repeat(self, x, have, want) -> str:
        """`repeat(x, have -> want)`, sizing a new axis the body has not named
        yet by the size it is a second name of (`seq_2=seq`)."""
        sizes = [f", {a}={self.derived[a]}" for a in want if a not in have and a not in self.scoped and a in self.derived]
        return f"repeat({x}, {' '.join(have)} -> {' '.join(want)}{''.join(sizes)})"

    def op__assert_tensor_metadata(self, node):
        """A check of the export's own; nothing to compute."""

    def op_to(self, node):
        import torch

        have, want = node.args[0].meta["val"].dtype, node.meta["val"].dtype
        if have == want:
            self.identity(node)
            return
        x, axes = self.operand(node.args[0])
        if re.fullmatch(r"-?(\d+(\.\d*)?(e[-+]?\d+)?|inf)|true|false", x):
            # A literal (a constant the importer folded): one of the result's
            # kind (a conversion of a host number stays a host number).
            number = {"true": 1, "false": 0}.get(x) if x in ("true", "false") else float(x)
            self.constructed(node, "full", number)
            return
        functions = {torch.float32: "float", torch.int64: "int", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64"}
        if want == torch.bool:
            # Whether nonzero (nan is).
            self.bind(node, f"{x} != {'0' if self.integral(node.args[0]) else '0.0'}", axes)
            return
        if want not in functions:
            self.unsupported(node, "to", f"a conversion from {have} to {want} is not supported yet")
        self.bind(node, f"{functions[want]}({x})", axes)

    op__to_copy = op_to

    def product(self, node, x_arg, w_arg, transposed=False):
        """torch's matrix product (`matmul`, `mm`, `bmm`; `linear` of a
        `transposed` weight) as one `einsum`: the summed axis under a name
        of its own, every other axis under the result's name at its place
        (batch axes lined up from the right, as torch broadcasts); axes of
        size 1 absent, so a product over one is an outer product."""
        (x, xa), (w, wa) = self.operand(x_arg), self.operand(w_arg)
        out = self.axes_of(node.meta["val"].shape)
        rx, rw = len(xa), len(wa)
        depth = self.fresh("depth")
        batch = out[: len(out) - (rx >= 2) - (rw >= 2)]
        x_names = batch[len(batch) - (rx - 2) :] + [out[len(batch)], depth] if rx >= 2 else [depth]
        w_names = batch[len(batch) - (rw - 2) :] + ([out[-1], depth] if transposed else [depth, out[-1]]) if rw >= 2 else [depth]
        operands = []
        for value, axes, names in ((x, xa, x_names), (w, wa, w_names)):
            labels = [name for name, have in zip(names, axes) if have is not None]
            operands.append((value if labels == present(axes) else f"({value} as [{' '.join(labels)}])", labels))
        (x, x_labels), (w, w_labels) = operands
        if not x_labels or not w_labels:
            self.bind(node, f"{x} * {w}", x_labels or w_labels)
            return
        self.bind(node, f"einsum({x}, {w}: {' '.join(x_labels)}, {' '.join(w_labels)} -> {' '.join(present(out))})", present(out))

    def biased(self, node, bias, beta=1, alpha=1):
        """The node's product scaled by `alpha`, plus `bias` (broadcast as
        torch's) scaled by `beta`; a `beta` of 0 leaves the bias out, nan and all."""
        product, out = self.values[node.name], self.axes[node.name]
        if alpha != 1:
            product = f"{self.literal(node, alpha)} * {product}"
        if bias is not None and beta != 0:
            b, _ = self.lined_up(node, bias, out)
            product = f"{product} + {b if beta == 1 else f'{self.literal(node, beta)} * {b}'}"
        if product != self.values[node.name]:
            self.bind(node, product, out)

    def op_linear(self, node):
        self.product(node, node.args[0], node.args[1], transposed=True)
        self.biased(node, node.args[2] if len(node.args) > 2 else None)

    def op_matmul(self, node):
        self.product(node, node.args[0], node.args[1])

    op_mm = op_bmm = op_mv = op_dot = op_matmul

    def op_addmm(self, node):
        """`beta * bias + alpha * (x @ w)` (`addmv`, `baddbmm` alike)."""
        self.product(node, node.args[1], node.args[2])
        self.biased(node, node.args[0], node.kwargs.get("beta", 1), node.kwargs.get("alpha", 1))

    op_addmv = op_baddbmm = op_addmm

    def op_layer_norm(self, node):
        """Over the last `len(normalized_shape)` axes (a mean over each;
        those of size 1 average one element), then the weight and bias
        lined up from the right."""
        x, axes = self.operand(node.args[0])
        normalized = present(axes[len(axes) - len(node.args[1]) :])
        weight = node.args[2] if len(node.args) > 2 else None
        bias = node.args[3] if len(node.args) > 3 else None
        eps = float(node.args[4]) if len(node.args) > 4 else 1e-5
        centered = self.held(node.name + "_centered", f"{x} - {over('mean', x, normalized)}", axes)
        expr = f"{centered} * rsqrt({over('mean', f'{centered} * {centered}', normalized)} + {eps!r})"
        if weight is not None:
            expr = f"{expr} * {self.lined_up(node, weight, axes)[0]}"
        if bias is not None:
            expr = f"{expr} + {self.lined_up(node, bias, axes)[0]}"
        self.bind(node, expr, axes)

    def along(self, node, function):
        x, axes = self.operand(node.args[0])
        x = self.converted(node.args[0], x, node.meta["val"].dtype)
        dim = node.args[1] % max(len(axes), 1)
        if not axes or axes[dim] is None:
            # Over one element: torch's exp(x - max) / sum, 1 (log: 0), nan where x is not finite.
            self.bind(node, f"exp({x} - {x})" if function == "softmax" else f"{x} - {x}", axes)
            return
        # Prob and LogProb are of the default float; another dtype is its own kind.
        if str(node.meta["val"].dtype) == "torch.float32":
            self.bind(node, f"{function}({x}, {axes[dim]})", axes)
            kind = {"softmax": "Prob", "log_softmax": "LogProb"}[function]
            self.kinds[node.name] = f"{kind}({self.axes[node.name][dim]})"
        else:
            self.bind(node, f"{_kind(node.meta['val'].dtype)}({function}({x}, {axes[dim]}))", axes)

    def op_softmax(self, node):
        self.along(node, "softmax")

    def op__softmax(self, node):
        self.along(node, "softmax")

    def op_log_softmax(self, node):
        self.along(node, "log_softmax")

    def permuted(self, node, order):
        x, axes = self.operand(node.args[0])
        out = [axes[i] for i in order]
        if present(out) == present(axes):
            self.values[node.name], self.axes[node.name] = x, out
            return
        self.bind(node, f"rearrange({x}, {' '.join(present(axes))} -> {' '.join(present(out))})", out)

    def op_transpose(self, node):
        rank = len(self.operand(node.args[0])[1] or [])
        if rank < 2:
            self.identity(node)
            return
        a, b = node.args[1] % rank, node.args[2] % rank
        order = list(range(rank))
        order[a], order[b] = order[b], order[a]
        self.permuted(node, order)

    def op_t(self, node):
        if len(self.operand(node.args[0])[1] or []) < 2:
            self.identity(node)
        else:
            self.permuted(node, [1, 0])

    def op_numpy_T(self, node):
        rank = len(self.operand(node.args[0])[1])
        self.permuted(node, list(reversed(range(rank))))

    def op_permute(self, node):
        rank = len(self.operand(node.args[0])[1])
        self.permuted(node, [d % rank for d in node.args[1]])

    def op_sym_size(self, node):
        """A dim's size as an `int`: its name."""
        self.values[node.name], self.axes[node.name] = self.size_name(node.meta["val"]), None

    def reshaped(self, node):
        """A view to another grouping of the same row-major elements: a
        rearrange that merges and splits neighbouring axes (grouped by the
        example's sizes; axes of size 1 are absent on both sides, and every
        part's name is a dim or an argument's axis, so a split needs no
        keyword sizes). Several axes regrouped into several others are
        merged into one first (a statement of its own), then split."""
        x, axes = self.operand(node.args[0])
        source = [(size, name) for size, name in zip(node.args[0].meta["val"].shape, axes) if name is not None]
        target_axes = self.axes_of(node.meta["val"].shape)
        target = [(size, name) for size, name in zip(node.meta["val"].shape, target_axes) if name is not None]
        left, right, natural, keywords = [], [], [], []
        taken = {name for _, name in source}
        i = j = 0
        while i < len(source) or j < len(target):
            if i == len(source) or j == len(target):
                self.unsupported(node, str(node.target), "a view whose sizes do not group")
            ins, outs = [i], [j]
            a, b = _hint(source[i][0]), _hint(target[j][0])
            while a != b:
                if a < b and ins[-1] + 1 < len(source):
                    ins.append(ins[-1] + 1)
                    a *= _hint(source[ins[-1]][0])
                elif b < a and outs[-1] + 1 < len(target):
                    outs.append(outs[-1] + 1)
                    b *= _hint(target[outs[-1]][0])
                else:
                    self.unsupported(node, str(node.target), "a view whose sizes do not group")
            if len(ins) > 1 and len(outs) > 1:
                # Merge the group (its size the product of its parts'), then start again.
                have, group = [name for _, name in source], [source[k][1] for k in ins]
                merged = self.fresh("regrouped")
                grouped = [f"({' '.join(group)})" if a == group[0] else a for a in have if a not in group[1:]]
                renamed = [merged if a == group[0] else a for a in have if a not in group[1:]]
                size = functools.reduce(operator.mul, [source[k][0] for k in ins])
                x = self.held(f"{node.name}_regrouped", f"rearrange({x}, {' '.join(have)} -> {' '.join(grouped)}) as [{' '.join(renamed)}]", renamed)
                source = source[: ins[0]] + [(size, merged)] + source[ins[-1] + 1 :]
                left, right, natural, keywords = [], [], [], []
                taken, i, j = {name for _, name in source}, 0, 0
                continue
            i, j = ins[-1] + 1, outs[-1] + 1
            if len(outs) > 1:
                parts = []
                for k in outs:
                    size, part = target[k]
                    if part in taken:
                        # A part named as an axis of the operand: a name of
                        # its own, sized by a keyword (bind renames it).
                        if hasattr(size, "node"):
                            self.unsupported(node, str(node.target), "splitting off a dynamic size named as another axis is not supported yet")
                        part = self.fresh(f"{part}_split")
                        keywords.append(f", {part}={int(size)}")
                    taken.add(part)
                    parts.append(part)
                left.append(f"({' '.join(parts)})")
                right.extend(parts)
                natural.extend(parts)
            else:
                names = [source[k][1] for k in ins]
                left.extend(names)
                right.append(names[0] if len(names) == 1 else f"({' '.join(names)})")
                # A merged group's axis has no name until `as` gives it one.
                natural.append(names[0] if len(names) == 1 else "_merged")
        if left == right:
            self.values[node.name], self.axes[node.name] = x, target_axes
            if node.args[0].name in self.aranges:
                self.aranges[node.name] = self.aranges[node.args[0].name]
            return
        self.bind(node, f"rearrange({x}, {' '.join(left)} -> {' '.join(right)}{''.join(keywords)})", natural)

    op_view = op_reshape = op__unsafe_view = op_unsqueeze = op_squeeze = op_flatten = op_unflatten = reshaped

    def parts(self, node, what, lengths_of):
        """A split into parts along `dim` (the third argument), their
        lengths from the axis's size; the parts are `getitem`s."""
        _, axes = self.operand(node.args[0])
        dim = (node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)) % len(axes)
        size = node.args[0].meta["val"].shape[dim]
        if hasattr(size, "node"):
            self.unsupported(node, what, "splitting an axis of dynamic size is not supported yet")
        starts, parts = 0, []
        for length in lengths_of(int(size)):
            parts.append((starts, starts + length))
            starts += length
        self.splits[node.name] = (node.args[0], dim, parts)

    def op_split(self, node):
        size = node.args[1]
        if isinstance(size, int):
            self.parts(node, "split", lambda total: [min(size, total - start) for start in range(0, total, size)])
        else:
            self.parts(node, "split", lambda total: list(size))

    op_split_with_sizes = op_split

    def op_chunk(self, node):
        """torch's chunks: ceil(size / n) each, the last shorter."""
        count = node.args[1]
        self.parts(node, "chunk", lambda total: [min(-(-total // count), total - start) for start in range(0, total, -(-total // count))])

    def op_getitem(self, node):
        source, index = node.args
        if source.name in self.pairs:
            items = self.pairs[source.name]
            if index < len(items):
                self.values[node.name], self.axes[node.name] = items[index]
            # Else an item the importer does not compute (embedding_bag's
            # bookkeeping): a later use is refused as an argument it cannot read.
            return
        if source.name not in self.splits:
            self.unsupported(node, "getitem", "an item of anything but a split is not supported yet")
        operand, dim, parts = self.splits[source.name]
        x, axes = self.operand(operand)
        start, stop = parts[index]
        out = self.axes_of(node.meta["val"].shape)
        if axes[dim] is None:
            self.identity(node)
        elif out[dim] is None:
            # A part of size 1: its element, the axis gone as size-1 axes go.
            self.bind(node, f"{x}[{axes[dim]} = {start}]", out)
        else:
            self.bind_slice(node, x, axes, dim, out[dim], f"{start}:{stop}")

    def bind_slice(self, node, x, axes, dim, name, bounds):
        """Binds `x[a = bounds as name]`; the slice's axis under a name of
        its own where the operand's other axes hold `name` (bind then
        renames them all)."""
        part = name if name not in axes else self.fresh(f"{name}_part")
        natural = [part if i == dim else a for i, a in enumerate(axes)]
        self.bind(node, f"{x}[{axes[dim]} = {bounds} as {part}]", natural)

    def op_slice(self, node):
        """`x[a = start:stop:step]` (an element where one remains)."""
        x, axes = self.operand(node.args[0])
        dim = (node.args[1] if len(node.args) > 1 else 0) % len(axes)
        start = node.args[2] if len(node.args) > 2 else None
        stop = node.args[3] if len(node.args) > 3 else None
        step = node.args[4] if len(node.args) > 4 else 1
        size = node.args[0].meta["val"].shape[dim]
        out = self.axes_of(node.meta["val"].shape)
        if axes[dim] is None:
            self.identity(node)
            return

        def bound(b):
            if b is None:
                return ""
            if isinstance(b, int):
                # torch's "to the end" is the largest int64.
                return "" if b >= 2**62 or (b >= _hint(size) and not hasattr(size, "node")) else str(b)
            return self.operand(b)[0]

        first, last = bound(start) or "0", bound(stop)
        if out[dim] is None:
            self.bind(node, f"{x}[{axes[dim]} = {first}]", [a for i, a in enumerate(axes) if i != dim])
        elif (first, last, step) == ("0", "", 1):
            self.identity(node)
        else:
            stride = "" if step == 1 else f":{step}"
            self.bind_slice(node, x, axes, dim, out[dim], f"{first}:{last}{stride}")

    def with_axis(self, x, axes, dim, own) -> str:
        """`x` (of torch axes `axes`) with its absent axis `dim`, of size 1,
        present as `own`: `repeat(x, a b -> a own b, own=1)`."""
        grown = [own if i == dim else a for i, a in enumerate(axes) if a is not None or i == dim]
        return f"repeat({x}, {' '.join(present(axes))} -> {' '.join(grown)}{'' if own in self.scoped else f', {own}=1'})"

    def named(self, node, x, axes, dim, want="single") -> tuple:
        """x with its absent axis `dim` (of size 1) present under a fresh
        name, as a statement of its own: the value and its axes."""
        own = self.fresh(want)
        x = self.held(f"{node.name}_{want}", self.with_axis(x, axes, dim, own), present(axes) + [own])
        return x, [own if i == dim else a for i, a in enumerate(axes)]

    def held(self, want, expr, axes) -> str:
        """`expr` bound to a statement of its own (its axes' names then sizes in scope)."""
        name = self.fresh(want)
        self.lines.append(f"{name} = {expr}")
        self.scoped.update(present(axes))
        return name

    def op_constant_pad_nd(self, node):
        """Padding with a value (`pad` pairs from the last axis): `concat`
        of the value repeated, the operand and the value again; a negative
        pad crops (a slice). Every axis is given its name first (one of
        size 1 too), and one the result has of size 1 is taken at its one
        position."""
        pads = list(node.args[1])
        value = node.args[2] if len(node.args) > 2 else 0
        if len(pads) % 2 or any(not isinstance(p, int) for p in pads):
            self.unsupported(node, "constant_pad_nd", "pads given by dynamic sizes are not supported yet")
        x, xn, xs = self.every_axis(node.args[0], "input")
        fill = self.filled(node, value)
        for k in range(len(pads) // 2):
            x, xn, xs = self.padded(node, x, xn, xs, len(xn) - 1 - k, pads[2 * k], pads[2 * k + 1], fill)
        self.settled(node, x, xn)

    def op_copy(self, node):
        """`copy(self, src)`: the source, broadcast to the destination's
        shape, in its dtype."""
        x, out = self.broadcast(node, node.args[1])
        self.bind(node, self.converted(node.args[1], x, node.meta["val"].dtype), out)

    def op_select_scatter(self, node):
        """`select_scatter(x, src, dim, index)`: x with src at one position
        of the axis (src given an axis of size 1 there, then as `slice_scatter`)."""
        x, axes = self.operand(node.args[0])
        src, src_axes = self.operand(node.args[1])
        dim = node.args[2] % len(axes)
        index, size = node.args[3], node.args[0].meta["val"].shape[dim]
        if axes[dim] is None or not isinstance(index, int) or hasattr(size, "node"):
            self.unsupported(node, "select_scatter", "an axis of size 1 or of dynamic size, or a position given by a tensor, is not supported yet")
        index %= int(size)
        others = [a for i, a in enumerate(axes) if i != dim]
        renamed = [others[len(others) - len(src_axes or []) + i] for i, a in enumerate(src_axes or []) if a is not None]
        if renamed != present(src_axes or []):
            src = f"({src} as [{' '.join(renamed)}])"
        if renamed != present(others):
            src = self.repeat(src, renamed, present(others))

        def middle(own):
            return self.with_axis(src, [a if i != dim else None for i, a in enumerate(axes)], dim, own)

        self.spliced(node, x, axes, dim, int(size), index, index + 1, middle)

    def op_slice_scatter(self, node):
        """`slice_scatter(x, src, dim, start, end, step)`: `concat` of x
        before, the middle, and x after. With a step, the middle's positions
        between src's are x's: `where` a position is on a step, src's element
        `take`n by its position's count of steps (integers both, built by
        `repeat`: no division)."""
        x, axes = self.operand(node.args[0])
        dim = (node.args[2] if len(node.args) > 2 else 0) % len(axes)
        size = node.args[0].meta["val"].shape[dim]
        start = node.args[3] if len(node.args) > 3 and node.args[3] is not None else 0
        step = node.args[5] if len(node.args) > 5 else 1
        if hasattr(size, "node"):
            self.unsupported(node, "slice_scatter", "an axis of dynamic size is not supported yet")
        total = int(size)
        # The end follows from src's length; the start is clipped as Python's.
        start = min(max(start + total if start < 0 else start, 0), total)
        count = _hint(node.args[1].meta["val"].shape[dim])
        if count == 0:
            self.identity(node)
            return
        # src's axes under x's names, its axis `dim` (where present) as `slot`.
        slot = self.fresh(f"{axes[dim] or 'one'}_slot")
        src, names = self.lined_up(node, node.args[1], [slot if i == dim else a for i, a in enumerate(axes)])
        if axes[dim] is None:
            # x has one position, and src is it.
            self.bind(node, src, names)
            return
        if slot not in names:
            step = 1  # One position of src: no step between.
        span = (count - 1) * step + 1

        def middle(own):
            if slot not in names:
                return self.with_axis(src, [None if i == dim else a for i, a in enumerate(axes)], dim, own)
            if step == 1:
                return f"({src} as [{' '.join(own if a == slot else a for a in names)}])"
            placed = self.held(f"{node.name}_source", src, names)
            phase, flat = self.fresh("phase"), self.fresh(f"{own}_steps")
            steps = self.held(f"{node.name}_steps", f"rearrange(repeat(arange({slot}), {slot} -> {slot} {phase}, {phase}={step}), {slot} {phase} -> ({slot} {phase})) as [{flat}]", [flat])
            on_step = f"({steps} * {step} == arange({flat}))[{flat} = 0:{span} as {own}]"
            taken = f"take({placed}, {steps}[{flat} = 0:{span} as {own}], {slot})"
            return f"where({on_step}, {taken}, {x}[{axes[dim]} = {start}:{start + span} as {own}])"

        self.spliced(node, x, axes, dim, total, start, start + span, middle)

    def spliced(self, node, x, axes, dim, total, start, end, middle):
        """x with positions start..end of axis `dim` replaced by `middle(own)`
        (a value whose axis `own` has end - start positions): a `concat`."""
        parts, joined = [], []
        for role, length in (("before", start), ("middle", end - start), ("after", total - end)):
            if length == 0:
                continue
            own = self.fresh(f"{axes[dim]}_{role}")
            joined.append(own)
            if role == "middle":
                parts.append(middle(own))
            else:
                bounds = f"0:{start}" if role == "before" else f"{end}:"
                parts.append(f"{x}[{axes[dim]} = {bounds} as {own}]")
        merged = self.fresh(f"{axes[dim]}_joined")
        natural = [merged if i == dim else a for i, a in enumerate(axes)]
        if len(parts) == 1:
            self.bind(node, f"({parts[0]}) as [{' '.join(present(natural))}]", natural)
        else:
            self.bind(node, f"concat({', '.join(parts)}: {', '.join(joined)} -> {merged})", natural)

    def op_pad(self, node):
        """`aten.pad`: with a value (`constant_pad_nd`), or by reflection,
        replication or wrapping around (`edge_padded`)."""
        mode = node.args[2] if len(node.args) > 2 else node.kwargs.get("mode", "constant")
        if mode != "constant":
            self.edge_padded(node, {"reflect": "reflect", "replicate": "replicate", "circular": "circular"}[mode])
            return
        value = node.args[3] if len(node.args) > 3 else node.kwargs.get("value")
        node.args = (node.args[0], node.args[1], 0 if value is None else value)
        self.op_constant_pad_nd(node)

    def op_batch_norm(self, node):
        """`aten.batch_norm`: `(x - mean) * rsqrt(var + eps) * weight + bias`
        along axis 1, with the running statistics in evaluation and the
        batch's own (over every other axis, the variance biased) in
        training (the running statistics' update, a mutation of buffers,
        is not a result)."""
        x, axes = self.operand(node.args[0])
        weight, bias, running_mean, running_var = node.args[1:5]
        training, eps = node.args[5], node.args[7]
        if len(axes) < 2:
            self.unsupported(node, "batch_norm", "an input without a channel axis")
        single = axes[1] is None
        if single:
            # One channel: given a name (and taken at its one position at the end).
            x, axes = self.named(node, x, axes, 1, "channel")
        channel = axes[1]

        def per_channel(arg):
            value, value_axes = self.operand(arg)
            if single:
                return self.with_axis(value, [None], 0, channel) if value_axes == [None] else value
            return f"({value} as [{channel}])" if value_axes != [channel] else value

        if training:
            others = [a for i, a in enumerate(axes) if i != 1 and a is not None]
            mean = x
            for a in others:
                mean = f"mean({mean}, {a})"
            centered = self.fresh(f"{node.name}_centered")
            self.lines.append(f"{centered} = {x} - {mean}")
            self.scoped.update(present(axes))
            variance = f"{centered} * {centered}"
            for a in others:
                variance = f"mean({variance}, {a})"
            normalized = f"{centered} * rsqrt({variance} + {float(eps)!r})"
        else:
            if running_mean is None or running_var is None:
                self.unsupported(node, "batch_norm", "evaluation without running statistics is not supported")
            normalized = f"({x} - {per_channel(running_mean)}) * rsqrt({per_channel(running_var)} + {float(eps)!r})"
        if weight is not None:
            normalized = f"{normalized} * {per_channel(weight)}"
        if bias is not None:
            normalized = f"{normalized} + {per_channel(bias)}"
        if single:
            normalized, axes = f"({normalized})[{channel} = 0]", [None if i == 1 else a for i, a in enumerate(axes)]
        self.bind(node, normalized, axes)

    def op_group_norm(self, node):
        """`aten.group_norm`: axis 1's channels in `num_groups` groups, each
        normalized over its channels and every axis after them, then the
        per-channel affine map."""
        x, axes = self.operand(node.args[0])
        groups, weight, bias, eps = node.args[1], node.args[2], node.args[3], node.args[4]
        if len(axes) < 2 or axes[1] is None or hasattr(node.args[0].meta["val"].shape[1], "node"):
            self.unsupported(node, "group_norm", "a channel axis of size 1 or of dynamic size is not supported yet")
        have = present(axes)
        channel = axes[1]
        group, part = self.fresh("group"), self.fresh("in_group")
        split = [f"({group} {part})" if a == channel else a for a in have]
        grouped_axes = [b for a in have for b in ((group, part) if a == channel else (a,))]
        held = self.fresh(f"{node.name}_grouped")
        self.lines.append(f"{held} = rearrange({x}, {' '.join(split)} -> {' '.join(grouped_axes)}, {group}={int(groups)})")
        statistics = [part] + [a for i, a in enumerate(axes) if i > 1 and a is not None]
        mean = held
        for a in statistics:
            mean = f"mean({mean}, {a})"
        centered = self.fresh(f"{node.name}_centered")
        self.lines.append(f"{centered} = {held} - {mean}")
        variance = f"{centered} * {centered}"
        for a in statistics:
            variance = f"mean({variance}, {a})"
        normalized = f"rearrange({centered} * rsqrt({variance} + {float(eps)!r}), {' '.join(grouped_axes)} -> {' '.join(split)})"
        normalized = f"({normalized}) as [{' '.join(have)}]"
        for arg, symbol in ((weight, "*"), (bias, "+")):
            if arg is not None:
                value, value_axes = self.operand(arg)
                normalized = f"{normalized} {symbol} " + (f"({value} as [{channel}])" if value_axes != [channel] else value)
        self.bind(node, normalized, axes)

    def op_diagonal(self, node):
        """`x.diagonal(offset, dim1, dim2)`: the two axes cut to the
        diagonal's square (slices), then summed against a mask of equal
        positions (`where`, so that another element's nan or inf does not
        reach it); the diagonal's axis goes last, as torch puts it."""
        x, axes = self.operand(node.args[0])
        offset = node.args[1] if len(node.args) > 1 else node.kwargs.get("offset", 0)
        dim1 = (node.args[2] if len(node.args) > 2 else node.kwargs.get("dim1", 0)) % len(axes)
        dim2 = (node.args[3] if len(node.args) > 3 else node.kwargs.get("dim2", 1)) % len(axes)
        shape = node.args[0].meta["val"].shape
        out = self.axes_of(node.meta["val"].shape)
        if dim1 == dim2 or None in (axes[dim1], axes[dim2], out[-1]) or any(hasattr(shape[d], "node") for d in (dim1, dim2)):
            self.unsupported(node, "diagonal", "a diagonal of axes of size 1 or of dynamic size, or an empty one, is not supported yet")
        length = _hint(node.meta["val"].shape[-1])
        rows, cols = self.fresh("diagonal_rows"), self.fresh("diagonal_cols")
        first, second = max(-offset, 0), max(offset, 0)
        cut = f"{x}[{axes[dim1]} = {first}:{first + length} as {rows}][{axes[dim2]} = {second}:{second + length} as {cols}]"
        held = self.fresh(f"{node.name}_square")
        self.lines.append(f"{held} = {cut}")
        rest = [a for i, a in enumerate(axes) if i not in (dim1, dim2) and a is not None]
        self.scoped.update(rest + [rows, cols])
        on_diagonal = f"rearrange(arange({rows}), {rows} -> {rows} 1) == (arange({cols}) as [{cols}])"
        if self.is_mask(node.args[0]):
            summed = f"sum(int(where({on_diagonal}, {held}, false)), {cols}) > 0"
        else:
            summed = f"sum(where({on_diagonal}, {held}, 0), {cols})"
        moved = f"rearrange({summed}, {' '.join(a if a != axes[dim1] else rows for a in [a if i != dim1 else rows for i, a in enumerate(axes) if i != dim2 and (a is not None or i == dim1)])} -> {' '.join(rest + [rows])})"
        self.bind(node, moved, [a for a in out[:-1]] + [rows])

    def op_gather(self, node):
        """`torch.gather(x, dim, index)`: for each position of `index`, x's
        element at that index along `dim`: a sum over the axis against a
        mask of the indices' positions (`where`), x cut first to the index's
        sizes along the other axes. The indices pass through `take` of the
        axis's positions, which fails the call on one out of range, as
        torch's gather does. An axis of size 1 is given a name first (and
        the result's taken at its one position)."""
        x, axes = self.operand(node.args[0])
        ids, id_axes = self.operand(node.args[2])
        axes, id_axes = axes or [None], id_axes or [None]
        dim = node.args[1] % len(axes)
        if len(id_axes) != len(axes):
            self.unsupported(node, "gather", "an index of another rank than the operand's")
        if axes[dim] is None:
            x, axes = self.named(node, x, axes, dim)
        along = self.fresh("gathered")
        if id_axes[dim] is None:
            ids = self.with_axis(ids, id_axes, dim, along)
        else:
            ids = f"({ids} as [{' '.join(along if i == dim else a for i, a in enumerate(id_axes) if a is not None)}])"
        index_names = [along if i == dim else a for i, a in enumerate(id_axes)]
        ids = self.held(f"{node.name}_checked", f"take(arange({axes[dim]}), {ids}, {axes[dim]})", present(index_names))
        for i, (a, b) in enumerate(zip(axes, id_axes)):
            if i == dim or a == b:
                continue
            if b is None:
                x = f"{x}[{a} = 0]"
            elif a is None:
                self.unsupported(node, "gather", "an index larger than the operand along an axis")
            else:
                x = f"{x}[{a} = 0:{_hint(node.args[2].meta['val'].shape[i])} as {b}]"
        names = " ".join(present(index_names))
        on_index = f"rearrange({ids}, {names} -> {names} 1) == arange({axes[dim]})"
        if self.is_mask(node.args[0]):
            value = f"sum(int(where({on_index}, {x}, false)), {axes[dim]}) > 0"
        else:
            value = f"sum(where({on_index}, {x}, 0), {axes[dim]})"
        if id_axes[dim] is None:
            value, index_names = f"({value})[{along} = 0]", [None if a == along else a for a in index_names]
        self.bind(node, value, index_names)

    def op_cdist(self, node):
        """`torch.cdist(x1, x2, p)`: the p-norm of every row of x1 less every
        row of x2, computed directly (not by torch's matrix-product shortcut
        for p = 2, which loses small distances). Both operands are written at
        the difference's full rank (batch, x1's rows, x2's rows, features),
        an axis of size 1 where one has none, so that batches broadcast."""
        out = self.axes_of(node.meta["val"].shape)
        p = float(node.args[2]) if len(node.args) > 2 else 2.0
        feature = self.fresh("feature")
        batch, rows = out[:-2], out[-2:]
        features = _hint(node.args[0].meta["val"].shape[-1])
        full = present(batch + rows) + ([feature] if features != 1 else [])
        difference = []
        for k, arg in enumerate(node.args[:2]):
            # x1's axes: batch, its rows, the features; x2's likewise.
            value, names = self.lined_up(node, arg, batch + [rows[k], feature])
            have = set(names)
            pattern = [a if a in have and (a not in rows or a == rows[k]) else "1" for a in full]
            difference.append(f"rearrange({value}, {' '.join(names)} -> {' '.join(pattern)})" if pattern != names else value)
        held = self.held(f"{node.name}_difference", f"{difference[0]} - {difference[1]}", full)
        self.bind(node, p_norm(held, feature if features != 1 else None, p), present(out))

    def op__pdist_forward(self, node):
        """`torch.pdist(x, p)`: the distance of every row of x to each later
        row, in order (row 0 to rows 1.., row 1 to rows 2.., ...): `concat`
        of one part per row, each its differences' p-norms."""
        x, axes = self.operand(node.args[0])
        p = float(node.args[1]) if len(node.args) > 1 else 2.0
        count = node.args[0].meta["val"].shape[0]
        if hasattr(count, "node"):
            self.unsupported(node, "_pdist_forward", "rows of dynamic number are not supported yet")
        rows, feature = axes
        parts, joined = [], []
        for i in range(int(count) - 1):
            own = self.fresh("later")
            joined.append(own)
            parts.append(p_norm(f"({x}[{rows} = {i + 1}:] as [{' '.join(present([own, feature]))}] - {x}[{rows} = {i}])", feature, p))
        if len(parts) == 1:
            self.bind(node, f"({parts[0]})[{joined[0]} = 0]", [])
        else:
            self.bind(node, f"concat({', '.join(parts)}: {', '.join(joined)} -> {self.axes_of(node.meta['val'].shape)[0]})", self.axes_of(node.meta["val"].shape))

    op_pdist = op__pdist_forward

    def op_sym_numel(self, node):
        """A tensor's element count as an `int`: the product of its size names."""
        shape = node.args[0].meta["val"].shape
        names = [self.size_name(size) for size in shape if hasattr(size, "node") or int(size) != 1]
        self.values[node.name], self.axes[node.name] = (" * ".join(names) if names else "1"), None

    def op_diff(self, node):
        """`x[i] - x[i - 1]` along an axis, after a prepended slice (torch's
        `diff(x, prepend=p)`): a concat and a slice of it."""
        x, axes = self.operand(node.args[0])
        n = node.args[1] if len(node.args) > 1 else node.kwargs.get("n", 1)
        dim = (node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", -1)) % len(axes)
        prepend = node.args[3] if len(node.args) > 3 else node.kwargs.get("prepend")
        append = node.args[4] if len(node.args) > 4 else node.kwargs.get("append")
        if n != 1 or prepend is None or append is not None or axes[dim] is None:
            self.unsupported(node, "diff", "only a first difference with a prepended value is supported yet")
        first, first_axes = self.operand(prepend)
        if list(prepend.meta["val"].shape)[dim] != 1:
            self.unsupported(node, "diff", "a prepended value longer than one step is not supported yet")
        step = self.fresh(f"{node.name}_step")
        pattern_in = " ".join(a for a in first_axes if a is not None)
        pattern_out = " ".join("1" if i == dim else a for i, a in enumerate(first_axes) if a is not None or i == dim)
        named = " ".join(step if i == dim else a for i, a in enumerate(first_axes) if a is not None or i == dim)
        joined = self.fresh(f"{node.name}_joined")
        self.lines.append(f"{joined} = concat(rearrange({first}, {pattern_in} -> {pattern_out}) as [{named}], {x}: {step}, {axes[dim]} -> {joined}_axis)")
        self.bind(node, f"{x} - {joined}[{joined}_axis = 0:-1 as {axes[dim]}]", present(axes))

    def op_cumsum(self, node):
        x, axes = self.operand(node.args[0])
        if not axes:
            self.bind(node, self.numeric(node, node.args[0], x), axes)
            return
        dim = node.args[1] % len(axes)
        if node.args[0].meta["val"].dtype == __import__("torch").bool:
            x = f"int({x})"
        if axes[dim] is None:
            self.bind(node, x, axes)
        else:
            self.bind(node, f"cumsum({x}, {axes[dim]})", axes)

    def constructed(self, node, name, value=None):
        """`ones(KIND[axes])`, `zeros(...)` or `full(..., value)` of the
        node's shape and dtype (a literal for rank 0, or where every axis is
        of size 1)."""
        meta = node.meta["val"]
        axes = self.axes_of(meta.shape)
        kind = _kind(meta.dtype)
        if isinstance(value, complex) or hasattr(value, "name"):
            self.unsupported(node, name, "a fill value given as a tensor or a complex number is not supported")
        number = {"ones": 1, "zeros": 0, "full": value}[name]
        literal = self.literal(node, number)
        if not present(axes):
            if kind in ("Real", "Int", "Mask"):
                self.values[node.name], self.axes[node.name] = literal, axes
            else:
                # A float literal is Real: the constructor keeps the dtype.
                self.bind(node, f"full({kind}[], {literal})", [])
            return
        extra = f", {literal}" if name == "full" else ""
        self.bind(node, f"{name}({kind}[{' '.join(present(axes))}]{extra})", present(axes))

    def op_ones(self, node):
        self.constructed(node, "ones")

    def op_zeros(self, node):
        self.constructed(node, "zeros")

    def op_full(self, node):
        """`full(shape, value)`, `full_like(x, value)`, `x.fill(value)`."""
        self.constructed(node, "full", node.args[1])

    def op_new_full(self, node):
        self.constructed(node, "full", node.args[2])

    def op_empty(self, node):
        """`empty` and its siblings: values torch leaves unspecified, here
        zeros (a layout's strides are not a nax value's)."""
        self.constructed(node, "zeros")

    op_empty_like = op_new_empty = op_empty_strided = op_new_empty_strided = op_empty_permuted = op_empty

    op_new_ones = op_ones_like = op_ones
    op_new_zeros = op_zeros_like = op_zeros
    op_full_like = op_fill = op_full

    def op_index(self, node):
        """Advanced indexing `x[i0, i1, ...]`: an index holding its own axis's
        positions (an arange) keeps that axis; one other index is a `take`."""
        x, axes = self.operand(node.args[0])
        gathers = []
        for position, index in enumerate(node.args[1]):
            if index is None:
                continue
            if index.name in self.aranges and self.aranges[index.name] == axes[position]:
                continue
            gathers.append((position, index))
        if not gathers:
            # Every index holds its own axis's positions: the value itself.
            self.bind(node, x, present(axes))
            return
        if any(self.is_mask(index) for _, index in gathers):
            self.unsupported(node, "index", "indexing by a mask gives a shape that depends on values, which nax's types cannot")
        if len(gathers) != 1 or axes[gathers[0][0]] is None:
            self.indexed_jointly(node, x, axes, [(p, i) for p, i in enumerate(node.args[1]) if i is not None])
            return
        position, index = gathers[0]
        ids, id_axes = self.operand(index)
        natural = present(axes[:position]) + present(id_axes or []) + present(axes[position + 1 :])
        self.bind(node, f"take({x}, {ids}, {axes[position]})", natural)

    def indexed_jointly(self, node, x, axes, indices):
        """`x[i0, i1, ...]` by several tensors of positions (broadcast
        together, negatives counted from the end): the indexed axes merged
        into one, taken at each position's row-major offset. The broadcast
        index axes stand where the indexed axes stood if those are
        neighbours, else first (torch's rule)."""
        positions = [p for p, _ in indices]
        shape = node.args[0].meta["val"].shape
        out = self.axes_of(node.meta["val"].shape)
        together = positions == list(range(positions[0], positions[-1] + 1))
        first = positions[0] if together else 0
        # The broadcast index axes: the result's names where they stand.
        own = out[first : first + len(out) - (len(axes) - len(positions))]
        rest = [a for i, a in enumerate(axes) if i not in positions and a is not None]
        ids = self.held(f"{node.name}_offsets", self.offsets(node, shape, indices, own), own)
        x, axes, before, after, flat = self.flattened(node, x, axes, positions, together)
        # x's other axes under names of their own where the index axes hold them.
        kept = {a: self.fresh(f"{a}_kept") if a in own else a for a in rest}
        moved = [kept[a] for a in before] + [flat] + [kept[a] for a in after]
        merged = f"(({x}) as [{' '.join(moved)}])" if [kept[a] for a in rest] != rest else x
        natural = [b for a in moved for b in (present(own) if a == flat else [a])]
        self.bind(node, f"take({merged}, {ids}, {flat})", natural)

    def offsets(self, node, shape, indices, own, wrap=True) -> str:
        """The row-major offsets of several tensors of positions (`indices`,
        pairs of an axis of `shape` and its positions) into those axes merged,
        broadcast together under the names `own` (negatives counted from the
        end where `wrap`, else left to fail where they are checked)."""
        offset, stride, partial = [], 1, False
        for p, index in reversed(indices):
            if hasattr(shape[p], "node"):
                self.unsupported(node, str(node.target), "indexing an axis of dynamic size by several tensors is not supported yet")
            size = int(shape[p])
            ids, names = self.lined_up(node, index, own)
            partial = partial or names != present(own)
            if size > 1:
                offset.append((f"where({ids} < 0, {ids} + {size}, {ids})" if wrap else ids) + (f" * {stride}" if stride > 1 else ""))
            else:
                offset.append(f"({ids} * 0)")
            stride *= size
        if partial:
            # Terms of some of the index axes each: summed onto zeros of them all.
            offset.append(self.repeat("0", [], present(own)))
        return " + ".join(reversed(offset))

    def flattened(self, node, x, axes, positions, together) -> tuple:
        """x with its axes at `positions` merged into one (a fresh name, a
        statement of its own), standing where the first stood if they are
        neighbours, else first: the value, x's axes (one of size 1 given a
        name if every indexed axis is), the axes before and after, the name."""
        indexed = [axes[p] for p in positions if axes[p] is not None]
        rest = [a for i, a in enumerate(axes) if i not in positions and a is not None]
        if not indexed:
            # Every indexed axis of size 1: the first given its name.
            x, axes = self.named(node, x, axes, positions[0])
            indexed = [axes[positions[0]]]
        flat = self.fresh("indexed")
        before = [a for i, a in enumerate(axes) if a is not None and i < positions[0]] if together else []
        after = [a for a in rest if a not in before]
        group = indexed[0] if len(indexed) == 1 else f"({' '.join(indexed)})"
        merged = self.held(f"{node.name}_merged", f"rearrange({x}, {' '.join(present(axes))} -> {' '.join(before + [group] + after)}) as [{' '.join(before + [flat] + after)}]", before + [flat] + after)
        return merged, axes, before, after, flat

    def op_index_select(self, node):
        """`take` along one axis by a rank-1 tensor of positions."""
        x, axes = self.operand(node.args[0])
        axes = axes or [None]
        dim = node.args[1] % len(axes)
        ids, id_axes = self.operand(node.args[2])
        if axes[dim] is None:
            # Of size 1: given a name, to take from (which checks the positions).
            x, axes = self.named(node, x, axes, dim)
        along = (id_axes or [None])[0]
        if along is not None and along in [a for i, a in enumerate(axes) if i != dim]:
            # The positions' axis under a name of its own (bind renames the result's axes).
            along = self.fresh(f"{id_axes[0]}_selected")
            ids = f"({ids} as [{along}])"
        natural = [along if i == dim else a for i, a in enumerate(axes)]
        self.bind(node, f"take({x}, {ids}, {axes[dim]})", natural)

    def op_flip(self, node):
        """The axes reversed: `take` of the positions counted down."""
        x, axes = self.operand(node.args[0])
        shape = node.meta["val"].shape
        for d in sorted({d % len(axes) for d in node.args[1]}) if axes else []:
            if axes[d] is not None and (hasattr(shape[d], "node") or int(shape[d]) > 0):
                x = f"take({x}, {axes[d]} - 1 - arange({axes[d]}), {axes[d]})"
        self.bind(node, x, axes)

    def op_repeat(self, node):
        """`x.repeat(r0, r1, ...)`: the operand tiled (`repeat(x, a -> (r a))`),
        new leading axes for repeats past its rank."""
        x, axes = self.operand(node.args[0])
        repeats = list(node.args[1])
        axes = axes or []
        out = self.axes_of(node.meta["val"].shape)
        lead = len(repeats) - len(axes)
        if any(not isinstance(r, int) for r in repeats):
            self.unsupported(node, "repeat", "repeats given by sizes of dynamic dims are not supported yet")
        have, want, sizes = present(axes), [], []
        for i, r in enumerate(repeats):
            if i < lead:
                if r != 1:
                    copies = self.fresh("r")
                    want.append(copies)
                    sizes.append(f"{copies}={r}")
                continue
            axis = axes[i - lead]
            if r == 1:
                if axis is not None:
                    want.append(axis)
            elif axis is None:
                copies = self.fresh("r")
                want.append(copies)
                sizes.append(f"{copies}={r}")
            else:
                copies = self.fresh("r")
                want.append(f"({copies} {axis})")
                sizes.append(f"{copies}={r}")
        if not sizes:
            self.identity(node)
            self.axes[node.name] = out
            return
        natural = ["_merged" if "(" in w else w for w in want]
        self.bind(node, f"repeat({x}, {' '.join(have)} -> {' '.join(want)}, {', '.join(sizes)})", natural)

    def op_scalar_tensor(self, node):
        self.constructed(node, "full", node.args[0])

    def op_argmax(self, node):
        self.arg_extremum(node, "argmax")

    def op_argmin(self, node):
        self.arg_extremum(node, "argmin")

    def arg_extremum(self, node, name):
        """`argmax(x, a)` along one axis (the first of a tie, as torch)."""
        x, axes = self.operand(node.args[0])
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        if dim is None or not axes:
            # Over the flattened tensor (axes of size 1 add no positions).
            have = present(axes or [])
            out = self.axes_of(node.meta["val"].shape)
            if not have:
                self.constructed(node, "zeros")
            else:
                along = have[0]
                if len(have) > 1:
                    along = self.fresh("flattened")
                    x = f"(rearrange({x}, {' '.join(have)} -> ({' '.join(have)})) as [{along}])"
                self.bind(node, f"{name}({x}, {along})", out)
            return
        dim %= len(axes)
        if axes[dim] is None:
            self.constructed(node, "zeros")
            return
        left = [None if i == dim else a for i, a in enumerate(axes)] if keep else [a for i, a in enumerate(axes) if i != dim]
        self.bind(node, f"{name}({x}, {axes[dim]})", left)

    def op_any(self, node):
        """Whether some element along the axes is true (nonzero): a count above 0."""
        x, axes = self.operand(node.args[0])
        truth = x if self.is_mask(node.args[0]) else f"({x} != 0)"
        self.reduce_then(node, f"int({truth})", axes, "sum", " > 0", keep_at=2)

    def op_var(self, node):
        """The variance: the mean square about the mean, times n / (n - correction)."""
        x, axes = self.operand(node.args[0])
        correction = node.kwargs.get("correction")
        if correction is None:
            # var.default(x, unbiased) or var.dim(x, dim, unbiased, keepdim).
            flags = [a for a in node.args[1:3] if isinstance(a, bool)]
            correction = 1 if (flags[0] if flags else True) else 0
        dims = self.dims_of(node, axes)
        kept = [a for d, a in enumerate(axes) if d in dims and a is not None]
        count = " * ".join(kept) if kept else "1"
        mean_all = over("mean", x, kept)
        squares = f"({x} - {mean_all}) * ({x} - {mean_all})"
        scale = f" * ({count} / ({count} - {correction}))" if correction else ""
        # var.dim(x, dim, unbiased, keepdim): keepdim is the fourth argument.
        self.reduce_then(node, squares, axes, "mean", scale, keep_at=3)

    def dims_of(self, node, axes) -> set:
        """The axes a reduction's `dim` argument names (every axis without one)."""
        dims = node.args[1] if len(node.args) > 1 and not isinstance(node.args[1], bool) else node.kwargs.get("dim")
        if not axes:
            return set()
        if dims is None or dims == []:
            return set(range(len(axes)))
        return {d % len(axes) for d in ([dims] if isinstance(dims, int) else dims)}

    def reduce_then(self, node, value, axes, name, after, keep_at):
        """`name` of `value` over the node's `dim` axes, then `after`; kept
        as size 1 with `keepdim` (argument `keep_at`, or the keyword)."""
        axes = axes or []
        dims = self.dims_of(node, axes)
        for d in sorted(dims):
            if axes[d] is not None:
                value = f"{name}({value}, {axes[d]})"
        keep = node.args[keep_at] if len(node.args) > keep_at else node.kwargs.get("keepdim", False)
        left = [a for i, a in enumerate(axes) if i not in dims]
        self.bind(node, f"({value}){after}" if after else value, left if not keep else [None if i in dims else a for i, a in enumerate(axes)])

    def op_select(self, node):
        """`x[a = i]`: one element along an axis, which goes."""
        x, axes = self.operand(node.args[0])
        dim = node.args[1] % len(axes)
        index = node.args[2] if isinstance(node.args[2], int) else self.operand(node.args[2])[0]
        left = [a for i, a in enumerate(axes) if i != dim]
        if axes[dim] is None:
            self.values[node.name], self.axes[node.name] = x, left
            return
        self.bind(node, f"{x}[{axes[dim]} = {index}]", left)

    def op_cat(self, node):
        """`concat` along one axis; the others take the result's names.
        Operands empty along it add nothing (torch's empty one-dimensional
        tensors, of any other shape, are left out as torch leaves them)."""
        out = self.axes_of(node.meta["val"].shape)
        dim = (node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)) % len(out)
        tensors = [t for t in node.args[0] if _hint(t.meta["val"].shape[dim] if t.meta["val"].dim() == len(out) else 0) != 0]
        if len(tensors) == 1:
            value, _ = self.lined_up(node, tensors[0], out)
            self.values[node.name], self.axes[node.name] = value, out
            return
        parts, joined = [], []
        for k, t in enumerate(tensors):
            value, axes = self.operand(t)
            if axes is None or len(axes) != len(out):
                self.unsupported(node, "cat", "operands of another rank are not supported yet")
            own = self.fresh(f"{out[dim]}_part{k}")
            if axes[dim] is None:
                # A part of size 1 along the axis (absent from its value): given one.
                others = [out[i] for i, a in enumerate(axes) if a is not None]
                if others != present(axes):
                    value = f"({value} as [{' '.join(others)}])"
                parts.append(self.with_axis(value, [out[i] if a is not None else None for i, a in enumerate(axes)], dim, own))
            else:
                names = [own if i == dim else out[i] for i, a in enumerate(axes) if a is not None]
                parts.append(f"({value} as [{' '.join(names)}])")
            joined.append(own)
        self.bind(node, f"concat({', '.join(parts)}: {', '.join(joined)} -> {out[dim]})", out)

    def op_stack(self, node):
        """Operands joined along a new axis: each given an axis of size 1 of
        its own (`repeat`), then `concat` along them."""
        tensors = node.args[0]
        out = self.axes_of(node.meta["val"].shape)
        dim = (node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)) % len(out)
        if out[dim] is None:
            # One operand: its value, an axis of size 1 more.
            self.values[node.name], self.axes[node.name] = self.operand(tensors[0])[0], out
            return
        parts, joined = [], []
        for k, t in enumerate(tensors):
            value, axes = self.operand(t)
            others = [a for i, a in enumerate(out) if i != dim]
            if axes is None or len(axes) != len(others):
                self.unsupported(node, "stack", "stacking operands of another rank is not supported yet")
            own = self.fresh(f"{out[dim]}_part{k}")
            renamed = [others[i] for i, a in enumerate(axes) if a is not None]
            if renamed != present(axes):
                value = f"({value} as [{' '.join(renamed)}])"
            parts.append(self.with_axis(value, [None if i == dim else a for i, a in enumerate(out)], dim, own))
            joined.append(own)
        self.bind(node, f"concat({', '.join(parts)}: {', '.join(joined)} -> {out[dim]})", out)

    def op__weight_norm(self, node):
        """`_weight_norm(v, g, dim)` (`weight_norm`'s reparametrization):
        `v * g / ||v||`, the norm over every axis but `dim` (over every axis
        where `dim` is -1, as torch's)."""
        v, names, _ = self.every_axis(node.args[0], "weight")
        dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
        kept = None if dim == -1 else names[dim % len(names)]
        squares = over("sum", f"{v} * {v}", [a for a in names if a != kept])
        g, _ = self.lined_up(node, node.args[1], names)
        self.settled(node, f"{v} * ({g} / sqrt({squares}))", names)

    def op_embedding_bag(self, node):
        """`aten.embedding_bag`: each bag's rows of the table (`take`),
        summed, averaged or maximized over the bag's members, weighted by
        `per_sample_weights`, leaving out `padding_idx`. Bags are the rows
        of two-dimensional indices, or runs of one-dimensional indices that
        `offsets` start (membership a mask of the positions each run spans;
        an empty bag gives 0, as torch's)."""
        args = list(node.args) + [None] * (9 - len(node.args))
        weight, indices, offsets, _, mode, _, weights, include_last, padding = args
        mode = {None: "sum", 0: "sum", 1: "mean", 2: "max"}[mode]
        (table, table_axes), (ids, id_axes) = self.operand(weight), self.operand(indices)
        if None in table_axes or None in (id_axes or [None]):
            self.unsupported(node, "embedding_bag", "a table, bag or index axis of size 1 is not supported yet")
        out = self.axes_of(node.meta["val"][0].shape)
        member, bag = self.fresh("member"), self.fresh("bag")
        if len(id_axes) == 2:
            ids = self.held(f"{node.name}_ids", f"({ids}) as [{bag} {member}]", [bag, member])
            within = self.repeat("true", [], [bag, member])
        else:
            ids = self.held(f"{node.name}_ids", f"({ids}) as [{member}]", [member])
            starts, _ = self.operand(offsets)
            count = _hint(offsets.meta["val"].shape[0])
            offsets_axis = self.operand(offsets)[1][0]
            if include_last:
                starts, ends = f"{starts}[{offsets_axis} = 0:{count - 1} as {bag}]", f"{starts}[{offsets_axis} = 1: as {bag}]"
            else:
                later, length = self.fresh("later"), self.fresh("length")
                ends = f"concat({starts}[{offsets_axis} = 1: as {later}], repeat({member}, -> {length}, {length}=1): {later}, {length} -> {bag})"
                starts = f"({starts}) as [{bag}]"
            positions = f"rearrange(arange({member}), {member} -> 1 {member})"
            within = f"({positions} >= rearrange({starts}, {bag} -> {bag} 1)) and ({positions} < rearrange({ends}, {bag} -> {bag} 1))"
        if padding is not None:
            # aten's padding_idx counts from the end when negative.
            within = f"({within}) and ({ids} != {padding % _hint(weight.meta['val'].shape[0])})"
        within = self.held(f"{node.name}_within", within, [bag, member])
        rows = f"take({table}, {ids}, {table_axes[0]})"
        if weights is not None:
            scale, _ = self.operand(weights)
            scale = f"({scale}) as [{bag + ' ' if len(id_axes) == 2 else ''}{member}]"
            rows = f"{rows} * rearrange({scale}, {'%s ' % bag if len(id_axes) == 2 else ''}{member} -> {'%s ' % bag if len(id_axes) == 2 else ''}{member} 1)"
        rows = self.held(f"{node.name}_rows", rows, ([bag] if len(id_axes) == 2 else []) + [member, table_axes[1]])
        chosen = f"rearrange({within}, {bag} {member} -> {bag} {member} 1)"
        if mode == "max":
            largest = f"max(where({chosen}, {rows}, -inf), {member})"
            value = f"where(rearrange(sum(int({within}), {member}), {bag} -> {bag} 1) > 0, {largest}, 0)"
        else:
            value = f"sum(where({chosen}, {rows}, 0), {member})"
            if mode == "mean":
                count = self.converted(None, f"maximum(sum(int({within}), {member}), 1)", weight.meta["val"].dtype)
                value = f"{value} / rearrange({count}, {bag} -> {bag} 1)"
        result = self.held(f"{node.name}_bags", f"({value}) as [{' '.join(present(out))}]", present(out))
        self.pairs[node.name] = [(result, out)]

    op__embedding_bag = op_embedding_bag

    def op_embedding_renorm_(self, node):
        """`max_norm`'s renormalization of the table's rows, in place."""
        self.unsupported(node, "embedding_renorm_", "max_norm renormalizes the table in place, a mutation of an argument, which a nax function does not make")

    def op_embedding(self, node):
        """A lookup (`take`); `padding_idx` changes only the gradient."""
        (table, table_axes), (ids, id_axes) = self.operand(node.args[0]), self.operand(node.args[1])
        rows = present(table_axes[1:])
        clash = [a for a in present(id_axes or []) if a in rows]
        if clash:
            # The positions' axes under names of their own (bind renames the result's).
            own = [self.fresh(f"{a}_ids") if a in clash else a for a in present(id_axes)]
            ids = f"({ids} as [{' '.join(own)}])"
            self.bind(node, f"take({table}, {ids}, {table_axes[0]})", own + rows)
        else:
            self.bind(node, f"take({table}, {ids}, {table_axes[0]})", present(id_axes or []) + rows)

    def op_scaled_dot_product_attention(self, node):
        """softmax(q k^T * scale + an additive mask, masked where a boolean
        mask is false and above the diagonal when causal) v. Every axis is
        given its name first (a query or a key of one, a head of size 1),
        and the keys, the contracted head and the values' head are named
        apart from the queries' axes, whatever their sizes: the shared head
        of q and k is one axis, the keys another."""
        if node.kwargs.get("enable_gqa"):
            self.unsupported(node, "scaled_dot_product_attention", "grouped query heads (enable_gqa) are not supported yet")
        mask = node.args[3] if len(node.args) > 3 else node.kwargs.get("attn_mask")
        dropout = node.args[4] if len(node.args) > 4 else node.kwargs.get("dropout_p", 0.0)
        causal = node.args[5] if len(node.args) > 5 else node.kwargs.get("is_causal", False)
        scale = node.kwargs.get("scale") or 1.0 / _hint(node.args[0].meta["val"].shape[-1]) ** 0.5
        if dropout:
            self.unsupported(node, "scaled_dot_product_attention", "dropout is not supported")
        shapes = [list(a.meta["val"].shape) for a in node.args[:3]]
        if not (len(shapes[0]) == len(shapes[1]) == len(shapes[2]) and shapes[0][:-2] == shapes[1][:-2] == shapes[2][:-2]):
            self.unsupported(node, "scaled_dot_product_attention", "queries, keys and values of batches that broadcast are not supported yet")
        q, qn, _ = self.every_axis(node.args[0], "query")
        k, _, _ = self.every_axis(node.args[1], "key")
        v, _, _ = self.every_axis(node.args[2], "value")
        batch, queries, head = qn[:-2], qn[-2], qn[-1]
        keys, value_head = self.fresh(f"{node.name}_keys"), self.fresh(f"{node.name}_head")
        keyed, valued = batch + [keys, head], batch + [keys, value_head]
        name = self.held(
            node.name + "_scores",
            f"einsum({q}, ({k} as [{' '.join(keyed)}]): {' '.join(qn)}, {' '.join(keyed)} -> {' '.join(batch + [queries, keys])}) * {scale!r}",
            batch + [queries, keys],
        )
        if mask is not None:
            m, _ = self.lined_up(node, mask, batch + [queries, keys])
            if mask.meta["val"].dtype == __import__("torch").bool:
                self.lines.append(f"{name} = masked_fill({name}, !{m}, -inf)")
            else:
                self.lines.append(f"{name} = {name} + {m}")
        if causal:
            # torch's causal mask is the lower triangle from the top left (a
            # key is visible where its position is at most the query's),
            # whatever the keys' length.
            visible = self.held(node.name + "_visible", f"rearrange(arange({queries}), {queries} -> {queries} 1) >= arange({keys})", [queries, keys])
            self.lines.append(f"{name} = masked_fill({name}, !{visible}, -inf)")
        weights = f"softmax({name}, {keys})"
        self.settled(node, f"einsum({weights}, ({v} as [{' '.join(valued)}]): {' '.join(batch + [queries, keys])}, {' '.join(valued)} -> {' '.join(batch + [queries, value_head])})", batch + [queries, value_head])


def p_norm(difference: str, feature, p: float) -> str:
    """The p-norm of `difference` over axis `feature` (`None`: of one element,
    its absolute value; p = 0 counts the nonzero, p = inf takes the largest)."""
    if feature is None:
        return f"float({difference} != 0.0)" if p == 0.0 else f"abs({difference})"
    if p == float("inf"):
        return f"max(abs({difference}), {feature})"
    norms = {2.0: f"sqrt(sum({difference} * {difference}, {feature}))", 1.0: f"sum(abs({difference}), {feature})", 0.0: f"sum(float({difference} != 0.0), {feature})"}
    return norms[p] if p in norms else f"pow(sum(pow(abs({difference}), {p!r}), {feature}), {1.0 / p!r})"


def over(reduction: str, value: str, axes) -> str:
    """`reduction(... reduction(value, a) ..., z)` over each of `axes` in turn."""
    for a in axes:
        value = f"{reduction}({value}, {a})"
    return value


def _f64(c: float) -> str:
    """A constant of f64 (a `where` of literals alone would be f32)."""
    return f"full(f64[], {c!r})"


def _float_kind(node) -> str:
    """The conversion to the node's (first result's) float dtype: `float`, `f64`, `bf16`, `f16`."""
    value = node.meta["val"]
    return {"Real": "float", "f64": "f64", "bf16": "bf16", "f16": "f16"}[_kind((value[0] if isinstance(value, (list, tuple)) else value).dtype)]


def present(axes) -> list:
    """The axes a nax value has: its torch axes but those of size 1."""
    return [a for a in axes if a is not None]


def _hint(size) -> int:
    """A size's value in the example the program was exported with."""
    return int(size.node.hint) if hasattr(size, "node") else int(size)


def _kind(dtype) -> str:
    """A torch dtype as a nax element kind."""
    import torch

    kinds = {torch.float32: "Real", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64", torch.int64: "Int", torch.int32: "i32", torch.bool: "Mask"}
    if dtype not in kinds:
        raise UnsupportedOperator(f"the dtype {dtype} has no nax kind")
    return kinds[dtype]


def main(argv=None) -> int:
    """``python -m nax.importer MODEL.pt2 -o DIR``: a saved ``torch.export``
    program as DIR/model.nax and DIR/weights.safetensors."""
    import argparse

    import torch

    parser = argparse.ArgumentParser(prog="python -m nax.importer", description=main.__doc__.splitlines()[0])
    parser.add_argument("program", help="a .pt2 file written by torch.export.save")
    parser.add_argument("-o", "--out", required=True, help="the directory to write")
    options = parser.parse_args(argv)
    try:
        imported = from_torch(torch.export.load(options.program))
    except UnsupportedOperator as e:
        print(f"error: {options.program}: {e}", file=__import__("sys").stderr)
        return 1
    imported.save(options.out)
    print(f"wrote {os.path.join(options.out, 'model.nax')} and {os.path.join(options.out, 'weights.safetensors')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
