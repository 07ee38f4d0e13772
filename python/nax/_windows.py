"""The importer's sliding windows: convolutions, pools, padding by
reflection or replication, and resampling (``nax.from_torch``).

The language has no window operation. A window over an axis is written
as its taps: tap j of a kernel of k is the slice ``x[a = j*d : ... : s]``
(d the dilation, s the stride), each given an axis of size 1 and joined by
``concat`` into a taps axis; a convolution is then an ``einsum`` over the
channels and the taps, a pool a reduction over the taps. Padding is a
``concat`` of the fill value; reflection, replication and resampling are
``take`` by positions computed from ``arange`` (integers, or floats
floored as torch floors them). Every size here is static.

The cost is the kernel's size in memory (k copies of the input), not a
loop: correct first, the kernel fuser's to make fast.
"""

from __future__ import annotations

import math


def _per_dim(value, count: int) -> list:
    """A kernel, stride, padding or dilation argument as one int per spatial dim."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    return values * count if len(values) == 1 else values


class WindowWriter:
    """Convolutions, pools, padding and resampling, for `_Writer` (which
    provides `operand`, `held`, `fresh`, `bind`, `repeat`, `literal` and the
    node bookkeeping)."""

    # ---- axes all present -------------------------------------------------

    def every_axis(self, arg, prefix: str) -> tuple:
        """`arg`'s value with every torch axis present (one of size 1 under a
        fresh name), its names, and its sizes."""
        from .importer import present

        value, axes = self.operand(arg)
        axes = axes or []
        sizes = [int(size) for size in arg.meta["val"].shape]
        names = [a if a is not None else self.fresh(f"{prefix}_one") for a in axes]
        if None in axes:
            ones = ", ".join(f"{n}=1" for n, a in zip(names, axes) if a is None)
            value = self.held(f"{prefix}_whole", f"repeat({value}, {' '.join(present(axes))} -> {' '.join(names)}, {ones})", names)
        return value, names, sizes

    def settled(self, node, value: str, names: list, index: int | None = None):
        """Binds `value` (every axis present, `names`) as the node's (its
        `index`-th item where the node has several), taking axes the
        result has of size 1 at their one position."""
        shape = node.meta["val"].shape if index is None else node.meta["val"][index].shape
        out = self.axes_of(shape)
        for name, axis in zip(names, out):
            if axis is None:
                value = f"({value})[{name} = 0]"
        kept = [n for n, a in zip(names, out) if a is not None]
        if index is None:
            self.bind(node, value, kept)
        else:
            held = self.held(f"{node.name}_item", f"({value}) as [{' '.join(a for a in out if a is not None)}]" if kept else value, [a for a in out if a is not None])
            self.pairs.setdefault(node.name, []).append((held, out))

    def zero_of(self, node) -> str:
        """A zero of the node's dtype (a literal where its kind is a literal's)."""
        return self.filled(node, 0)

    def filled(self, node, number) -> str:
        """`number` in the node's dtype: a literal where its kind is a literal's, else `full`."""
        from .importer import _kind

        kind = _kind(node.meta["val"].dtype if not isinstance(node.meta["val"], (list, tuple)) else node.meta["val"][0].dtype)
        literal = self.literal(node, number) if not isinstance(node.meta["val"], (list, tuple)) else repr(float(number))
        return literal if kind in ("Real", "Int", "Mask") else f"full({kind}[], {literal})"

    # ---- padding and taps ---------------------------------------------------

    def padded(self, node, x, names, sizes, i, low, high, fill):
        """x padded along axis `i` by `low` and `high` positions of `fill` (a
        negative pad crops): the value, its names and sizes."""
        if low < 0 or high < 0:
            cropped = self.fresh(f"{names[i]}_cropped")
            start, stop = max(-low, 0), sizes[i] - max(-high, 0)
            x = self.held(f"{node.name}_cropped", f"{x}[{names[i]} = {start}:{stop} as {cropped}]", names[:i] + [cropped] + names[i + 1 :])
            names, sizes = names[:i] + [cropped] + names[i + 1 :], sizes[:i] + [stop - start] + sizes[i + 1 :]
            low, high = max(low, 0), max(high, 0)
        if low == 0 and high == 0:
            return x, names, sizes
        parts, joined = [], []
        for count, role in ((low, "before"), (None, "middle"), (high, "after")):
            if count == 0:
                continue
            own = self.fresh(f"{names[i]}_{role}")
            joined.append(own)
            grown = names[:i] + [own] + names[i + 1 :]
            parts.append(f"({x} as [{' '.join(grown)}])" if count is None else f"repeat({fill}, -> {' '.join(grown)}, {own}={count})")
        merged = self.fresh(f"{names[i]}_padded")
        names = names[:i] + [merged] + names[i + 1 :]
        x = self.held(f"{node.name}_padded", f"concat({', '.join(parts)}: {', '.join(joined)} -> {merged})", names)
        return x, names, sizes[:i] + [sizes[i] + low + high] + sizes[i + 1 :]

    def tapped(self, node, x, names, sizes, i, kernel, stride, dilation, count):
        """Axis `i` as `count` window positions times `kernel` taps (each
        tap a strided slice, joined along a taps axis): the value, its names
        and sizes (axis i replaced by the positions' and the taps')."""
        along, positions, taps = names[i], self.fresh(f"{names[i]}_at"), self.fresh(f"{names[i]}_tap")
        kept = names[:i] + [positions] + names[i + 1 :]
        parts, joined = [], []
        for j in range(kernel):
            own = self.fresh("tap")
            step = f":{stride}" if stride != 1 else ""
            cut = f"{x}[{along} = {j * dilation}:{j * dilation + (count - 1) * stride + 1}{step} as {positions}]"
            parts.append(f"repeat({cut}, {' '.join(kept)} -> {' '.join(names[:i] + [positions, own] + names[i + 1 :])}, {own}=1)")
            joined.append(own)
        names = names[:i] + [positions, taps] + names[i + 1 :]
        if kernel == 1:
            x = self.held(f"{node.name}_taps", f"({parts[0]}) as [{' '.join(names)}]", names)
        else:
            x = self.held(f"{node.name}_taps", f"concat({', '.join(parts)}: {', '.join(joined)} -> {taps})", names)
        return x, names, sizes[:i] + [count, kernel] + sizes[i + 1 :]

    def windows(self, node, x, names, sizes, spatial, kernel, stride, padding, dilation, fill, ceil_mode=False):
        """Windows over the last `spatial` axes: each padded, then tapped.
        Returns the value, names, sizes, and per spatial axis (its position
        in the names, its positions' count, the padding before it)."""
        laid, first = [], len(names) - spatial
        for k in range(spatial):
            i = first + 2 * k  # each earlier spatial axis became two
            n, kk, s, p, d = sizes[i], kernel[k], stride[k], padding[k], dilation[k]
            span = d * (kk - 1) + 1
            count = (n + 2 * p - span + (s - 1 if ceil_mode else 0)) // s + 1
            if ceil_mode and (count - 1) * s >= n + p:
                count -= 1  # torch's last window starts inside the input or its left padding
            extra = max((count - 1) * s + span - (n + 2 * p), 0)
            x, names, sizes = self.padded(node, x, names, sizes, i, p, p + extra, fill)
            x, names, sizes = self.tapped(node, x, names, sizes, i, kk, s, d, count)
            laid.append((i, count, p))
        return x, names, sizes, laid

    # ---- convolution ------------------------------------------------------

    def op_conv1d(self, node):
        """`conv1d(input, weight, bias, stride, padding, dilation, groups)`
        (and 2d, 3d; `padding` a number, or "same" or "valid")."""
        args = list(node.args) + [None] * (7 - len(node.args))
        inp, weight, bias, stride, padding, dilation, groups = args
        self.convolved(node, inp, weight, bias, stride or 1, 0 if padding is None else padding, dilation or 1, False, 0, groups or 1)

    op_conv2d = op_conv3d = op_conv1d

    def op_conv_transpose1d(self, node):
        """`conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups, dilation)` (and 2d, 3d)."""
        args = list(node.args) + [None] * (8 - len(node.args))
        inp, weight, bias, stride, padding, output_padding, groups, dilation = args
        self.convolved(node, inp, weight, bias, stride or 1, padding or 0, dilation or 1, True, output_padding or 0, groups or 1)

    op_conv_transpose2d = op_conv_transpose3d = op_conv_transpose1d

    def op_convolution(self, node):
        args = list(node.args) + [None] * (9 - len(node.args))
        inp, weight, bias, stride, padding, dilation, transposed, output_padding, groups = args
        self.convolved(node, inp, weight, bias, stride, padding, dilation, transposed, output_padding, groups or 1)

    def convolved(self, node, inp, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
        """`aten.convolution`: windows of the input, an `einsum` with the
        weight over the channels (in `groups`) and the taps, plus the bias.
        A transposed convolution is the direct one over the input spread
        by the stride (zeros between), padded by the kernel's span less the
        padding, with the kernel flipped and its channels swapped. An input
        without a batch axis is given one."""
        if any(hasattr(size, "node") for size in list(inp.meta["val"].shape) + list(weight.meta["val"].shape)):
            self.unsupported(node, "convolution", "a convolution over axes of dynamic size is not supported yet")
        x, xn, xs = self.every_axis(inp, "input")
        w, wn, ws = self.every_axis(weight, "weight")
        if len(xs) == len(ws) - 1:
            batch = self.fresh("batch")
            x = self.held(f"{node.name}_batched", f"repeat({x}, {' '.join(xn)} -> {' '.join([batch] + xn)}, {batch}=1)", [batch] + xn)
            xn, xs = [batch] + xn, [1] + xs
        spatial = len(xs) - 2
        dilation = _per_dim(dilation, spatial)
        if isinstance(padding, str):
            # "valid": none; "same": the kernel's span less one, the odd one after.
            total = [0 if padding == "valid" else d * (k - 1) for d, k in zip(dilation, ws[2:])]
            for k, extra in enumerate(total):
                x, xn, xs = self.padded(node, x, xn, xs, 2 + k, extra // 2, extra - extra // 2, self.zero_of(node))
            padding = 0
        stride, padding = _per_dim(stride, spatial), _per_dim(padding, spatial)
        if transposed:
            x, xn, xs, w, wn, ws, padding = self.transposed(node, x, xn, xs, w, wn, ws, stride, padding, dilation, _per_dim(output_padding or 0, spatial), groups)
            stride = [1] * spatial
        x, xn, xs, laid = self.windows(node, x, xn, xs, spatial, ws[2:], stride, padding, dilation, self.zero_of(node))
        batch, channels = xn[0], xn[1]
        taps, positions = [xn[i + 1] for i, _, _ in laid], [xn[i] for i, _, _ in laid]
        out_channels = self.fresh("out_channels")
        result = [batch, out_channels] + positions
        if groups == 1:
            w = f"({w} as [{' '.join([out_channels, channels] + taps)}])"
            value = f"einsum({x}, {w}: {' '.join(xn)}, {' '.join([out_channels, channels] + taps)} -> {' '.join(result)})"
        else:
            group, per_in, per_out = self.fresh("group"), self.fresh("group_in"), self.fresh("group_out")
            x_names = [batch, group, per_in] + xn[2:]
            x = self.held(f"{node.name}_grouped", f"rearrange({x}, {' '.join([batch, f'({group} {per_in})'] + xn[2:])} -> {' '.join(x_names)}, {group}={groups})", x_names)
            w_names = [group, per_out, per_in] + taps
            w = self.held(f"{node.name}_weights", f"rearrange({w}, {' '.join([f'({group} {per_out})', per_in] + taps)} -> {' '.join(w_names)})", w_names)
            grouped = [batch, group, per_out] + positions
            value = f"einsum({x}, {w}: {' '.join(x_names)}, {' '.join(w_names)} -> {' '.join(grouped)})"
            value = f"rearrange({value}, {' '.join(grouped)} -> {' '.join([batch, f'({group} {per_out})'] + positions)}) as [{' '.join(result)}]"
        value = self.held(f"{node.name}_convolved", value, result)
        if bias is not None:
            b, _, _ = self.every_axis(bias, "bias")
            value = f"{value} + ({b} as [{out_channels}])"
        if len(node.meta["val"].shape) == len(result) - 1:
            value, result = f"({value})[{batch} = 0]", result[1:]
        self.settled(node, value, result)

    def transposed(self, node, x, xn, xs, w, wn, ws, stride, padding, dilation, output_padding, groups):
        """A transposed convolution's input and weight as a direct one's:
        the input spread by the stride (s - 1 zeros after each element, the
        last ones cut), the weight's taps reversed and its two channel axes
        swapped within each group; and the padding each side then takes."""
        for k, s in enumerate(stride):
            i = 2 + k
            if s == 1:
                continue
            gap, spread, inserted = self.fresh("gap"), self.fresh(f"{xn[i]}_spread"), self.fresh("zeros")
            element = self.fresh("element")
            with_gap = xn[: i + 1] + [gap] + xn[i + 1 :]
            joined = self.held(
                f"{node.name}_spread",
                f"concat(repeat({x}, {' '.join(xn)} -> {' '.join(xn[: i + 1] + [element] + xn[i + 1 :])}, {element}=1), "
                f"repeat({self.zero_of(node)}, -> {' '.join(xn[: i + 1] + [inserted] + xn[i + 1 :])}, {inserted}={s - 1}): {element}, {inserted} -> {gap})",
                with_gap,
            )
            length = (xs[i] - 1) * s + 1
            flat = xn[: i] + [f"({xn[i]} {gap})"] + xn[i + 1 :]
            wide = self.fresh(f"{xn[i]}_wide")
            merged = f"(rearrange({joined}, {' '.join(with_gap)} -> {' '.join(flat)}) as [{' '.join(xn[:i] + [wide] + xn[i + 1:])}])"
            x = self.held(f"{node.name}_spread", f"{merged}[{wide} = 0:{length} as {spread}]", xn[:i] + [spread] + xn[i + 1 :])
            xn, xs = xn[:i] + [spread] + xn[i + 1 :], xs[:i] + [length] + xs[i + 1 :]
        # The weight: [in, out/groups, taps...] -> [out, in/groups, taps reversed...].
        group, per_in, per_out = self.fresh("group"), self.fresh("group_in"), self.fresh("group_out")
        taps = wn[2:]
        wn = [self.fresh("swapped_out"), per_in] + taps
        swapped = [f"({group} {per_out})", per_in] + taps
        w = self.held(f"{node.name}_swapped", f"rearrange({w}, {' '.join([f'({group} {per_in})', per_out] + taps)} -> {' '.join(swapped)}, {group}={groups}) as [{' '.join(wn)}]", wn)
        for t, size in zip(taps, ws[2:]):
            if size > 1:
                w = self.held(f"{node.name}_flipped", f"take({w}, {size - 1} - arange({t}), {t})", wn)
        ws = [ws[1] * groups, ws[0] // groups] + ws[2:]
        padding = [d * (k - 1) - p for d, k, p in zip(dilation, ws[2:], padding)]
        for k, extra in enumerate(output_padding):
            if extra:
                x, xn, xs = self.padded(node, x, xn, xs, 2 + k, 0, extra, self.zero_of(node))
        return x, xn, xs, w, wn, ws, padding
