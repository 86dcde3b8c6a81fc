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


def test_cached_break_function_retraces_python_each_call():
    calls = []

    def fn(x):
        calls.append(1)  # Python side effects happen while tracing
        if x.sum() > 0:
            return x + 1
        return x - 1

    f = lowering.compile(fn)
    np.testing.assert_array_equal(f(np.ones(2)), [2, 2])
    np.testing.assert_array_equal(f(-np.ones(2)), [-2, -2])
    assert len(calls) == 2
    assert f.stats["compiles"] == 1 and f.stats["cache_hits"] == 1


def test_side_effects_run_only_at_trace_time_without_breaks():
    calls = []

    def fn(x):
        calls.append(1)
        return x + 1

    f = lowering.compile(fn)
    for _ in range(3):
        f(np.ones(2))
    assert len(calls) == 1
