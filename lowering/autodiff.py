"""`grad`, `value_and_grad`, `vjp` and `checkpoint`: transformations of the
captured function, done on the tensor-level IR (`passes/autograd.py`).

Inside a trace (under `lowering.compile`, or nested in another
transformation) a transformation records the ops its function emits, then
appends their backward ops to the same graph: `compile(value_and_grad(f))`
captures ONE joint forward+backward function, which the pipeline partitions
into a forward and a backward program (`passes/remat.py`). Called outside a
trace, a transformation compiles itself (`grad(f)(x)` is
`compile(grad(f))(x)`), so it is traced once per input signature and cached.

Graph breaks inside a differentiated function are allowed: the segments run
so far are replayed (recomputed) in the final graph and differentiated there,
chained in reverse. Values that leave the graph as Python numbers (`float(x)`,
`.item()`) carry no gradient, like `.item()` in PyTorch; arrays handed to a
numpy function that ran eagerly cannot be differentiated through (an error
says which).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import UnitAttr

from dialects.dtypes import is_float
from passes.autograd import REMAT, Emit, NotDifferentiable, backward

from . import pytree

__all__ = ["grad", "value_and_grad", "vjp", "checkpoint", "NotDifferentiable"]


def _traced_type():
    from .capture.traced import TracedArray

    return TracedArray


def _tracer_of(*trees) -> Any:
    T = _traced_type()
    for tree in trees:
        leaves, _ = pytree.flatten(tree)
        for x in leaves:
            if isinstance(x, T):
                return x._t
    return None


def _argnums(argnums, n: int, name: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise ValueError(f"{name}: argnums must name at least one argument")
    out = []
    for a in nums:
        if not isinstance(a, int):
            raise TypeError(f"{name}: argnums must be ints, got {a!r}")
        if not -n <= a < n:
            raise ValueError(f"{name}: argnums {a} is out of range for {n} positional arguments")
        out.append(a % n)
    return tuple(out)


def _param_name(fn, i: int) -> str:
    try:
        params = list(inspect.signature(fn).parameters.values())
        if i < len(params) and params[i].kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                  inspect.Parameter.POSITIONAL_OR_KEYWORD):
            return params[i].name
    except (TypeError, ValueError):
        pass
    return f"args[{i}]"


class _Region:
    """The ops a function emits into the tracer's graph between `open` and
    `ops()`, across graph breaks (segments closed in between are replayed
    into the current graph so the gradient chains through them)."""

    def __init__(self, tracer):
        self.tracer = tracer
        self.block = tracer.block
        self.start = tracer.block.last_op
        self.n_segments = len(tracer.trace.segments)

        self.value_map: dict = {}

    def ops(self) -> list:
        t = self.tracer
        if t.block is not self.block:
            first, self.value_map = t.replay_since(self.n_segments, self.start)
        else:
            first = self.start.next_op if self.start is not None else t.block.first_op
        out = []
        op = first
        while op is not None:
            out.append(op)
            op = op.next_op
        return out


class _Transform:
    """A transformed function: traced in place inside a trace, compiled
    (once per input signature) when called on concrete values."""

    kind = ""

    def __init__(self, fn: Callable):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self._compiled = None

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        tracer = _tracer_of(args, kwargs)
        if tracer is not None:
            return self._in_trace(tracer, args, kwargs)
        if self._compiled is None:
            from .api import CompiledFunction

            self._compiled = CompiledFunction(self, "default", None, False, None)
        return self._compiled(*args, **kwargs)

    def _in_trace(self, tracer, args, kwargs):
        raise NotImplementedError


class _Grad(_Transform):
    def __init__(self, fn, argnums, has_aux, with_value):
        super().__init__(fn)
        self.argnums, self.has_aux, self.with_value = argnums, has_aux, with_value
        self.kind = "value_and_grad" if with_value else "grad"

    def _in_trace(self, tracer, args, kwargs):
        nums = _argnums(self.argnums, len(args), self.kind)
        args = list(args)
        trees = []
        wrt_arrays = []
        for i in nums:
            leaves, tdef = pytree.flatten(args[i])
            new = []
            for j, leaf in enumerate(leaves):
                where = _param_name(self.fn, i) + pytree.paths(tdef)[j]
                t = _lift_float(tracer, leaf, where, self.kind)
                new.append(t)
            trees.append(tdef)
            wrt_arrays.append(new)
            args[i] = pytree.unflatten(tdef, new)
        wrt_arrays, args, pairs = _fresh(tracer, wrt_arrays, args, nums, trees)
        wrt = [t._v() for ts in wrt_arrays for t in ts]
        region = _Region(tracer)
        tracer.grad_regions += 1
        try:
            out = self.fn(*args, **kwargs)
        finally:
            tracer.grad_regions -= 1
        _write_back(tracer, pairs)
        if self.has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError(f"{self.kind}(has_aux=True): the function must return a pair "
                                f"(output, aux), got {type(out).__name__}")
            loss, aux = out
        else:
            loss, aux = out, None
        loss_t = _scalar_output(tracer, loss, self.kind)
        ops = region.ops()
        wrt = [region.value_map.get(w, w) for w in wrt]
        prims = tracer.prims
        seed = prims.constant(1.0, loss_t.dtype)
        gs = backward(ops, wrt, [loss_t._v()], [seed], prims)
        e = Emit(prims)
        flat = [tracer.wrap(g if g is not None else e.zeros_like(w), weak=t._weak, scalar=t._scalar)
                for g, w, t in zip(gs, wrt, [t for ts in wrt_arrays for t in ts])]
        it = iter(flat)
        grads = [pytree.unflatten(tdef, [next(it) for _ in range(len(ts))])
                 for tdef, ts in zip(trees, wrt_arrays)]
        g = grads[0] if isinstance(self.argnums, int) else tuple(grads)
        if self.with_value:
            return (out, g)
        return (g, aux) if self.has_aux else g


def _lift_float(tracer, leaf, where: str, what: str):
    T = _traced_type()
    if not isinstance(leaf, T):
        if isinstance(leaf, (bool, np.bool_)) or not isinstance(
                leaf, (float, int, np.ndarray, np.generic)):
            raise TypeError(f"{what}: argument {where!r} is a {type(leaf).__name__}; "
                            "gradients are taken with respect to floating-point arrays and floats")
        leaf = tracer.lift(leaf)
    if not is_float(leaf.dtype):
        raise TypeError(f"{what}: argument {where!r} has dtype {leaf.dtype}; only "
                        "floating-point inputs have gradients (pass it in a position not "
                        "listed in argnums)")
    return leaf


def _fresh(tracer, wrt_arrays, args, nums, trees):
    """Each differentiated argument gets its own graph value (an identity op
    the canonicalizer removes later): the derivative is taken with respect to
    that position alone, so the same array passed in another position, or
    reached through a closure, stays a constant (as in JAX and HIPS autograd).
    Returns the new arrays, the new args and (original, fresh) pairs so that
    writes to a fresh array reach the caller's array."""
    from dialects import array as A

    pairs = []
    out = []
    for k, (i, ts) in enumerate(zip(nums, wrt_arrays)):
        new = []
        for t in ts:
            v = t._v()
            copy = tracer.prims._emit(A.BroadcastOp(v, v.type))
            nt = tracer.wrap(copy, weak=t._weak, scalar=t._scalar, readonly=t._readonly)
            new.append(nt)
            pairs.append((t, nt))
        out.append(new)
        args[i] = pytree.unflatten(trees[k], new)
    return out, args, pairs


def _write_back(tracer, pairs) -> None:
    """Writes the function made to a differentiated argument land in the
    caller's array (functionalized, like any other write)."""
    for orig, fresh in pairs:
        if fresh._st.mutated:
            tracer.write(orig, fresh._st.value)


def _scalar_output(tracer, loss, what: str):
    T = _traced_type()
    if not isinstance(loss, T):
        if not isinstance(loss, (float, int, np.ndarray, np.generic)) or isinstance(loss, bool):
            raise TypeError(f"{what}: the function must return a scalar float, got "
                            f"{type(loss).__name__}")
        loss = tracer.lift(loss)
    if loss.shape != ():
        raise TypeError(f"{what}: the function must return a scalar (shape ()), got shape "
                        f"{tuple(loss.shape)}; use vjp for non-scalar outputs")
    if not is_float(loss.dtype):
        raise TypeError(f"{what}: the function must return a floating-point scalar, got "
                        f"dtype {loss.dtype}")
    return loss


class _Vjp:
    """The pullback of one traced call: emits the backward ops when called."""

    def __init__(self, tracer, region_ops, wrt, wrt_arrays, outs, out_tree, primal_trees):
        self.tracer, self.ops, self.wrt, self.wrt_arrays = tracer, region_ops, wrt, wrt_arrays
        self.outs, self.out_tree, self.primal_trees = outs, out_tree, primal_trees

    def __call__(self, cotangent):
        t = self.tracer
        if self.ops and self.ops[-1].parent is not t.block:
            raise NotImplementedError("vjp: a graph break happened between vjp() and calling "
                                      "its vjp_fn; call vjp_fn before converting traced values")
        leaves, tdef = pytree.flatten(cotangent)
        if tdef != self.out_tree:
            raise TypeError("vjp: the cotangent must have the structure of the function's output")
        cts = []
        for o, c in zip(self.outs, leaves):
            ct = t.lift(c)
            if ct.shape != o.shape:
                raise ValueError(f"vjp: cotangent of shape {tuple(ct.shape)} for an output of "
                                 f"shape {tuple(o.shape)}")
            v = ct._v()
            if ct.dtype != o.dtype:
                v = t.prims.cast(v, o.dtype)
            cts.append(v)
        gs = backward(self.ops, self.wrt, [o._v() for o in self.outs], cts, t.prims)
        e = Emit(t.prims)
        flat_t = [x for xs in self.wrt_arrays for x in xs]
        flat = [t.wrap(g if g is not None else e.zeros_like(w), weak=x._weak, scalar=x._scalar)
                for g, w, x in zip(gs, self.wrt, flat_t)]
        it = iter(flat)
        res = tuple(pytree.unflatten(tdef, [next(it) for _ in range(len(xs))])
                    for tdef, xs in zip(self.primal_trees, self.wrt_arrays))
        return res


def _vjp_in_trace(tracer, fn, primals):
    args = list(primals)
    trees, wrt_arrays = [], []
    for i in range(len(args)):
        leaves, tdef = pytree.flatten(args[i])
        new = [_lift_float(tracer, leaf, _param_name(fn, i) + pytree.paths(tdef)[j], "vjp")
               for j, leaf in enumerate(leaves)]
        trees.append(tdef)
        wrt_arrays.append(new)
        args[i] = pytree.unflatten(tdef, new)
    wrt_arrays, args, pairs = _fresh(tracer, wrt_arrays, args, range(len(args)), trees)
    wrt = [t._v() for ts in wrt_arrays for t in ts]
    region = _Region(tracer)
    tracer.grad_regions += 1
    try:
        out = fn(*args)
    finally:
        tracer.grad_regions -= 1
    _write_back(tracer, pairs)
    leaves, out_tree = pytree.flatten(out)
    outs = []
    for x in leaves:
        x = tracer.lift(x)
        if not is_float(x.dtype):
            raise TypeError(f"vjp: outputs must be floating-point arrays, got dtype {x.dtype}")
        outs.append(x)
    ops = region.ops()
    wrt = [region.value_map.get(w, w) for w in wrt]
    return out, _Vjp(tracer, ops, wrt, wrt_arrays, outs, out_tree, trees)


def vjp(fn: Callable, *primals):
    """`out, vjp_fn = vjp(fn, *primals)`; `vjp_fn(cotangent)` returns one
    gradient per primal (a tuple), each shaped like its primal. Inside a trace
    the backward ops join the graph where `vjp_fn` is called; outside, the
    forward runs now (compiled) and `vjp_fn` runs a compiled joint program."""
    tracer = _tracer_of(primals)
    if tracer is not None:
        return _vjp_in_trace(tracer, fn, primals)
    fwd = _forward_cache(fn)
    out = fwd(*primals)

    def vjp_fn(cotangent):
        return _backward_cache(fn)(primals, cotangent)

    return out, vjp_fn


@functools.lru_cache(maxsize=256)
def _forward_cache(fn):
    from .api import CompiledFunction

    return CompiledFunction(fn, "default", None, False, None)


@functools.lru_cache(maxsize=256)
def _backward_cache(fn):
    from .api import CompiledFunction

    def joint(primals, cotangent):
        tracer = _tracer_of(primals, cotangent)
        _, pull = _vjp_in_trace(tracer, fn, primals)
        return pull(cotangent)

    joint.__wrapped__ = fn  # globals/closures of fn are sources
    return CompiledFunction(joint, "default", None, False, None)


class _Checkpoint(_Transform):
    """Ops inside are recomputed in the backward instead of saved."""

    def __call__(self, *args, **kwargs):
        tracer = _tracer_of(args, kwargs)
        if tracer is None:
            return self.fn(*args, **kwargs)
        region = _Region(tracer)
        out = self.fn(*args, **kwargs)
        if tracer.block is region.block:
            for op in region.ops():
                op.attributes[REMAT] = UnitAttr()
        return out


def grad(fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False):
    """The gradient of a scalar-valued numpy function with respect to the
    arguments in `argnums` (pytrees of float arrays/floats: the gradient has
    the argument's structure). `has_aux=True`: fn returns (loss, aux) and the
    transformed function returns (grads, aux)."""
    return _Grad(fn, argnums, has_aux, with_value=False)


def value_and_grad(fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False):
    """Like `grad`, returning (value, grads); with `has_aux`, ((value, aux), grads)."""
    return _Grad(fn, argnums, has_aux, with_value=True)


def checkpoint(fn: Callable):
    """Mark fn's computation for recomputation in the backward pass (its
    intermediates are never saved); outside a differentiated trace it is fn."""
    return _Checkpoint(fn)
