"""Device arrays and the memory numpy's answers share or do not share, in
both GPU modes, without a GPU (`LOWERING_GPU=interpret`, device arrays are
`Box`es as in tests/test_gpu_reduce_overhead.py): a copy of an argument is
a new array, equal results are separate arrays, one array passed twice is
one array to the function, numpy's writes before an error it raises reach
the caller's array, and a routine's IndexError is numpy's. Each of these
gave a wrong answer or a lost write when first written."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("triton")

import lowering  # noqa: E402
from tests.stand_in_device import Box, install  # noqa: E402


@pytest.fixture(autouse=True)
def box_device(monkeypatch):
    monkeypatch.setenv("LOWERING_GPU", "interpret")
    return install(monkeypatch)


MODES = ["default", "reduce-overhead"]


def served_by_device_entry(f, *args):
    """Calls enough for the device entry (and, with reduce-overhead, its
    graph's replay) to serve the next call with these arguments."""
    for _ in range(3):
        f(*args)
    assert f._device_entries


# ---- results that alias the caller's arguments or each other ----------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["copy", "astype", "np.copy"])
def test_a_copy_of_a_device_argument_is_a_new_array(mode, how):
    """numpy's x.copy() / x.astype(x.dtype) / np.copy(x) is a new array. On
    device arrays a cached call returns the caller's own array (the program's
    output slot is its input slot: device_call.steps and
    GraphedEntry._replay hand `inputs[s]` out), so writing the "copy"
    writes the argument."""
    fn = {"copy": lambda x: x.copy(), "astype": lambda x: x.astype(x.dtype),
          "np.copy": lambda x: np.copy(x)}[how]
    f = lowering.compile(fn, backend="gpu", mode=mode)
    buf = Box(np.arange(4.0))
    served_by_device_entry(f, buf)
    out = f(buf)
    assert out is not buf and not np.shares_memory(out.a, buf.a)
    out.a[0] = 99.0
    np.testing.assert_array_equal(buf.a, np.arange(4.0))


def test_two_equal_results_are_two_arrays():
    """`return x * 2, x * 2`: numpy returns two arrays; a cached default-mode
    device call returns one buffer twice (run_device's outputs of one slot),
    so writing one result changes the other. (reduce-overhead clones each
    result: not affected.)"""
    f = lowering.compile(lambda x: (x * 2, x * 2), backend="gpu")
    buf = Box(np.arange(4.0))
    served_by_device_entry(f, buf)
    a, b = f(buf)
    assert not np.shares_memory(a.a, b.a)
    a.a[0] = 100.0
    np.testing.assert_array_equal(b.a, np.arange(4.0) * 2)


# ---- arguments that alias each other ----------------------------------------------

def _write_then_read(a, b):
    a[...] = b * 2
    return b + 1


@pytest.mark.parametrize("mode", MODES)
def test_one_device_array_passed_twice_to_a_function_that_writes_it(mode):
    """f(c, c) after calls with two arrays: numpy reads b after the write
    through a (the same memory). The device key has no aliasing or overlap
    guard, so the entry compiled for distinct arrays serves it (and in
    reduce-overhead each position is copied into a buffer of its own)."""
    f = lowering.compile(_write_then_read, backend="gpu", mode=mode)
    for k in range(3):
        f(Box(np.arange(4.0) + k), Box(np.ones(4)))
    c = Box(np.arange(4.0))
    want_c = np.arange(4.0)
    want = _write_then_read(want_c, want_c)
    got = f(c, c)
    np.testing.assert_array_equal(c.a, want_c)
    np.testing.assert_array_equal(got.a, want)  # numpy: [1, 3, 5, 7]


# ---- errors: partial effects and the index checks ---------------------------------

def _bump_then_gather(a, ids):
    a += 1
    return a[ids] * 2


@pytest.mark.parametrize("mode", MODES)
def test_numpy_s_write_before_an_index_error_reaches_a_device_argument(mode):
    """numpy increments `a` and then raises at the gather; so does the
    compiled function on numpy arrays. On device arrays the call runs on
    host copies (c340434: a program that writes and checks indices) and the
    IndexError escapes device_call.call before the host copy is written
    back: the caller's device array keeps its old values."""
    f = lowering.compile(_bump_then_gather, backend="gpu", mode=mode)
    for _ in range(3):
        f(Box(np.arange(4.0)), Box(np.array([0, 1])))
    want = np.arange(4.0)
    with pytest.raises(IndexError):
        _bump_then_gather(want, np.array([0, 9]))
    got = Box(np.arange(4.0))
    with pytest.raises(IndexError):
        f(got, Box(np.array([0, 9])))
    np.testing.assert_array_equal(got.a, want)  # numpy: [1, 2, 3, 4]


def test_a_host_gather_s_index_error_is_numpy_s_not_a_program_failure():
    """A gather the loop level leaves to numpy (`numpy:array.gather`: here an
    empty gathered result, `x[:, i]` of x (0, 5)) runs on host copies in
    GpuProgram._run_extern, whose IndexError (numpy_backend._check_indices)
    is not marked `as_numpy`: the call's IndexError is numpy's, but the
    function is declared failed ("a compiled program ... failed; running it
    eagerly from now on") and never runs compiled again. The CPU backend
    keeps the entry."""
    def cols(x, i):
        return x[:, i] * 2

    x = np.zeros((0, 5))
    f = lowering.compile(cols, backend="gpu")
    assert f(x, np.array([1])).shape == (0, 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(IndexError):
            f(x, np.array([7]))
    assert not [str(w.message) for w in caught if "failed" in str(w.message)]
    assert f._failed is None
    f(x, np.array([2]))
    assert f.stats["cache_hits"] == 1


def test_two_views_of_one_device_array_are_refused_with_a_clear_error():
    """Two overlapping views of one device array, one of them written: the
    host copies could not keep their sharing, so the call is refused, naming
    the arguments (one array passed twice works: see above)."""
    f = lowering.compile(_write_then_read, backend="gpu")
    c = Box(np.arange(5.0))
    with pytest.raises(ValueError, match="arguments 0 and 1 .* share memory"):
        f(c[1:], c[:-1])
    np.testing.assert_array_equal(c.a, np.arange(5.0))


@pytest.mark.parametrize("mode", MODES)
def test_an_argument_written_and_returned_is_the_caller_s_array(mode):
    """`x += 1; return x`: numpy returns the argument itself; so does the
    device entry (and its graph), after writing it."""
    def bump(x):
        x += 1
        return x

    f = lowering.compile(bump, backend="gpu", mode=mode)
    buf = Box(np.arange(4.0))
    served_by_device_entry(f, buf)
    out = f(buf)
    assert out is buf
    np.testing.assert_array_equal(buf.a, np.arange(4.0) + 4)


def test_a_read_only_function_takes_one_array_twice_on_the_device(box_device, monkeypatch):
    """Sharing memory matters only to a call that writes an argument: a
    read-only function's device entry serves `f(c, c)` (no host copies)."""
    def add(a, b):
        return a * 2 + b

    f = lowering.compile(add, backend="gpu")
    served_by_device_entry(f, Box(np.arange(4.0)), Box(np.ones(4)))
    host = []
    real = box_device.to_host
    monkeypatch.setattr(box_device, "to_host", lambda x: (host.append(1), real(x))[1])
    c = Box(np.arange(4.0))
    np.testing.assert_array_equal(f(c, c).a, add(np.arange(4.0), np.arange(4.0)))
    assert host == []
