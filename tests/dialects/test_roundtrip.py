"""The captured IR of random programs, through every tensor-level pass:

- it verifies after capture and after each pass of `pipeline.tensor_passes()`;
- its text round-trips: print -> parse (with `pipeline.context()`) -> print
  gives the same text, after capture and after each pass;
- interpreter vs interpreter: the numpy reference backend runs the module
  before and after each pass on the segment's real inputs and gets the same
  results, bit for bit (NaN, ±Inf and -0.0 included). A pass that trades
  exactness for speed must say so in APPROXIMATE_PASSES, with the op class of
  `TOLERANCES` its change stays within.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

import lowering
from lowering import pytree
from lowering.backends.numpy_backend import compile_module
from lowering.pipeline import context, tensor_passes
from lowering.testing import TOLERANCES, Program, assert_same_value, copy_array, examples, programs

# pass name -> TOLERANCES op class its rewrites are allowed to move results by
APPROXIMATE_PASSES = {
    "strength-reduce": "pointwise",  # x**3 -> x*x*x: within a few ULPs of pow
}


def roundtrip(module: ModuleOp, where: str) -> None:
    text = str(module)
    parsed = Parser(context(), text).parse_module()
    again = str(parsed)
    assert again == text, f"print -> parse -> print changed the IR {where}:\n{text}\n---\n{again}"
    parsed.verify()


def run(module: ModuleOp, inputs: list) -> list:
    with np.errstate(all="ignore"):
        return compile_module(module)([copy_array(x) for x in inputs])


def rtol_of(pass_name: str, results: list) -> float:
    cls = APPROXIMATE_PASSES.get(pass_name)
    if cls is None:
        return 0.0
    floats = [np.asarray(r).dtype for r in results if np.asarray(r).dtype.kind == "f"]
    return max((TOLERANCES.rtol(d, cls) for d in floats), default=0.0)


def check_segment(module: ModuleOp, inputs: list) -> None:
    module.verify()
    roundtrip(module, "after capture")
    want = run(module, inputs)
    ctx = context()
    m = module.clone()
    for p in tensor_passes():
        p.apply(ctx, m)
        m.verify()
        roundtrip(m, f"after {p.name}")
        got = run(m, inputs)
        assert_same_value(got, want, rtol_of(p.name, want), f"results after {p.name}")
        want = got


def segment_inputs(seg, leaves: list) -> list:
    out = []
    for b in seg.bindings:
        if isinstance(b, int):
            x = leaves[b]
            out.append(np.asarray(x, np.float64) if isinstance(x, float) else np.asarray(x))
        else:
            out.append(b)
    return out


@examples(2.0)
@given(prog=programs(max_ops=15))
def test_captured_ir_verifies_roundtrips_and_passes_keep_results(prog: Program):
    pristine = [copy_array(a) if isinstance(a, np.ndarray) else a for a in prog.args]
    work = [copy_array(a) if isinstance(a, np.ndarray) else a for a in prog.args]
    cf = lowering.compile(prog.fn)
    with np.errstate(all="ignore"):
        cf(*work)
    trace = cf.last_trace
    assert trace is not None and trace.segments
    leaves, _ = pytree.flatten((tuple(pristine), {}))
    for seg in trace.segments:
        check_segment(seg.module, segment_inputs(seg, leaves))


def test_roundtrip_keeps_special_constants():
    """NaN, ±Inf, -0.0 and extreme integers survive print -> parse."""
    def fn(x, i):
        return (x * -0.0 + np.inf, np.where(x > 0, np.nan, -np.inf), i + np.iinfo(np.int64).min,
                i | np.int64(np.iinfo(np.int64).max))

    x, i = np.array([1.0, -2.0]), np.array([3, 4])
    cf = lowering.compile(fn)
    cf(x, i)
    (seg,) = cf.last_trace.segments
    check_segment(seg.module, [x, i])
    text = str(seg.module)
    for needle in ("-0.0", "inf", "nan", str(np.iinfo(np.int64).min)):
        assert needle in text, needle
