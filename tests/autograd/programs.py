"""Random straight-line differentiable programs, as data.

A `GradProgram` is a list of op descriptions (`Op`: kind, parameters, input
node numbers) over float64 inputs, ending in a scalar (`sum` or `mean` of the
last value). `run(prog, xp, args)` interprets it with any numpy-like module:
`numpy` (what `lowering` traces and compiles) or `autograd.numpy` (HIPS
autograd's reference gradient), so both sides run the same program.

Every op is differentiable almost everywhere and keeps values bounded:
`exp` only of `sin`, `log`/`sqrt` only of `x*x + 1`, division only by
`y*y + 0.5` or a constant. The generator evaluates each op on the drawn inputs
and drops ops whose result is too big or not finite.

Kinks (abs at 0, maximum/minimum ties, the tied maxima of a max/min
reduction, the switch of a `where`) are reported by `run(..., kinks=[...])`
when it runs on numpy: each kink op appends the branch it took (a sign or a
mask array). Two evaluations with equal kink lists ran on the same smooth
piece of the program, which is what a finite difference across them needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lowering.testing import TOLERANCES, copy_array

MAX_ABS = 1e3  # largest magnitude an intermediate may reach on the drawn inputs
MAX_SIZE = 256  # largest intermediate

SCALARS = (0.0, 0.5, -1.5, 2.0)


@dataclass(frozen=True)
class Op:
    kind: str
    ins: tuple[int, ...]
    p: dict = field(default_factory=dict, compare=False)


@dataclass
class GradProgram:
    args: tuple[np.ndarray, ...]
    ops: list[Op]
    budget: int  # error budget in ops (reductions over n elements count n)

    @property
    def n_inputs(self) -> int:
        return len(self.args)

    def fn(self, xp=np):
        """The program as a function of its inputs, on module `xp`."""
        def program(*args):
            return run(self, xp, args)
        return program

    def source(self) -> str:
        names = [f"a{i}" for i in range(self.n_inputs)]
        lines = [f"def program({', '.join(names)}):"]
        for k, op in enumerate(self.ops):
            out = f"v{k}"
            lines.append(f"    {out} = {_text(op, names)}")
            names.append(out)
        lines.append(f"    return {names[-1]}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        args = "\n".join(f"  np.array({a.tolist()!r}),  # shape {a.shape} strides {a.strides}"
                         for a in self.args)
        return f"GradProgram(budget={self.budget})\n{self.source()}\nargs = (\n{args}\n)"

    def rtol(self) -> float:
        """The gradient tolerance against another reverse-mode implementation:
        the "gradient" class of `TOLERANCES` over the program's budget."""
        return TOLERANCES.rtol(np.float64, "gradient", self.budget)


# ---------------------------------------------------------------------------
# the interpreter


def _swap_last(xp, x):
    perm = list(range(x.ndim))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return xp.transpose(x, perm)


def _apply(op: Op, xp, vals: list, kinks: list | None):
    k, p = op.kind, op.p
    x = vals[op.ins[0]] if op.ins else None
    y = vals[op.ins[1]] if len(op.ins) > 1 else p.get("c")
    if p.get("swap"):
        x, y = y, x
    if k == "add":
        return x + y
    if k == "subtract":
        return x - y
    if k == "multiply":
        return x * y
    if k in ("maximum", "minimum"):
        if kinks is not None:
            kinks.append(np.sign(np.subtract(x, y)))
        return getattr(xp, k)(x, y)
    if k == "divide":  # by something bounded away from 0
        return x / y if "c" in p else x / (y * y + 0.5)
    if k == "rdivide":
        return p["c"] / (x * x + 1.0)
    if k == "abs":
        if kinks is not None:
            kinks.append(np.sign(x))
        return xp.abs(x)
    if k == "negative":
        return -x
    if k in ("tanh", "sin", "cos"):
        return getattr(xp, k)(x)
    if k == "exp":
        return xp.exp(xp.sin(x))
    if k == "log":
        return xp.log(x * x + 1.0)
    if k == "sqrt":
        return xp.sqrt(x * x + 1.0)
    if k == "power":
        return x ** p["n"]
    if k == "where":
        more = iter(vals[j] for j in op.ins[1:])
        b = next(more) if p["b_node"] else p["b"]
        c = next(more) if p["c_node"] else p["c"]
        cond = x > p["t"]
        if kinks is not None:
            kinks.append(np.asarray(cond))
        if xp is not np:
            # HIPS autograd's where does not sum a broadcast operand's gradient
            # back to its shape (nor does its broadcast_to add leading dims):
            # broadcast by adding exact zeros, whose gradient it does sum
            zeros = np.zeros(np.broadcast_shapes(*(np.shape(v) for v in (cond, b, c))))
            b, c = b + zeros, c + zeros
        return xp.where(cond, b, c)
    if k in ("sum", "mean", "max", "min"):
        out = getattr(xp, k)(x, axis=p["axis"], keepdims=p["keepdims"])
        if kinks is not None and k in ("max", "min"):
            kinks.append(np.asarray(x) == np.asarray(np.max(x, axis=p["axis"], keepdims=True)
                                                     if k == "max" else
                                                     np.min(x, axis=p["axis"], keepdims=True)))
        return out
    if k == "reshape":
        return xp.reshape(x, p["shape"])
    if k == "transpose":
        return xp.transpose(x, p["perm"])
    if k == "slice":
        return x[p["key"]]
    if k == "take":
        return x[(slice(None),) * p["axis"] + (p["idx"],)]
    if k == "matmul":
        y = vals[op.ins[1]]
        return xp.matmul(x, _swap_last(xp, y) if p["t"] else y)
    if k == "concatenate":
        return xp.concatenate([vals[i] for i in op.ins], axis=p["axis"])
    if k == "cumsum":
        return xp.cumsum(x, axis=p["axis"])
    raise AssertionError(f"unknown op {k}")


def run(prog: GradProgram, xp, args, kinks: list | None = None):
    """Interpret `prog` on `args` with module `xp` (numpy or autograd.numpy);
    with numpy, `kinks` collects the branch every kink op took."""
    vals = list(args)
    for op in prog.ops:
        vals.append(_apply(op, xp, vals, kinks))
    return vals[-1]


def _text(op: Op, names: list[str]) -> str:
    p = op.p
    x = names[op.ins[0]] if op.ins else None
    y = names[op.ins[1]] if len(op.ins) > 1 else repr(p.get("c"))
    if p.get("swap"):
        x, y = y, x
    k = op.kind
    infix = {"add": "+", "subtract": "-", "multiply": "*"}
    if k in infix:
        return f"{x} {infix[k]} {y}"
    if k in ("maximum", "minimum"):
        return f"np.{k}({x}, {y})"
    if k == "divide":
        return f"{x} / {y}" if "c" in p else f"{x} / ({y} * {y} + 0.5)"
    if k == "rdivide":
        return f"{p['c']!r} / ({x} * {x} + 1.0)"
    if k == "abs":
        return f"np.abs({x})"
    if k == "negative":
        return f"-{x}"
    if k in ("tanh", "sin", "cos"):
        return f"np.{k}({x})"
    if k == "exp":
        return f"np.exp(np.sin({x}))"
    if k in ("log", "sqrt"):
        return f"np.{k}({x} * {x} + 1.0)"
    if k == "power":
        return f"{x} ** {p['n']}"
    if k == "where":
        more = iter(names[j] for j in op.ins[1:])
        b = next(more) if p["b_node"] else repr(p["b"])
        c = next(more) if p["c_node"] else repr(p["c"])
        return f"np.where({x} > {p['t']!r}, {b}, {c})"
    if k in ("sum", "mean", "max", "min"):
        return f"np.{k}({x}, axis={p['axis']!r}, keepdims={p['keepdims']})"
    if k == "reshape":
        return f"np.reshape({x}, {p['shape']!r})"
    if k == "transpose":
        return f"np.transpose({x}, {p['perm']!r})"
    if k == "slice":
        return f"{x}[{_key_text(p['key'])}]"
    if k == "take":
        return f"{x}[{':, ' * p['axis']}np.array({p['idx'].tolist()!r})]"
    if k == "matmul":
        y = names[op.ins[1]]
        return f"np.matmul({x}, np.swapaxes({y}, -1, -2))" if p["t"] else f"np.matmul({x}, {y})"
    if k == "concatenate":
        return f"np.concatenate([{', '.join(names[i] for i in op.ins)}], axis={p['axis']!r})"
    if k == "cumsum":
        return f"np.cumsum({x}, axis={p['axis']!r})"
    raise AssertionError(k)


def _key_text(key: tuple) -> str:
    def one(s):
        if isinstance(s, int):
            return str(s)
        parts = ["" if v is None else str(v) for v in (s.start, s.stop, s.step)]
        return ":".join(parts)
    return ", ".join(one(s) for s in key) + ("," if len(key) == 1 else "")


# ---------------------------------------------------------------------------
# the generator

_UNARY = ("abs", "negative", "tanh", "sin", "cos", "exp", "log", "sqrt", "power", "rdivide")
_BINARY = ("add", "subtract", "multiply", "maximum", "minimum", "divide")
# binary (broadcasting) ops first: hypothesis favours the first kinds
_KINDS = (_BINARY + _UNARY + ("where", "sum", "mean", "max", "min", "reshape", "transpose",
                              "slice", "take", "matmul", "concatenate", "cumsum"))


def _broadcasts(a: tuple, b: tuple) -> bool:
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


def _axis(draw, st, ndim: int):
    if ndim == 0:
        return None
    c = draw(st.integers(0, 2))
    if c == 0:
        return None
    if c == 1:
        return draw(st.integers(-ndim, ndim - 1))
    return tuple(sorted(draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim,
                                      unique=True))))


def _count(shape, axis) -> int:
    if axis is None:
        return int(np.prod(shape, dtype=np.int64))
    axes = axis if isinstance(axis, tuple) else (axis,)
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))


def _draw_op(draw, st, vals: list) -> tuple[Op, int] | None:
    """One op over the values so far, and its error budget; None if the kind
    drawn does not apply."""
    n = len(vals)
    # mostly the latest values, so chains get deep
    i = draw(st.one_of(st.integers(max(0, n - 3), n - 1), st.integers(0, n - 1)))
    x = vals[i]
    kind = draw(st.sampled_from(_KINDS))
    if kind == "power":
        return Op(kind, (i,), {"n": draw(st.sampled_from([0, 1, 2, 3]))}), 1
    if kind == "rdivide":
        return Op(kind, (i,), {"c": draw(st.sampled_from([1.0, -2.0]))}), 1
    if kind in _UNARY:
        return Op(kind, (i,)), 1
    if kind in _BINARY:
        partners = [j for j in range(n) if _broadcasts(x.shape, vals[j].shape)]
        if draw(st.booleans()):
            c = draw(st.sampled_from([2.0, -4.0] if kind == "divide" else SCALARS))
            return Op(kind, (i,), {"c": c, "swap": kind != "divide" and draw(st.booleans())}), 1
        j = draw(st.sampled_from(partners))
        return Op(kind, (i, j), {"swap": kind != "divide" and draw(st.booleans())}), 1
    if kind == "where":
        ins = [i]
        p: dict[str, Any] = {"t": draw(st.sampled_from([0.0, 0.5]))}
        shape = x.shape
        for name in ("b", "c"):
            partners = [j for j in range(n) if _broadcasts(shape, vals[j].shape)]
            p[name + "_node"] = draw(st.booleans())
            if p[name + "_node"]:
                j = draw(st.sampled_from(partners))
                ins.append(j)
                shape = np.broadcast_shapes(shape, vals[j].shape)
            else:
                p[name] = draw(st.sampled_from(SCALARS))
        return Op(kind, tuple(ins), p), 0
    if kind in ("sum", "mean", "max", "min"):
        axis = _axis(draw, st, x.ndim)
        p = {"axis": axis, "keepdims": draw(st.booleans())}
        return Op(kind, (i,), p), max(1, _count(x.shape, axis)) if kind in ("sum", "mean") else 0
    if kind == "reshape":
        size = x.size
        c = draw(st.integers(0, 2))
        if c == 0:
            shape: tuple = (-1,)
        elif c == 1:
            at = draw(st.integers(0, x.ndim))
            shape = x.shape[:at] + (1,) + x.shape[at:]
        else:
            d = draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0]))
            shape = (d, -1)
        return Op(kind, (i,), {"shape": shape}), 0
    if kind == "transpose":
        return Op(kind, (i,), {"perm": tuple(draw(st.permutations(range(x.ndim))))}), 0
    if kind == "slice":
        if x.ndim == 0:
            return None
        key = []
        for d, m in enumerate(x.shape):
            c = draw(st.integers(0, 3))
            if c == 0:
                key.append(slice(None))
            elif c == 1 and m > 1 and d == x.ndim - 1:
                key.append(draw(st.integers(-m, m - 1)))  # an integer index drops the dim
            else:
                step = draw(st.sampled_from([1, 2, -1, -2, 3]))
                start = draw(st.integers(0, m - 1))
                if draw(st.booleans()):
                    start -= m  # negative start
                key.append(slice(start, None, step))
        return Op(kind, (i,), {"key": tuple(key)}), 0
    if kind == "take":
        if x.ndim == 0:
            return None
        axis = draw(st.integers(0, x.ndim - 1))
        m = x.shape[axis]
        shape = draw(st.sampled_from([(draw(st.integers(1, 5)),), (2, 2)]))
        idx = np.array(draw(st.lists(st.integers(-m, m - 1), min_size=int(np.prod(shape)),
                                     max_size=int(np.prod(shape)))), dtype=np.int64)
        return Op(kind, (i,), {"axis": axis, "idx": idx.reshape(shape)}), 0
    if kind == "matmul":
        if x.ndim == 0:
            return None
        k = x.shape[-1]

        def fits(y, t):
            if y.ndim == 0 or (t and y.ndim < 2):
                return False
            inner = y.shape[-1] if t else y.shape[0 if y.ndim == 1 else -2]
            if inner != k:
                return False
            if x.ndim >= 2 and y.ndim >= 2:
                return _broadcasts(x.shape[:-2], y.shape[:-2])
            return True

        cands = [(j, t) for j in range(n) for t in (False, True) if fits(vals[j], t)]
        if not cands:
            return None
        j, t = draw(st.sampled_from(cands))
        return Op(kind, (i, j), {"t": t}), max(k, 1)
    if kind == "concatenate":
        if x.ndim == 0:
            return None
        axis = draw(st.integers(-x.ndim, x.ndim - 1))
        ax = axis % x.ndim
        partners = [j for j in range(n) if vals[j].ndim == x.ndim and all(
            a == b for d, (a, b) in enumerate(zip(x.shape, vals[j].shape)) if d != ax)]
        others = draw(st.lists(st.sampled_from(partners), min_size=1, max_size=2))
        return Op(kind, (i, *others), {"axis": axis}), 0
    assert kind == "cumsum"
    axis = None if x.ndim == 0 or draw(st.integers(0, 3)) == 0 else \
        draw(st.integers(-x.ndim, x.ndim - 1))
    return Op(kind, (i,), {"axis": axis}), max(1, x.size if axis is None else x.shape[axis])


def _jitter(a: np.ndarray, k: int) -> np.ndarray:
    """`a` plus distinct offsets below 0.005 in the same layout: hypothesis
    likes 0.0 and repeated values, which are kinks of abs and maximum. A
    broadcast (read-only) input keeps its repeated values."""
    if not a.flags.writeable:
        return a
    offsets = ((np.arange(a.size) * 0.6180339887498949 + 0.2 * k) % 1.0 - 0.5) * 1e-2
    out = copy_array(a)
    out[...] = a + offsets.reshape(a.shape)
    return out


def grad_programs(min_ops: int = 2, max_ops: int = 15, max_inputs: int = 3, ties: bool = True):
    """GradPrograms of `min_ops`..`max_ops` ops (the final sum/mean included)
    over 1..`max_inputs` float64 inputs of broadcastable shapes (size-1 dims
    included, any layout). With `ties`, input values come partly from a small
    grid, so maximum/minimum/abs/max hit their kinks exactly."""
    import hypothesis.strategies as st

    from lowering.testing import arrays, broadcastable_shapes

    @st.composite
    def _programs(draw):
        n_in = draw(st.integers(1, max_inputs))
        shapes = draw(broadcastable_shapes(n_in, min_dims=1, max_dims=3, min_side=1,
                                           max_side=4))
        if draw(st.integers(0, 7)) == 7:  # a 0-d input (reductions make more)
            shapes = shapes[:-1] + ((),)
        smooth = st.floats(-2, 2, allow_nan=False, allow_infinity=False, allow_subnormal=False)
        elems = st.one_of(smooth, st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0])) if ties \
            else smooth
        args = tuple(draw(arrays(np.float64, s, elements=elems)) for s in shapes)
        if not ties:
            args = tuple(_jitter(a, k) for k, a in enumerate(args))
        vals: list[np.ndarray] = [np.array(a) for a in args]
        ops: list[Op] = []
        budget = 0
        # hypothesis favours the low end of a range (and shrinks towards it);
        # long programs cover more per example, so the low end is max_ops
        target = max_ops - draw(st.integers(0, max_ops - min_ops)) - 1
        attempts = 0
        while len(ops) < target and attempts < 6 * max_ops:
            attempts += 1
            drawn = _draw_op(draw, st, vals)
            if drawn is None:
                continue
            op, cost = drawn
            with np.errstate(all="ignore"):
                try:
                    v = np.asarray(_apply(op, np, vals, None))
                except (ValueError, IndexError):
                    continue
            if v.size == 0 or v.size > MAX_SIZE or not np.all(np.isfinite(v)) or \
                    np.max(np.abs(v)) > MAX_ABS:
                continue
            ops.append(op)
            vals.append(v)
            budget += cost
        last = len(vals) - 1
        final = draw(st.sampled_from(["sum", "mean"]))
        ops.append(Op(final, (last,), {"axis": None, "keepdims": False}))
        budget += max(1, vals[-1].size)
        # the backward mirrors the forward: twice the forward's rounding
        return GradProgram(args, ops, 2 * budget)

    return _programs()


# ---------------------------------------------------------------------------
# checks


def kink_signature(prog: GradProgram, args) -> list:
    """The branch every kink op takes on `args` (numpy)."""
    kinks: list = []
    with np.errstate(all="ignore"):
        run(prog, np, args, kinks)
    return kinks


def same_piece(a: list, b: list) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def assert_grads_close(got, want, rtol: float, what: str = "gradient", context: str = "") -> None:
    """`got` equals `want` up to rtol relative to the largest component of
    each gradient (reverse mode sums cotangents over fan-out, so an element's
    own magnitude is no bound on its rounding error)."""
    assert len(got) == len(want), f"{what}: {len(got)} gradients, want {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        assert isinstance(g, np.ndarray), f"{what}[{k}]: {type(g).__name__}, not an ndarray"
        w = np.asarray(w)
        assert g.shape == w.shape, f"{what}[{k}]: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{what}[{k}]: dtype {g.dtype} != {w.dtype}"
        assert np.all(np.isfinite(g)), f"{what}[{k}]: not finite\n{g}"
        scale = float(np.max(np.abs(w), initial=0.0))
        err = float(np.max(np.abs(g - w), initial=0.0))
        assert err <= rtol * scale + float(np.finfo(w.dtype).tiny), (
            f"{what}[{k}]: max error {err:.3e} > rtol {rtol:.3e} x scale {scale:.3e}\n"
            f" got={g!r}\nwant={w!r}\n{context}")

