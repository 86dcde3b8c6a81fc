"""A kernel that loads nothing but constants computes the same values on
every call: the CPU program runs it once when it is built and keeps its
buffer, read-only (`cpu_backend.hoist_constant_kernels`); explain says so.
It stays a per-call kernel where its run raises a floating-point flag
(numpy warns on every call), where it writes a result or a buffer another
step writes, and its values are numpy's on every call either way."""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest

import lowering
from lowering.backends.cpu_backend import ONCE, CpuProgram
from passes import cost_model as cm


def kernels(f, *args):
    return [name for ks in lowering.explain(f)(*args).kernels for name, _ in ks]


def power_by_numpy(x):
    return x ** 8.0 + 1.0  # numpy's power loop reads a 0-d buffer holding 8.0


def of_arange(x):
    return np.sort(x) + np.sort(np.sqrt(np.arange(x.shape[0] * 1.0) + 5))


def of_arange_warns(x):
    return np.sort(x) + np.sort(np.sqrt(np.arange(x.shape[0] * 1.0) - 5))


def full_returned(x):
    return np.sort(x), np.full(3, 2.5) * 3


def _calls_match(f, x, n=3):
    c = lowering.compile(f)
    for _ in range(n):
        got, want = c(x), f(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            np.testing.assert_array_equal(g, w)
    return c


def test_the_exponent_of_numpys_power_loop_is_made_once():
    x = np.linspace(0.1, 2.0, 4096)
    with cm.forced({"power": "library"}):
        c = _calls_match(power_by_numpy, x)
        names = kernels(c, x)
    once = [n for n in names if n.endswith(ONCE)]
    assert once and not once[0].startswith("constant"), names
    assert lowering.explain(c)(x).kernel_count == len(names) - len(once)


def test_a_kernel_of_constants_only_is_made_once_and_read_only():
    x = np.array([3.0, -1.0, 2.0, 0.5, 7.0])
    before = {id(o) for o in gc.get_objects() if isinstance(o, CpuProgram)}
    c = _calls_match(of_arange, x)
    names = kernels(c, x)
    assert sum(n.endswith(ONCE) for n in names) == 2, names  # arange and sqrt(arange + 5)
    progs = [o for o in gc.get_objects() if isinstance(o, CpuProgram) and o.hoisted
             and id(o) not in before]
    assert progs
    statics = [st.static for st in progs[-1].steps if getattr(st, "static", None) is not None]
    made_once = [a for a in statics if not a.flags.writeable]
    assert len(made_once) >= 2, statics  # arange and sqrt(arange + 5): read-only
    np.testing.assert_array_equal(made_once[-1],
                                  np.sqrt(np.arange(5.0) + 5))


def test_a_constant_kernel_that_raises_a_flag_warns_on_every_call():
    x = np.array([3.0, -1.0, 2.0, 0.5, 7.0])
    c = lowering.compile(of_arange_warns)
    for _ in range(3):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            got = c(x)
        assert [str(w.message) for w in seen] == ["invalid value encountered in sqrt"]
        np.testing.assert_array_equal(got, of_arange_warns(x))
    assert not any(n.endswith(ONCE) and not n.startswith("constant") for n in kernels(c, x))
    with np.errstate(invalid="raise"):
        with pytest.raises(FloatingPointError):
            c(x)


def test_a_returned_constant_is_a_fresh_array_per_call():
    x = np.array([3.0, 1.0])
    c = _calls_match(full_returned, x)
    a, b = c(x)[1], c(x)[1]
    assert a is not b and a.flags.writeable
    a[0] = 99.0
    np.testing.assert_array_equal(c(x)[1], np.full(3, 7.5))
