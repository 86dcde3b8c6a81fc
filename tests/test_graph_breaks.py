"""Graph breaks: the graph so far runs compiled, the piece runs eagerly, tracing
resumes; results equal numpy's and `explain` names each break's line."""

import inspect

import numpy as np
import pytest

import lowering
from lowering.testing import assert_matches_numpy


def line_of(fn, needle: str) -> int:
    src, start = inspect.getsourcelines(fn)
    for i, line in enumerate(src):
        if needle in line:
            return start + i
    raise AssertionError(needle)


def data_dependent_if(x):
    s = x.sum()
    if s > 0:  # break: bool() of a traced value
        return x * 2
    return x - 1


def item_call(x):
    m = x.max().item()  # break: .item()
    return x / m


def boolean_mask(x):
    y = x[x > 0]  # break: data-dependent shape
    return y * 2 + 1


def unsupported_function(x):
    u = np.unique(x)  # break: no capture rule
    return u.sum() + x.mean()


def float_conversion(x):
    scale = float(x[0])  # break: float()
    return x * scale


def mutation_across_break(x):
    x += 1
    if x.mean() > 2:  # break with a pending write to the caller's array
        x *= 2
    return x


def several_breaks(x):
    total = 0.0
    for i in range(3):
        if x[i] > 0:  # a break per iteration
            total = total + x[i]
    return x * total


CASES = [
    (data_dependent_if, "if s > 0", [np.arange(4.0), -np.arange(4.0)]),
    (item_call, ".item()", [np.arange(1.0, 5.0)]),
    (boolean_mask, "x[x > 0]", [np.array([-1.0, 2.0, 0.0, 3.0])]),
    (unsupported_function, "np.unique", [np.array([3, 1, 3, 2])]),
    (float_conversion, "float(x[0])", [np.array([2.0, 3.0])]),
    (mutation_across_break, "if x.mean() > 2", [np.arange(4.0), np.zeros(4)]),
]


@pytest.mark.parametrize("fn, needle, inputs", CASES, ids=[c[0].__name__ for c in CASES])
def test_break_results_match_numpy_and_explain_names_the_line(fn, needle, inputs):
    f = lowering.compile(fn)
    for x in inputs + inputs:  # compiling and cached calls, both branches where there are two
        assert_matches_numpy(fn, x, compiled=f)
    report = lowering.explain(fn)(inputs[0].copy())
    assert report.graph_break_count >= 1
    assert report.graph_count == report.graph_break_count + 1
    b = report.breaks[0]
    assert b.filename == __file__
    assert b.lineno == line_of(fn, needle), (b, str(report))
    assert f"{__file__}:{b.lineno}" in str(report)
    assert f.stats["graph_breaks"] >= 1


def test_several_breaks_are_all_reported():
    x = np.array([1.0, -2.0, 3.0, 4.0])
    assert_matches_numpy(several_breaks, x)
    report = lowering.explain(several_breaks)(x)
    assert report.graph_break_count == 3
    assert {b.lineno for b in report.breaks} == {line_of(several_breaks, "if x[i] > 0")}


def test_fullgraph_turns_a_break_into_an_error_naming_the_line():
    f = lowering.compile(data_dependent_if, fullgraph=True)
    with pytest.raises(lowering.GraphBreakError) as e:
        f(np.arange(3.0))
    assert e.value.lineno == line_of(data_dependent_if, "if s > 0")
    assert e.value.filename == __file__
    assert "bool()" in str(e.value) and f"{__file__}:{e.value.lineno}" in str(e.value)


def test_fullgraph_unsupported_function():
    with pytest.raises(lowering.GraphBreakError, match="unique"):
        lowering.compile(unsupported_function, fullgraph=True)(np.array([1, 2, 2]))


def test_no_break_program_reports_one_graph():
    report = lowering.explain(lambda x: np.exp(x) + 1)(np.zeros(3))
    assert report.graph_count == 1 and report.graph_break_count == 0 and report.breaks == []
    assert report.ops_per_graph[0]["array.ufunc"] == 2
    assert any("ndarray float64[3]" in g for g in report.guards)


def test_each_path_through_a_break_is_traced_once_then_replayed():
    calls = []

    def fn(x):
        calls.append(1)  # a write to Python state: replayed on every call
        if x.sum() > 0:
            return x + 1
        return x - 1

    f = lowering.compile(fn)
    for _ in range(2):
        np.testing.assert_array_equal(f(np.ones(2)), [2, 2])
        np.testing.assert_array_equal(f(-np.ones(2)), [-2, -2])
    assert len(calls) == 4
    # one trace per side of the branch; later calls run the graphs and check
    # that the break gives Python the same value, without running the Python
    assert f.stats["compiles"] == 2 and f.stats["cache_hits"] == 2
    assert f.stats["recompiles"] == 0


def test_writes_to_python_state_are_replayed_on_cached_calls():
    # a list the function appends to grows on every call, as in eager numpy
    # (the write is recorded while tracing and replayed); a print would not be
    calls = []

    def fn(x):
        calls.append(1)
        return x + 1

    f = lowering.compile(fn)
    for _ in range(3):
        f(np.ones(2))
    assert calls == [1, 1, 1]
    assert f.stats["compiles"] == 1 and f.stats["cache_hits"] == 2


def test_replayed_break_skips_the_python():
    import itertools

    ran = itertools.count()  # not Python state the compiler walks: counts real runs

    def fn(x):
        next(ran)
        y = x * 2
        if y.max() > 3:  # a data-dependent branch: a graph break
            return y - 3
        return y

    f = lowering.compile(fn)
    xs = [np.arange(3.0), np.zeros(3), np.arange(3.0) + 1, -np.ones(3)]
    for x in xs * 3:
        np.testing.assert_array_equal(f(x), fn(x))
    # fn ran once per path while tracing, then once per direct call above
    assert next(ran) == 2 + len(xs) * 3
    assert f.stats["compiles"] == 2 and f.stats["cache_hits"] == len(xs) * 3 - 2


def test_a_list_of_traced_scalars_is_one_array():
    # `x * [a, b]` with Python float arguments: np.asarray of the list, as
    # numpy makes it, inside the graph (a break per element before)
    def fn(x, a, b):
        return x * [a, b] + np.maximum([[a], [b]], x)

    f = lowering.compile(fn, fullgraph=True)
    x = np.array([1.0, -2.0])
    for a, b in [(1.5, 2.5), (-3.0, 0.25)]:
        got, want = f(x, a, b), fn(x, a, b)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    assert f.stats["compiles"] == 1 and f.stats["graph_breaks"] == 0
