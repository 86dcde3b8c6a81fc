"""Errors are numpy's: a failure while a compiled program runs re-runs the
call eagerly; a failure inside the compiler is an eager fallback with one
warning (`fullgraph=True`: `CompileError`)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import lowering
from lowering import api


def _boom(*args, **kwargs):
    raise RuntimeError("emitter exploded")


def test_compiler_failure_is_an_eager_fallback_with_one_warning(monkeypatch):
    monkeypatch.setattr(api, "compile_segment", _boom)

    def fn(x):
        return np.tanh(x) * 2

    f = lowering.compile(fn)
    x = np.linspace(-1, 1, 5)
    with pytest.warns(RuntimeWarning, match=r"compiling .*fn failed in lowering/api.py:_run_segment .*emitter exploded"):
        np.testing.assert_array_equal(f(x), fn(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        np.testing.assert_array_equal(f(x + 1), fn(x + 1))
    assert f.stats["eager_fallbacks"] == 2 and f.stats["compiles"] == 0


def test_compiler_failure_under_fullgraph_raises_compile_error(monkeypatch):
    monkeypatch.setattr(api, "compile_segment", _boom)
    f = lowering.compile(lambda x: x + 1, fullgraph=True)
    with pytest.raises(lowering.CompileError, match="emitter exploded"):
        f(np.ones(3))


def test_compiler_failure_leaves_python_state_untouched(monkeypatch):
    monkeypatch.setattr(api, "compile_segment", _boom)

    class M:
        pass

    m = M()
    m.W = np.ones(3)
    m.log = []

    def fn(x):
        m.W = m.W * x
        m.log.append(x.sum())
        return m.W

    f = lowering.compile(fn)
    with pytest.warns(RuntimeWarning):
        np.testing.assert_array_equal(f(np.full(3, 2.0)), [2, 2, 2])
    assert type(m.W) is np.ndarray and len(m.log) == 1 and type(m.log[0]) is np.float64
    np.testing.assert_array_equal(m.W, [2, 2, 2])  # one eager run's effects, not two


def test_the_functions_own_exception_is_raised_as_numpy_raises_it():
    def fn(x):
        x *= 2
        if x.shape[0] > 2:
            raise ValueError("too long")
        return x

    f = lowering.compile(fn)
    x = np.ones(3)
    with pytest.raises(ValueError, match="too long"):
        f(x)
    np.testing.assert_array_equal(x, [2, 2, 2])  # numpy had doubled it already
    np.testing.assert_array_equal(f(np.ones(2)), [2, 2])  # not marked as failed
    assert f.stats["compiles"] == 1


def test_shape_error_at_trace_time_is_numpys():
    f = lowering.compile(lambda a, b: a + b)
    with pytest.raises(ValueError, match="could not be broadcast"):
        f(np.ones(3), np.ones(4))


def test_an_output_that_cannot_be_allocated_is_a_memory_error():
    f = lowering.compile(lambda x: x[:, None] * x[None, :])
    with pytest.raises(MemoryError):
        f(np.ones(10**6))


def test_floating_point_flags_in_a_gradient_follow_errstate():
    g = lowering.grad(lambda x: np.log(x).sum())
    x = np.array([0.0, 1.0])
    with pytest.warns(RuntimeWarning, match="divide by zero encountered in grad of"):
        np.testing.assert_array_equal(g(x), [np.inf, 1.0])
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError, match="divide by zero"):
            g(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(divide="ignore"):
            np.testing.assert_array_equal(g(x), [np.inf, 1.0])


@pytest.mark.parametrize("path", ["traced", "cached"])
def test_a_failure_of_the_compiled_program_itself_warns_and_goes_eager(monkeypatch, path):
    """An error out of a compiled program that is not numpy's (a fault of the
    program, not of the call: here a kernel launch that raises) is not taken
    for numpy's error and re-run silently: one warning names it, and the
    function runs eagerly from then on, with numpy's results."""
    from lowering.pipeline import clear_programs
    from runtime import cpu

    clear_programs()
    x = np.linspace(-1.0, 1.0, 4096)

    def f(x):
        return np.tanh(x) * 2.0 + 1.0

    cf = lowering.compile(f, backend="cpu")
    if path == "cached":
        np.testing.assert_allclose(cf(x), f(x))
        cf._fast = None  # (the Python path: the launch below is what it calls)

    def broken(*args, **kwargs):
        raise TypeError("a launch that fails")

    monkeypatch.setattr(cpu, "launch", broken)
    with pytest.warns(RuntimeWarning, match="compiled program of .*failed.*TypeError: a launch"):
        got = cf(x)
    np.testing.assert_allclose(got, f(x))
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(cf(x), f(x))  # eager now, no second warning
    assert cf.stats["eager_fallbacks"] == 2


def test_an_index_error_of_a_kernel_is_numpys_and_does_not_warn():
    x = np.arange(10.0)

    def f(x, i):
        return x[i] * 2.0

    cf = lowering.compile(f, backend="cpu")
    np.testing.assert_array_equal(cf(x, np.array([1, 2, -1])), f(x, np.array([1, 2, -1])))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(IndexError, match="out of bounds"):
            cf(x, np.array([1, 20]))
    np.testing.assert_array_equal(cf(x, np.array([3, 4])), f(x, np.array([3, 4])))
