"""Cached calls of a function with graph breaks, without running its Python.

A traced function's Python is deterministic given what it was handed: its
guarded arguments and state, and at each graph break the concrete values the
break gave it. So a later call whose guards hold can run the compiled graphs
one after the other and, at each break, check that Python would see the same
thing — the same values, bit for bit (`bool(x.sum() > 0)` came out the same
way), or, for a numpy call that ran eagerly, the same call run again on the
new values, whose results have the shapes the trace saw. When a check fails
the call is traced again (another entry: the other side of the branch), and
the graphs already run have written nothing anywhere."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import pytree
from dialects.dtypes import supported
from .capture.tracer import HOLE, Draw, Trace, fresh_results
from .capture.views import np_apply_all
from .fastpath import MISS


def _same(a, b) -> bool:
    """Python would see no difference: type, dtype, shape and bits."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and (
            a.tobytes() == b.tobytes())
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, float):
        return a.hex() == b.hex()
    return a == b


def replayer(trace: Trace, programs: list, finish: Callable, generators: Callable) -> Callable:
    """The entry's run function: the graphs of `trace` (`programs`, one per
    segment) with the break checks between them; `finish(results, sources,
    gvals)` builds the return value from the last graph's results."""
    segments = trace.segments
    records = trace.records
    fresh = [p.fresh for p in programs]
    has_draws = any(isinstance(r, Draw) for s in segments for r in s.refs)

    def resolve(ref, sources, res, eager):
        if type(ref) is int:
            v = sources[ref]
            return v if isinstance(v, np.ndarray) else np.asarray(
                v, np.float64 if isinstance(v, float) else None)
        if isinstance(ref, Draw):
            return ref(sources)
        kind, k, j = ref
        return res[k][j] if kind == "res" else eager[k][j]

    def run(leaves, gvals, tree):
        sources = leaves + gvals if gvals else leaves
        saved = generators(sources) if has_draws else None
        try:
            out = _run(sources)
        except BaseException:
            if saved is not None:
                saved()
            raise
        if out is MISS:
            if saved is not None:
                saved()
            return MISS
        return finish(out, sources, gvals)

    def _run(sources):
        res: list = []
        eager: list = []
        for k, seg in enumerate(segments):
            inputs = [resolve(r, sources, res, eager) for r in seg.refs]
            out = programs[k](inputs)
            own = [None if i is None else inputs[i] for i in seg.owners]
            res.append(fresh_results(out, inputs, own, fresh[k]))
            if k == len(records):
                break
            rec = records[k]
            vals = [np_apply_all(steps, resolve(ref, sources, res, eager))
                    for ref, steps in rec.needed]
            piece = rec.eager
            if piece is None:
                if not all(_same(a, b) for a, b in zip(vals, rec.values)):
                    return MISS
                eager.append(())
                continue
            it = iter(vals)
            leaves = [next(it) if x is HOLE else x for x in piece.leaves]
            a, kw = pytree.unflatten(piece.tdef, leaves)
            result = piece.fn(*a, **kw)
            rleaves, rtdef = pytree.flatten(result)
            if rtdef != piece.result_tdef:
                return MISS
            arrays, others = [], []
            for x in rleaves:
                (arrays if isinstance(x, np.ndarray) and supported(x.dtype) else others).append(x)
            if (len(arrays) != len(piece.arrays) or len(others) != len(piece.others)
                    or any((x.shape, x.dtype, x.strides) != want
                           for x, want in zip(arrays, piece.arrays))
                    or not all(_same(a, b) for a, b in zip(others, piece.others))):
                return MISS
            eager.append(arrays)
        return res[-1]

    return run

