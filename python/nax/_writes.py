"""The importer's writes by position: scatters (`scatter`, `scatter_add`,
`scatter_reduce`, `index_put`, `index_add`, `index_copy`, `index_fill`,
`index_reduce`) and `masked_scatter` (``nax.from_torch``).

The language reads by position (`take`) but does not write by one. A
write is a mask of the written positions against the axis's: each
written element compared with every position (`rearrange(ids, ... -> ...
1) == arange(axis)`), then the written values reduced over the written
elements where the mask holds (a sum, a product, a maximum; for a plain
write the last in row-major order, as torch's loops on CPU). Positions
pass through `take` of the axis's positions first, so one out of range
fails the call as torch's does. The cost is the written elements times
the axis, not a loop: correct first.
"""

from __future__ import annotations


class PositionWriter:
    """Writes by position, for `_Writer` (which provides `operand`, `held`,
    `fresh`, `bind`, `repeat`, `lined_up`, `literal`, `with_axis`,
    `offsets`, `flattened` and the node bookkeeping)."""

    def written(self, node, x, x_names, along, ids, id_names, sizes, src, src_names, how, include_self=True, dtype=None) -> str:
        """x (axes `x_names`) with `src` written at the positions along
        `along` that `ids` holds: a scatter, as masks. `ids` has x's other
        axes (some, broadcast to all) and axes of its own (the written
        elements'); each position passes through `take` of the axis's
        positions, which fails the call on one out of range, as torch does.
        `src` has names among those (`src_names`; `None`: a number); the
        written elements' axes have `sizes`. `how`:
        `set` (the last write in row-major order wins, as torch's loops
        on CPU), `sum`, `prod`, `amax`, `amin` or `mean`, with x's own
        value (`include_self`) or not (then x where nothing is written)."""
        others = [a for a in x_names if a != along]
        own = [a for a in id_names if a not in others]
        full = others + own
        checked = self.held(f"{node.name}_positions", f"take(arange({along}), {ids}, {along})", id_names)
        if id_names != full:
            checked = self.held(f"{node.name}_positions", self.repeat(checked, id_names, full), full)
        hit = self.held(f"{node.name}_hit", f"rearrange({checked}, {' '.join(full)} -> {' '.join(full)} 1) == arange({along})", full + [along])

        import torch

        from .importer import over

        dtype = dtype or node.meta["val"].dtype
        mask = dtype == torch.bool
        if mask and how != "set":
            # Masks as 0 and 1: their sum is an `or`, their product an `and`.
            return f"({self.written(node, f'int({x})', x_names, along, ids, id_names, sizes, f'int({src})', src_names, how, include_self, torch.int64)}) != 0"
        count = self.held(f"{node.name}_count", over("sum", f"int({hit})", own), others + [along])
        if how == "set":
            # Each element's row-major position among the written ones.
            position, stride = [], 1
            for a, size in reversed(list(zip(own, sizes))):
                position.append(f"{self.repeat(f'arange({a})', [a], own)} * {stride}")
                stride *= size
            position = self.held(f"{node.name}_order", " + ".join(reversed(position)) or "0", own)
            last = self.held(f"{node.name}_last", over("max", f"where({hit}, {position}, -1)", own), others + [along])
            if src_names is None:
                value = src
            else:
                chosen = self.held(f"{node.name}_chosen", f"{hit} and (where({hit}, {position}, -1) == {last})", full + [along])
                value = f"{over('sum', f'int(where({chosen}, {src}, false))', own)} > 0" if mask else over("sum", f"where({chosen}, {src}, 0)", own)
            result = f"where({count} > 0, {value}, {x})"
        elif how in ("sum", "mean"):
            total = over("sum", f"where({hit}, {src}, 0)", own)
            if how == "mean":
                divisor = self.converted(None, f"({count} + 1)" if include_self else count, dtype)
                total = f"({total} + {x}) / {divisor}" if include_self else f"{total} / {divisor}"
                result = f"where({count} > 0, {total}, {x})"
            else:
                result = f"where({count} > 0, {total}, 0) + {x}" if include_self else f"where({count} > 0, {total}, {x})"
        elif how == "prod":
            product = over("prod", f"where({hit}, {src}, 1)", own)
            result = f"where({count} > 0, {product}, 1) * {x}" if include_self else f"where({count} > 0, {product}, {x})"
        else:
            reduction, pair = ("max", "maximum") if how == "amax" else ("min", "minimum")
            if dtype.is_floating_point:
                fill = "-inf" if how == "amax" else "inf"
            else:
                # Below (above) every element written: src's own least (greatest).
                fill = over("min" if how == "amax" else "max", src, src_names)
            extreme = over(reduction, f"where({hit}, {src}, {fill})", own)
            result = f"where({count} > 0, {pair}({extreme}, {x}), {x})" if include_self else f"where({count} > 0, {extreme}, {x})"
        if others + [along] != x_names:
            result = f"rearrange({result}, {' '.join(others + [along])} -> {' '.join(x_names)})"
        return result

    def op_scatter(self, node):
        """`x.scatter(dim, index, src)` (or a value; `reduce` add or
        multiply), `scatter_add`, `scatter_reduce`: `written`, the index's
        and src's other axes under x's names (src cut to the index's sizes)."""
        from .importer import present, _hint

        target = str(node.target)
        x_arg, dim, index, src = node.args[:4]
        if "scatter_reduce" in target:
            how = {"sum": "sum", "prod": "prod", "amax": "amax", "amin": "amin", "mean": "mean"}[node.args[4]]
            include_self = node.args[5] if len(node.args) > 5 else node.kwargs.get("include_self", True)
        elif "scatter_add" in target:
            how, include_self = "sum", True
        else:
            reduce = node.args[4] if len(node.args) > 4 else node.kwargs.get("reduce")
            how, include_self = {None: "set", "add": "sum", "multiply": "prod"}[reduce], True
        if how == "mean" and not node.meta["val"].dtype.is_floating_point:
            self.unsupported(node, target, "a mean of integers divides them, which the language cannot")
        x, axes = self.operand(x_arg)
        shape, index_shape = x_arg.meta["val"].shape, index.meta["val"].shape
        axes = axes or [None]
        dim %= len(axes)
        if len(index_shape) != len(shape) or any(hasattr(size, "node") for size in list(shape) + list(index_shape)):
            self.unsupported(node, target, "an index of another rank, or axes of dynamic size, are not supported yet")
        if 0 in [int(size) for size in index_shape]:
            self.identity(node)
            return
        single = axes[dim] is None
        if single:
            x, axes = self.named(node, x, axes, dim)
        # Along another axis the index may be shorter: the region of x it
        # covers is written, then joined with the rest.
        whole, whole_axes = x, list(axes)
        cuts = [i for i in range(len(shape)) if i != dim and int(index_shape[i]) != int(shape[i])]
        for i in cuts:
            part = self.fresh(f"{axes[i]}_part")
            x, axes[i] = f"{x}[{axes[i]} = 0:{int(index_shape[i])} as {part}]", part
        if cuts:
            x = self.held(f"{node.name}_region", x, present(axes))
        # The index's and src's axes under x's names, the written axis its own.
        names = [self.fresh(f"{axes[dim]}_written") if i == dim else a for i, a in enumerate(axes)]
        ids, id_names = self.lined_up(node, index, names)
        ids = self.held(f"{node.name}_index", ids, id_names)
        if hasattr(src, "name"):
            value, value_axes = self.operand(src)
            src_names = []
            for i, a in enumerate(value_axes or []):
                if a is None:
                    continue
                if _hint(index_shape[i]) == 1:
                    value = f"{value}[{a} = 0]"
                    continue
                if _hint(src.meta["val"].shape[i]) != _hint(index_shape[i]):
                    value = f"{value}[{a} = 0:{_hint(index_shape[i])}]"
                src_names.append(names[i])
            value = self.held(f"{node.name}_source", f"({value}) as [{' '.join(src_names)}]" if src_names else value, src_names)
        else:
            value, src_names = self.literal(node, src), None
        result = self.written(node, x, present(axes), axes[dim], ids, id_names, [int(index_shape[dim])], value, src_names, how, include_self)
        for i in reversed(cuts):
            # x beyond the region along axis i (within it along the earlier cuts).
            rest_name, rest = self.fresh(f"{whole_axes[i]}_rest"), whole
            for j in cuts:
                if j < i:
                    rest = f"{rest}[{whole_axes[j]} = 0:{int(index_shape[j])} as {axes[j]}]"
            rest = f"{rest}[{whole_axes[i]} = {int(index_shape[i])}: as {rest_name}]"
            joined, axes[i] = f"concat({result}, {rest}: {axes[i]}, {rest_name} -> {whole_axes[i]})", whole_axes[i]
            result = self.held(f"{node.name}_joined", joined, present(axes))
        if single:
            result, axes = f"({result})[{axes[dim]} = 0]", [None if i == dim else a for i, a in enumerate(axes)]
        self.bind(node, result, axes)

    op_scatter_add = op_scatter_reduce = op_scatter

    def op_index_put(self, node):
        """`x[indices] = values` (`accumulate`: `+=`); by a mask, where the
        values do not vary along the true elements (they broadcast over
        them), `where`."""
        indices, values = list(node.args[1]), node.args[2]
        accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
        masks = [(p, i) for p, i in enumerate(indices) if i is not None and self.is_mask(i)]
        if masks:
            self.put_where(node, indices, masks, values, accumulate)
        else:
            self.put(node, indices, values, "sum" if accumulate else "set", wrap=True)

    def along_dim(self, node, arg=1) -> list:
        """`[None] * dim, index`: the indices of `index_add` and its siblings as `index_put`'s."""
        return [None] * (node.args[arg] % max(node.args[0].meta["val"].dim(), 1)) + [node.args[arg + 1]]

    def op_index_add(self, node):
        """`x.index_add(dim, index, src, alpha)`: `x[..., index, ...] += alpha * src`."""
        alpha = node.args[4] if len(node.args) > 4 else node.kwargs.get("alpha", 1)
        if self.is_mask(node.args[0]) and not alpha:
            self.identity(node)
            return
        self.put(node, self.along_dim(node), node.args[3], "sum", alpha=1 if self.is_mask(node.args[0]) else alpha)

    def op_index_copy(self, node):
        self.put(node, self.along_dim(node), node.args[3], "set")

    op_index_fill = op_index_copy

    def op_index_reduce(self, node):
        """`x.index_reduce(dim, index, source, reduce, include_self)`."""
        how = node.args[4]
        include_self = node.args[5] if len(node.args) > 5 else node.kwargs.get("include_self", True)
        if how == "mean" and not node.meta["val"].dtype.is_floating_point:
            self.unsupported(node, "index_reduce", "a mean of integers divides them, which the language cannot")
        self.put(node, self.along_dim(node), node.args[3], how, include_self=include_self)

    def op_masked_scatter(self, node):
        """`x.masked_scatter(mask, src)`: where the mask is true, src's
        elements in order (row-major): the k-th true element takes src's
        k-th, k a running count of the mask (`cumsum`), then `take` from src
        flattened (which fails the call where src has too few, as torch)."""
        from .importer import present

        out = self.axes_of(node.meta["val"].shape)
        have = present(out)
        x, _ = self.broadcast(node, node.args[0])
        mask, _ = self.broadcast(node, node.args[1])
        src, src_axes = self.operand(node.args[2])
        flat, source = self.fresh("flat"), self.fresh("source")
        whole = f"({' '.join(have)})"

        def flattened(value):
            return f"(rearrange({value}, {' '.join(have)} -> {whole}) as [{flat}])"

        src_names = present(src_axes or [])
        src = f"(rearrange({src}, {' '.join(src_names)} -> ({' '.join(src_names)})) as [{source}])" if src_names else self.with_axis(src, [None], 0, source)
        src = self.held(f"{node.name}_source", src, [source])
        if not have:
            self.bind(node, f"where({mask}, {src}[{source} = 0], {x})", out)
            return
        truth = self.held(f"{node.name}_mask", flattened(mask), [flat])
        order = f"where({truth}, cumsum(int({truth}), {flat}) - 1, 0)"
        scattered = f"where({truth}, take({src}, {order}, {source}), {flattened(x)})"
        self.bind(node, f"rearrange({scattered}, {whole} -> {' '.join(have)})", out)

    def put_where(self, node, indices, masks, values, accumulate):
        """`x[mask] = values` where the values broadcast over the true
        elements: `where(mask, values, x)` (`accumulate`: x plus the values
        where true). Values that vary along them are read in the order of
        the true elements (`masked_scatter`): not written yet."""
        from .importer import present, _hint

        x, axes = self.operand(node.args[0])
        axes = axes or [None]
        if len(masks) != 1 or len(indices) - indices.count(None) != 1:
            self.unsupported(node, "index_put", "a mask with other tensors of positions is not supported yet")
        ((p, mask),) = masks
        width = mask.meta["val"].dim()
        before, after = axes[:p], axes[p + width :]
        selected = before + ["__true__"] + after
        shape = values.meta["val"].shape if hasattr(values, "name") else ()
        at = len(shape) - len(after) - 1
        if at >= 0 and _hint(shape[at]) != 1:
            self.unsupported(node, "index_put", "values that vary along a mask's true elements are read in their order: not written yet")
        m, m_names = self.lined_up(node, mask, [None] * p + axes[p : p + width])
        if m_names != present(axes):
            # The mask over every axis of x, so that the values line up by name.
            m = self.repeat(m, m_names, present(axes))
        v = self.lined_up(node, values, selected)[0] if hasattr(values, "name") else self.literal(node, values)
        if accumulate:
            zero = "false" if self.is_mask(node.args[0]) else "0"
            self.bind(node, f"{x} {'or' if zero == 'false' else '+'} where({m}, {v}, {zero})", axes)
        else:
            self.bind(node, f"where({m}, {v}, {x})", axes)

    def put(self, node, indices, values, how, wrap=False, alpha=1, include_self=True):
        """x with `values` written at the positions several tensors hold
        (as `indexed_jointly` reads them): the indexed axes merged into one,
        `written` along it, then split again. `values` (a tensor or a
        number) broadcast to `x[indices]`'s shape, as torch's."""
        import torch

        from .importer import present

        x, axes = self.operand(node.args[0])
        axes = axes or [None]
        shape = list(node.args[0].meta["val"].shape) or [1]
        indices = [(p, i) for p, i in enumerate(indices) if i is not None]
        if any(self.is_mask(i) for _, i in indices):
            self.unsupported(node, str(node.target), "writing where a mask is true reads the values in the order of the true elements: positions that depend on values")
        positions = [p for p, _ in indices]
        together = positions == list(range(positions[0], positions[-1] + 1))
        broadcast = torch.broadcast_shapes(*[i.meta["val"].shape for _, i in indices])
        if any(hasattr(size, "node") for size in broadcast):
            self.unsupported(node, str(node.target), "positions of dynamic number are not supported yet")
        canonical = self.axes_of(broadcast)
        ids = self.offsets(node, shape, indices, canonical, wrap)
        own = [self.fresh(f"{a}_put") for a in present(canonical)]
        ids = self.held(f"{node.name}_offsets", f"({ids}) as [{' '.join(own)}]" if own else ids, own)
        x, axes, before, after, flat = self.flattened(node, x, axes, positions, together)
        # x[indices]'s axes in torch's order: the index axes (own names) where the indexed stood.
        others = [i for i in range(len(axes)) if i not in positions]
        lead = [axes[i] for i in others if i < positions[0]] if together else []
        trail = [axes[i] for i in others if not (together and i < positions[0])]
        names = iter(own)
        selected = lead + [next(names) if a is not None else None for a in canonical] + trail
        if hasattr(values, "name"):
            value, value_names = self.lined_up(node, values, selected)
            value = self.held(f"{node.name}_values", value if alpha == 1 else f"{value} * {self.literal(node, alpha)}", value_names)
        else:
            value, value_names = self.literal(node, values), None
        sizes = [int(size) for size in broadcast if int(size) != 1]
        result = self.written(node, x, before + [flat] + after, flat, ids, own, sizes, value, value_names, how, include_self)
        indexed = [axes[p] for p in positions if axes[p] is not None]
        group = indexed[0] if len(indexed) == 1 else f"({' '.join(indexed)})"
        result = f"rearrange({result}, {' '.join(before + [group] + after)} -> {' '.join(present(axes))})"
        original = self.operand(node.args[0])[1] or [None]
        for p in positions:
            if original[p] is None and axes[p] is not None:
                result = f"({result})[{axes[p]} = 0]"
        self.bind(node, result, original)

