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


def _cubic(t: str) -> list:
    """torch's cubic convolution weights (A = -0.75) of the four positions
    around a point at fraction `t` past the second."""
    a = -0.75

    def near(u):  # |u| <= 1
        return f"(({a + 2!r} * ({u}) - {a + 3!r}) * ({u}) * ({u}) + 1.0)"

    def far(u):  # 1 < |u| < 2
        return f"((({a!r} * ({u}) - {5 * a!r}) * ({u}) + {8 * a!r}) * ({u}) - {4 * a!r})"

    return [far(f"{t} + 1.0"), near(t), near(f"1.0 - {t}"), far(f"2.0 - {t}")]


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
        fresh name), its names, and its sizes (`None` where dynamic)."""
        from .importer import present

        value, axes = self.operand(arg)
        axes = axes or []
        sizes = [None if hasattr(size, "node") else int(size) for size in arg.meta["val"].shape]
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
        if (low or high) and sizes[i] is None:
            self.unsupported(node, str(node.target), "padding an axis of dynamic size is not supported yet")
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
        self.convolve(node, (x, xn, xs), (w, wn, ws), bias, stride, padding, dilation, transposed, output_padding, groups)

    def convolve(self, node, inp, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
        """`convolved` of values: the input's and the weight's (value, names, sizes)."""
        (x, xn, xs), (w, wn, ws) = inp, weight
        if len(xs) == len(ws) - 1:
            (x, xn), xs = self.named(node, x, [None] + xn, 0, "batch"), [1] + xs
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

    def op_col2im(self, node):
        """`col2im` (`fold`): blocks of `kernel` positions summed back into
        their places, the transposed convolution of the blocks' grid by a
        weight that takes block channel (c, tap) to channel c at that tap
        (a mask of equal positions)."""
        from .importer import _float_kind

        output_size, kernel, dilation, padding, stride = (_per_dim(a, 2) for a in node.args[1:6])
        x, xn, xs = self.every_axis(node.args[0], "input")
        if len(xs) == 2:
            (x, xn), xs = self.named(node, x, [None] + xn, 0, "batch"), [1] + xs
        taps = kernel[0] * kernel[1]
        grid = [(output_size[k] + 2 * padding[k] - dilation[k] * (kernel[k] - 1) - 1) // stride[k] + 1 for k in range(2)]
        rows, cols = self.fresh("block_rows"), self.fresh("block_cols")
        x = self.held(f"{node.name}_grid", f"rearrange({x}, {xn[0]} {xn[1]} ({rows} {cols}) -> {xn[0]} {xn[1]} {rows} {cols}, {rows}={grid[0]})", [xn[0], xn[1], rows, cols])
        channels, across, down = self.fresh("channels"), self.fresh("tap_rows"), self.fresh("tap_cols")
        column = f"rearrange(arange({xn[1]}), {xn[1]} -> {xn[1]} 1 1 1)"
        sizes = f"repeat(0, -> {channels} {across} {down}, {channels}={xs[1] // taps}, {across}={kernel[0]}, {down}={kernel[1]})"
        place = f"{sizes} + rearrange(arange({channels}) * {taps}, {channels} -> {channels} 1 1) + rearrange(arange({across}) * {kernel[1]}, {across} -> {across} 1) + arange({down})"
        weight = self.held(f"{node.name}_placing", f"{_float_kind(node)}(where({column} == {place}, 1.0, 0.0))", [xn[1], channels, across, down])
        reached = [(grid[k] - 1) * stride[k] - 2 * padding[k] + dilation[k] * (kernel[k] - 1) + 1 for k in range(2)]
        extra = [output_size[k] - reached[k] for k in range(2)]
        self.convolve(node, (x, [xn[0], xn[1], rows, cols], [xs[0], xs[1]] + grid), (weight, [xn[1], channels, across, down], [xs[1], xs[1] // taps] + kernel), None, stride, padding, dilation, True, extra, 1)

    def op_unfold(self, node):
        """`x.unfold(dim, size, step)`: the axis as its windows' positions,
        each window's `size` elements a new last axis."""
        dim, size, step = node.args[1:4]
        x, xn, xs = self.every_axis(node.args[0], "input")
        if not xn:
            # A number's one window: itself, an axis of size 1 more.
            self.bind(node, x, [None])
            return
        dim %= len(xn)
        x, xn, xs = self.tapped(node, x, xn, xs, dim, size, step, 1, (xs[dim] - size) // step + 1)
        last = xn[:dim + 1] + xn[dim + 2 :] + [xn[dim + 1]]
        self.settled(node, f"rearrange({x}, {' '.join(xn)} -> {' '.join(last)})", last)

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

    # ---- pools --------------------------------------------------------------

    def spatial_of(self, node) -> int:
        """How many spatial axes the operator's name says (`max_pool2d`: 2)."""
        name = getattr(node.target, "__name__", str(node.target)).split(".")[0]
        return int(name.rstrip("_").split("pool")[-1].split("_")[0][0]) if "pool" in name else int(name[-2]) if name.endswith("d") else 1

    def op_max_pool2d(self, node):
        """`max_pool{1,2,3}d(x, kernel, stride, padding, dilation, ceil_mode)`: the
        largest of each window (nan if any is, as torch's), windows padded by -inf."""
        self.max_pooled(node, with_indices=False)

    op_max_pool1d = op_max_pool3d = op_max_pool2d

    def op_max_pool2d_with_indices(self, node):
        """As `max_pool2d`, and each largest element's index in its input
        plane (row-major over the spatial axes): the first of a tie, the
        last nan where there is one, as torch's loops choose."""
        self.max_pooled(node, with_indices=True)

    op_max_pool1d_with_indices = op_max_pool3d_with_indices = op_max_pool2d_with_indices

    def pool_arguments(self, node, spatial):
        args = list(node.args) + [None] * (6 - len(node.args))
        kernel = _per_dim(args[1], spatial)
        stride = _per_dim(args[2], spatial) if args[2] else kernel
        return kernel, stride, args

    def max_pooled(self, node, with_indices):
        spatial = self.spatial_of(node)
        kernel, stride, args = self.pool_arguments(node, spatial)
        padding, dilation = _per_dim(args[3] or 0, spatial), _per_dim(args[4] or 1, spatial)
        ceil_mode = bool(args[5])
        from .importer import over

        x, xn, xs = self.every_axis(node.args[0], "input")
        plane = xs[len(xs) - spatial :]
        if node.args[0].meta["val"].dtype.is_floating_point:
            fill = self.filled(node, float("-inf"))
        else:
            # Integers have no -inf: the least element pads (never above a window's own).
            fill = self.held(f"{node.name}_least", over("min", x, xn), [])
        x, xn, xs, laid = self.windows(node, x, xn, xs, spatial, kernel, stride, padding, dilation, fill, ceil_mode)
        taps = [xn[i + 1] for i, _, _ in laid]
        kept = [a for a in xn if a not in taps]
        largest = self.held(f"{node.name}_largest", over("max", x, taps), kept)
        if not with_indices:
            self.settled(node, largest, kept)
            return
        # Each tap's place: its row-major position among the taps, its index
        # in the input plane, and whether it lies in the input (not padding).
        trailing = lambda k: " 1" * (2 * (spatial - 1 - k))  # noqa: E731 - the later spatial axes' places
        order, index, inside = [], [], []
        later_taps, later_plane = 1, 1
        for k in reversed(range(spatial)):
            (i, _, pad), t = laid[k], taps[k]
            at = xn[i]
            where_in = f"rearrange(rearrange(arange({at}), {at} -> {at} 1) * {stride[k]} + arange({t}) * {dilation[k]} - {pad}, {at} {t} -> {at} {t}{trailing(k)})"
            where_in = self.held(f"{node.name}_place", where_in, [at, t])
            order.append(f"rearrange(arange({t}), {t} -> {t}{trailing(k)}) * {later_taps}")
            index.append(f"{where_in} * {later_plane}")
            inside.append(f"({where_in} >= 0 and {where_in} < {plane[k]})")
            later_taps, later_plane = later_taps * kernel[k], later_plane * plane[k]
        order = self.held(f"{node.name}_order", " + ".join(order), taps)
        places = [a for a in xn if a in taps or a in [xn[i] for i, _, _ in laid]]
        index = self.held(f"{node.name}_index", " + ".join(index), places)
        inside = self.held(f"{node.name}_inside", " and ".join(inside), places)
        spread = " ".join(a if a not in taps else "1" for a in xn)
        at_largest = f"rearrange({largest}, {' '.join(kept)} -> {spread})"
        first = over("min", f"where({inside} and {x} == {at_largest}, {order}, {later_taps})", taps)
        last_nan = over("max", f"where({inside} and {x} != {x}, {order}, -1)", taps)
        chosen = self.held(f"{node.name}_chosen", f"where({last_nan} >= 0, {last_nan}, {first})", kept)
        picked = over("sum", f"where({order} == rearrange({chosen}, {' '.join(kept)} -> {spread}), {index}, 0)", taps)
        self.settled(node, largest, kept, 0)
        self.settled(node, picked, kept, 1)

    def op_avg_pool2d(self, node):
        """`avg_pool{1,2,3}d(x, kernel, stride, padding, ceil_mode,
        count_include_pad, divisor_override)`: each window's sum over its
        count: the taps inside the input and its padding
        (`count_include_pad`), or inside the input only, or the override."""
        spatial = self.spatial_of(node)
        kernel, stride, args = self.pool_arguments(node, spatial)
        args = list(node.args) + [None] * (7 - len(node.args))
        padding, ceil_mode = _per_dim(args[3] or 0, spatial), bool(args[4])
        include_pad = True if args[5] is None else bool(args[5])
        override = args[6]
        if not node.args[0].meta["val"].dtype.is_floating_point:
            self.unsupported(node, str(node.target), "an average of integers divides them (torch rounds toward zero): the language has no integer division")
        from .importer import _float_kind, over

        x, xn, xs = self.every_axis(node.args[0], "input")
        plane = xs[len(xs) - spatial :]
        x, xn, xs, laid = self.windows(node, x, xn, xs, spatial, kernel, stride, padding, [1] * spatial, self.zero_of(node), ceil_mode)
        taps = [xn[i + 1] for i, _, _ in laid]
        kept = [a for a in xn if a not in taps]
        total = over("sum", x, taps)
        if override:
            divisor = self.filled(node, override)
        else:
            counts = []
            for k, ((i, count, pad), t) in enumerate(zip(laid, taps)):
                at = xn[i]
                place = f"rearrange(arange({at}), {at} -> {at} 1) * {stride[k]} + arange({t}) - {pad}"
                low, high = (-pad, plane[k] + pad) if include_pad else (0, plane[k])
                counts.append(self.held(f"{node.name}_count", f"sum(int({place} >= {low} and {place} < {high}), {t})", [at]))
            divisor = counts[0]
            for k, c in enumerate(counts[1:], 1):
                divisor = f"rearrange({divisor}, {' '.join(xn[i] for i, _, _ in laid[:k])} -> {' '.join(xn[i] for i, _, _ in laid[:k])} 1) * {c}"
            divisor = f"{_float_kind(node)}({divisor})"
        self.settled(node, f"{total} / {divisor}", kept)

    op_avg_pool1d = op_avg_pool3d = op_avg_pool2d

    def op_adaptive_avg_pool2d(self, node):
        """`adaptive_avg_pool{1,2,3}d(x, output_size)`: output position q of
        an axis of n averages positions floor(q n / o) to ceil((q + 1) n / o),
        one axis after another (a box's mean is its rows' means' mean)."""
        spatial = self.spatial_of(node)
        sizes = _per_dim(node.args[1], spatial)
        x, xn, xs = self.every_axis(node.args[0], "input")
        for k in range(spatial):
            i = len(xn) - spatial + k
            n, o = xs[i], sizes[k] if sizes[k] is not None else xs[i]
            if o == n:
                continue
            parts, joined = [], []
            for q in range(o):
                start, end = q * n // o, -(-(q + 1) * n // o)
                own, part = self.fresh("cell"), self.fresh("segment")
                mean = f"mean({x}[{xn[i]} = {start}:{end} as {part}], {part})"
                parts.append(f"repeat({mean}, {' '.join(xn[:i] + xn[i + 1:])} -> {' '.join(xn[:i] + [own] + xn[i + 1:])}, {own}=1)")
                joined.append(own)
            pooled = self.fresh(f"{xn[i]}_pooled")
            xn = xn[:i] + [pooled] + xn[i + 1 :]
            x = self.held(f"{node.name}_pooled", f"concat({', '.join(parts)}: {', '.join(joined)} -> {pooled})" if o > 1 else f"({parts[0]}) as [{' '.join(xn)}]", xn)
            xs = xs[:i] + [o] + xs[i + 1 :]
        self.settled(node, x, xn)

    op_adaptive_avg_pool1d = op_adaptive_avg_pool3d = op__adaptive_avg_pool2d = op__adaptive_avg_pool3d = op_adaptive_avg_pool2d

    # ---- padding by the edges -----------------------------------------------

    def op_reflection_pad1d(self, node):
        """`reflection_pad{1,2,3}d(x, pad)`: positions past an edge mirror back (the edge once)."""
        self.edge_padded(node, "reflect")

    op_reflection_pad2d = op_reflection_pad3d = op_reflection_pad1d

    def op_replication_pad1d(self, node):
        """`replication_pad{1,2,3}d(x, pad)`: positions past an edge repeat it."""
        self.edge_padded(node, "replicate")

    op_replication_pad2d = op_replication_pad3d = op_replication_pad1d

    def edge_padded(self, node, mode):
        """x padded (pairs from the last axis, negatives cropping) by `take`
        of positions computed from the result's: j - low, then mirrored,
        clamped or wrapped into the axis."""
        pads = list(node.args[1])
        x, xn, xs = self.every_axis(node.args[0], "input")
        for k in range(len(pads) // 2):
            low, high = pads[2 * k], pads[2 * k + 1]
            i = len(xn) - 1 - k
            n = xs[i]
            if low == 0 and high == 0:
                continue
            grown = self.fresh(f"{xn[i]}_padded")
            # The result's positions (the keyword sizes the new axis where it first stands).
            source = self.held(f"{node.name}_shifted", f"repeat(0, -> {grown}, {grown}={n + low + high}) + arange({grown}) - {low}", [grown])
            if mode == "reflect":
                source = f"where({source} < 0, -({source}), where({source} >= {n}, {2 * (n - 1)} - ({source}), {source}))"
            elif mode == "replicate":
                source = f"minimum(maximum({source}, 0), {n - 1})"
            else:
                source = f"where({source} < 0, {source} + {n}, where({source} >= {n}, {source} - {n}, {source}))"
            positions = self.held(f"{node.name}_positions", source, [grown])
            along, xn = xn[i], xn[:i] + [grown] + xn[i + 1 :]
            x = self.held(f"{node.name}_padded", f"take({x}, {positions}, {along})", xn)
            xs = xs[:i] + [n + low + high] + xs[i + 1 :]
        self.settled(node, x, xn)

    # ---- resampling ---------------------------------------------------------

    def op_upsample_nearest2d(self, node):
        """`upsample_nearest{1,2,3}d`: output position j takes input position
        min(floor(j * scale), n - 1), the scale 1 / the factor given, else n / o
        (in f32, as torch computes it)."""
        self.resampled(node, "nearest")

    op_upsample_nearest1d = op_upsample_nearest3d = op_upsample_nearest2d

    def op__upsample_nearest_exact2d(self, node):
        """As `upsample_nearest2d`, from floor((j + 0.5) * scale)."""
        self.resampled(node, "nearest-exact")

    op__upsample_nearest_exact1d = op__upsample_nearest_exact3d = op__upsample_nearest_exact2d

    def op_upsample_bilinear2d(self, node):
        """`upsample_linear1d`, `upsample_bilinear2d`, `upsample_trilinear3d`:
        one axis after another, each output position between two input
        positions (torch's source index: scale * (j + 0.5) - 0.5, not below
        0; with `align_corners`, j * (n - 1) / (o - 1)), weighted by its
        distance to them."""
        self.resampled(node, "linear")

    op_upsample_linear1d = op_upsample_trilinear3d = op_upsample_bilinear2d

    def op_upsample_bicubic2d(self, node):
        """As `upsample_bilinear2d`, from four input positions (clamped to the
        axis) weighted by torch's cubic convolution (A = -0.75)."""
        self.resampled(node, "cubic")

    def resampled(self, node, mode):
        """The last axes resampled to the result's sizes, one after another."""
        import numpy as np

        name = getattr(node.target, "__name__", str(node.target))
        args = list(node.args)
        aligned = mode in ("linear", "cubic") and bool(args[2]) if len(args) > 2 else False
        spatial = len(node.meta["val"].shape) - 2
        if name.endswith(".vec"):
            factors = args[3] if mode in ("linear", "cubic") else (args[2] if len(args) > 2 else None)
            factors = _per_dim(factors, spatial) if factors else [None] * spatial
        else:
            factors = [1.0 / s if s else None for s in (args[3:] if mode in ("linear", "cubic") else args[2:])] + [None] * spatial
            factors = factors[:spatial]
        dtype = node.meta["val"].dtype
        precise = str(dtype) == "torch.float64"
        real = "f64" if precise else "float"
        x, xn, xs = self.every_axis(node.args[0], "input")
        kind = {"torch.float32": None, "torch.float64": None}.get(str(dtype), "convert")
        if kind and dtype.is_floating_point:
            x = self.held(f"{node.name}_wide", f"float({x})", xn)  # computed in f32, as torch's opmath
        out_sizes = [int(size) for size in node.meta["val"].shape[2:]]
        for k in range(spatial):
            i = 2 + k
            n, o = xs[i], out_sizes[k]
            grown, along = self.fresh(f"{xn[i]}_resampled"), xn[i]
            as_float = np.float64 if precise else np.float32
            if mode in ("linear", "cubic") and aligned:
                scale = as_float((n - 1) / (o - 1)) if o > 1 else as_float(0)
            else:
                scale = as_float(1.0 / factors[k]) if factors[k] else as_float(n) / as_float(o)
            scale = repr(float(scale))
            place = self.held(f"{node.name}_place", f"{real}(repeat(0, -> {grown}, {grown}={o}) + arange({grown}))", [grown])
            xn = xn[:i] + [grown] + xn[i + 1 :]
            if mode.startswith("nearest"):
                source = f"({place} + 0.5) * {scale}" if mode == "nearest-exact" else f"{place} * {scale}"
                x = self.held(f"{node.name}_resampled", f"take({x}, minimum(int(floor({source})), {n - 1}), {along})", xn)
            else:
                source = f"{scale} * {place}" if aligned else f"{scale} * ({place} + 0.5) - 0.5"
                if mode == "linear" and not aligned:
                    source = f"maximum({source}, 0.0)"
                source = self.held(f"{node.name}_source", source, [grown])
                below = self.held(f"{node.name}_below", f"int(floor({source}))", [grown])
                fraction = self.held(f"{node.name}_fraction", f"{source} - {real}({below})", [grown])
                if mode == "linear":
                    below = self.held(f"{node.name}_below", f"minimum({below}, {n - 1})", [grown])
                    fraction = f"minimum(maximum({fraction}, 0.0), 1.0)"
                    taps = [(f"{below}", f"1.0 - {fraction}"), (f"minimum({below} + 1, {n - 1})", fraction)]
                else:
                    weights = _cubic(fraction)
                    taps = [(f"minimum(maximum({below} + {d}, 0), {n - 1})", w) for d, w in zip((-1, 0, 1, 2), weights)]
                terms = [f"take({x}, {index}, {along}) * ({weight})" for index, weight in taps]
                x = self.held(f"{node.name}_resampled", " + ".join(terms), xn)
            xs = xs[:i] + [o] + xs[i + 1 :]
        if kind and dtype.is_floating_point:
            from .importer import _kind

            x = f"{_kind(dtype)}({x})"
        self.settled(node, x, xn)

    # ---- sampling at computed positions -------------------------------------

    def op_grid_sampler_2d(self, node):
        """`grid_sampler_2d(x, grid, mode, padding_mode, align_corners)`:
        each grid point's position in x (unnormalized, then clipped or
        reflected as `padding_mode` says, torch's formulas), and x there:
        the four neighbours weighted (bilinear) or the nearest (half to
        even), a neighbour outside x counting 0. Gathered by `take` from x
        flattened with its batch, each point's batch leading its offset."""
        from .importer import _float_kind

        x_arg, grid_arg, mode, padding_mode, align = (list(node.args) + [0, 0, False])[:5]
        x, xn, xs = self.every_axis(x_arg, "input")
        grid, gn, gs = self.every_axis(grid_arg, "grid")
        batch, channels, rows, cols = xn
        n_rows, n_cols = xs[2], xs[3]
        down, across, pair = self.fresh("grid_rows"), self.fresh("grid_cols"), self.fresh("pair")
        points = [batch, down, across]
        grid = self.held(f"{node.name}_grid", f"({grid}) as [{' '.join(points + [pair])}]", points + [pair])
        real = "f64" if str(node.meta["val"].dtype) == "torch.float64" else "float"
        if real == "float" and str(node.meta["val"].dtype) != "torch.float32":
            x, grid = f"float({x})", self.held(f"{node.name}_grid", f"float({grid})", points + [pair])

        def unnormalized(coordinate, size):
            """A grid coordinate in [-1, 1] as a position along an axis of `size`."""
            at = f"(({coordinate} + 1.0) / 2.0) * {float(size - 1)!r}" if align else f"(({coordinate} + 1.0) * {float(size)!r} - 1.0) / 2.0"
            return self.held(f"{node.name}_at", at, points)

        def padded(at, size):
            """A position clipped to the axis (border) or reflected into it (reflection)."""
            if padding_mode == 2:
                low, high = (0.0, 2.0 * (size - 1)) if align else (-1.0, 2.0 * size - 1.0)
                if low == high:
                    at = self.held(f"{node.name}_at", f"{at} * 0.0", points)
                else:
                    least, span = low / 2, (high - low) / 2
                    distance = self.held(f"{node.name}_distance", f"abs({at} - {least!r})", points)
                    flips = self.held(f"{node.name}_flips", f"floor({distance} / {span!r})", points)
                    extra = f"({distance} - {span!r} * {flips})"
                    at = self.held(f"{node.name}_at", f"where(floor({flips} / 2.0) * 2.0 == {flips}, {extra} + {least!r}, {span!r} - {extra} + {least!r})", points)
            if padding_mode in (1, 2):
                at = self.held(f"{node.name}_at", f"minimum(maximum({at}, 0.0), {float(size - 1)!r})", points)
            return at

        across_at, down_at = unnormalized(f"{grid}[{pair} = 0]", n_cols), unnormalized(f"{grid}[{pair} = 1]", n_rows)
        flat = self.fresh("flat")
        table = self.held(f"{node.name}_table", f"rearrange({x}, {' '.join(xn)} -> {channels} ({batch} {rows} {cols})) as [{channels} {flat}]", [channels, flat])
        first = f"rearrange(arange({batch}), {batch} -> {batch} 1 1) * {n_rows * n_cols}"

        def at(row, col):
            """x at integer positions (floats), 0 outside: [channels, batch, grid rows, grid cols]."""
            inside = f"({row} >= 0.0 and {row} <= {float(n_rows - 1)!r} and {col} >= 0.0 and {col} <= {float(n_cols - 1)!r})"
            offset = f"{first} + int(minimum(maximum({row}, 0.0), {float(n_rows - 1)!r})) * {n_cols} + int(minimum(maximum({col}, 0.0), {float(n_cols - 1)!r}))"
            return f"where({inside}, take({table}, {offset}, {flat}), 0.0)"

        if mode == 2:
            # Bicubic: sixteen neighbours, each position padded on its own, as torch's.
            top, left = self.held(f"{node.name}_top", f"floor({down_at})", points), self.held(f"{node.name}_left", f"floor({across_at})", points)
            dy, dx = self.held(f"{node.name}_dy", f"{down_at} - {top}", points), self.held(f"{node.name}_dx", f"{across_at} - {left}", points)
            weights = [_cubic(dy), _cubic(dx)]
            terms = []
            for j in range(4):
                row = padded(self.held(f"{node.name}_row", f"{top} + {float(j - 1)!r}", points), n_rows)
                for i in range(4):
                    col = padded(self.held(f"{node.name}_col", f"{left} + {float(i - 1)!r}", points), n_cols)
                    terms.append(f"{at(row, col)} * ({weights[0][j]}) * ({weights[1][i]})")
            value = " + ".join(terms)
        elif mode == 1:
            down_at, across_at = padded(down_at, n_rows), padded(across_at, n_cols)
            value = at(f"round({down_at})", f"round({across_at})")
        else:
            down_at, across_at = padded(down_at, n_rows), padded(across_at, n_cols)
            top, left = self.held(f"{node.name}_top", f"floor({down_at})", points), self.held(f"{node.name}_left", f"floor({across_at})", points)
            dy, dx = self.held(f"{node.name}_dy", f"{down_at} - {top}", points), self.held(f"{node.name}_dx", f"{across_at} - {left}", points)
            corners = [
                (top, left, f"(1.0 - {dx}) * (1.0 - {dy})"),
                (top, f"{left} + 1.0", f"{dx} * (1.0 - {dy})"),
                (f"{top} + 1.0", left, f"(1.0 - {dx}) * {dy}"),
                (f"{top} + 1.0", f"{left} + 1.0", f"{dx} * {dy}"),
            ]
            value = " + ".join(f"{at(r, c)} * ({w})" for r, c, w in corners)
        value = self.held(f"{node.name}_sampled", value, [channels] + points)
        value = f"rearrange({value}, {channels} {' '.join(points)} -> {batch} {channels} {down} {across})"
        if str(node.meta["val"].dtype) not in ("torch.float32", "torch.float64"):
            value = f"{_float_kind(node)}({value})"
        self.settled(node, value, [batch, channels, down, across])

    op_grid_sampler = op_grid_sampler_2d
