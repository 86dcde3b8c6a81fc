"""Results written back into the caller's arguments, computed in the
argument's own buffer (`Lowering.in_place_result`, `slice_write`'s own
arguments) instead of a buffer of their own that the runtime copies into the
argument after the call. Where the call may be re-run eagerly (an op of the
program can raise a floating-point flag), the writing kernel first stores
each old value into an undo buffer, copied back before the re-run
(`CpuProgram._undo`, the fast call's restore): the re-run must see the
caller's arrays as they came, or `x += y` would be applied twice. Each case
is checked against numpy — values, the object returned, warnings, the state
numpy leaves when it raises — and the program's shape (the argument
returned as the result's buffer, an undo buffer or none) is read off the
kernel level."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import lowering
from lowering.testing import assert_matches_numpy, assert_same_value
from runtime import cpu

# big enough that the kernel runs split across threads (where an undo
# buffer pays: `Lowering.undo_pays`)
BIG = (400, 400)


def iadd(a, b):
    a += b
    return a


def iadd_none(a, b):
    a += b


def scaled_update(x, g):
    x -= 0.1 * g


def int_update(a, b):
    a += b * 3
    return a


def shift_copy(a, b):
    a[..., 1:] = b[..., :-1]
    return a


def self_shift(a):
    a[1:] = a[:-1]
    return a


def read_old_after(a, b):
    old = a * 2.0
    a += b
    return old


def later_flag(a, b, c):
    a += b
    return np.log(c)


def twice(a, b):
    a += b
    a *= 2.0
    return a


def _kernel_text(fn, spec: str, dynamic=None) -> str:
    """The kernel level of fn on arguments of `spec` (`lowering.dump`'s)."""
    from lowering.dump import capture, parse_spec, print_lower_stages

    out = io.StringIO()
    print_lower_stages(capture(fn, parse_spec(spec), dynamic=dynamic), out, ["kernel"])
    return out.getvalue()


@pytest.mark.parametrize("shape", [(7,), (64, 64), BIG])
@pytest.mark.parametrize("fn", [iadd, iadd_none, scaled_update, twice])
def test_float_updates_match_numpy(fn, shape):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(shape), rng.standard_normal(shape)
    assert_matches_numpy(fn, a, b, calls=3)


@pytest.mark.parametrize("shape", [(7,), BIG])
def test_result_is_the_argument(shape):
    a, b = np.ones(shape), np.ones(shape)
    cf = lowering.compile(iadd)
    for _ in range(3):
        r = cf(a, b)
        assert r is a
    np.testing.assert_array_equal(a, np.full(shape, 4.0))


@pytest.mark.parametrize("shape", [(7,), BIG])
@pytest.mark.parametrize("fn", [iadd, twice])
def test_a_re_run_sees_the_arguments_as_they_came(fn, shape):
    """An overflow in the last element: numpy warns, and the eager re-run
    must start from the pristine arguments (else x += y runs twice)."""
    cf = lowering.compile(fn)
    a, b = np.ones(shape), np.ones(shape)
    cf(a.copy(), b)  # compiled, then cached
    for _ in range(2):
        a, b = np.ones(shape), np.ones(shape)
        a.flat[-1] = b.flat[-1] = 1e308
        want_a = a.copy()
        with warnings.catch_warnings(record=True) as want_w:
            warnings.simplefilter("always")
            want = fn(want_a, b)
        with warnings.catch_warnings(record=True) as got_w:
            warnings.simplefilter("always")
            got = cf(a, b)
        np.testing.assert_array_equal(a, want_a)
        np.testing.assert_array_equal(got, want)
        assert [str(w.message) for w in got_w] == [str(w.message) for w in want_w]


@pytest.mark.parametrize("shape", [(7,), BIG])
def test_raise_leaves_numpys_state(shape):
    cf = lowering.compile(twice)
    cf(np.ones(shape), np.ones(shape))
    a, b = np.ones(shape), np.ones(shape)
    a.flat[-1] = b.flat[-1] = 1e308
    want_a = a.copy()
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        twice(want_a, b)
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        cf(a, b)
    np.testing.assert_array_equal(a, want_a)


@pytest.mark.parametrize("shape", [(7,), BIG])
def test_a_later_kernels_flag_restores_the_argument(shape):
    """The in-place kernel succeeds, a later one raises invalid (log of a
    negative): the argument is restored, then numpy runs it once."""
    cf = lowering.compile(later_flag)
    a, b, c = np.ones(shape), np.ones(shape), np.ones(shape)
    cf(a, b, c)
    a, b, c = np.ones(shape), np.ones(shape), np.ones(shape)
    c.flat[0] = -1.0
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = cf(a, b, c)
    np.testing.assert_array_equal(a, np.full(shape, 2.0))
    assert np.isnan(got.flat[0]) and [str(x.message) for x in w] == [
        "invalid value encountered in log"]


@pytest.mark.parametrize("shape", [(7,), (64, 64), BIG])
@pytest.mark.parametrize("fn", [int_update, shift_copy, self_shift, read_old_after])
def test_other_writes_match_numpy(fn, shape):
    rng = np.random.default_rng(5)
    if fn is int_update:
        args = [rng.integers(-9, 9, shape), rng.integers(-9, 9, shape)]
    elif fn is self_shift:
        args = [rng.standard_normal(shape)]
    else:
        args = [rng.standard_normal(shape), rng.standard_normal(shape)]
    assert_matches_numpy(fn, *args, calls=3)


@pytest.mark.parametrize("spec", ["f64[400,400] f64[400,400]", "f64[64,64] f64[64,64]",
                                  "f32[7] f32[7]"])
def test_float_update_writes_the_argument_with_an_undo_buffer(spec):
    text = _kernel_text(iadd, spec)
    assert "lowering.undo = 0" in text
    assert "func.return %0 :" in text  # the argument's own buffer


def test_updates_no_flag_can_undo_write_the_argument_without_a_copy():
    for fn, spec in [(int_update, "i64[40,40] i64[40,40]"),
                     (shift_copy, "f64[40,40] f64[40,40]"),
                     (iadd, "i32[1000] i32[1000]")]:
        text = _kernel_text(fn, spec)
        assert "lowering.undo" not in text, fn.__name__
        assert "func.return %0 :" in text, fn.__name__
        assert "memref.alloc" not in text, fn.__name__


@pytest.mark.parametrize("dynamic,layout", [(False, "C"), (True, "C"), (False, "F"),
                                            (False, "strided")])
def test_a_small_float_update_runs_natively_and_restores_the_argument(dynamic, layout,
                                                                       monkeypatch):
    """A single-threaded update with an undo buffer runs from the native
    entry (of each size set, for a program of runtime sizes); where the
    flags' check raises (errstate raise, a later op's flag), the entry
    copies the old values back before the re-run (an F-ordered argument's
    undo buffer holds its transpose: the same bytes; a strided one's are
    put back by numpy's assignment, called back): the caller's array holds
    numpy's values, and numpy's error or warning is the answer."""
    from lowering import fastpath

    monkeypatch.setattr(fastpath, "NATIVE_AFTER_CALLS", 2)
    cf = lowering.compile(later_flag, dynamic=dynamic)
    rng = np.random.default_rng(5)
    for k in range(8):
        shape = (3, 5) if k < 5 or not dynamic else (4, 6)
        a, b = rng.standard_normal(shape), rng.standard_normal(shape)
        c = rng.standard_normal(shape) if k % 2 else np.abs(rng.standard_normal(shape)) + 1
        mine, theirs = _layout(a, layout), _layout(a, layout)
        (r1, got), (r2, want) = _warned(cf, mine, b, c), _warned(later_flag, theirs, b, c)
        np.testing.assert_array_equal(mine, theirs)  # (added once)
        assert_same_value(r1, r2)  # (log: the pointwise tolerance)
        assert got == want
        x, y = _layout(np.full(shape, 1e308), layout), np.full(shape, 1e308)
        with np.errstate(over="raise"), pytest.raises(FloatingPointError):
            cf(x, y, np.ones(shape))
        np.testing.assert_array_equal(x, np.inf)  # (numpy's ufunc wrote x, then raised)
    assert type(cf._fast).__name__ == "builtin_function_or_method"


def test_a_float_update_of_runtime_sizes_writes_the_argument_with_an_undo_buffer():
    """A program of runtime sizes writes its result into the argument, with
    an undo buffer, not computed apart and copied in (two more streams:
    `x += y` at 1000x1000 ran in 873 us apart, 438 in place, numpy 320)."""
    text = _kernel_text(iadd, "f64[64,64] f64[64,64]", dynamic=True)
    assert "lowering.undo = 0" in text
    assert "func.return %0 :" in text


@pytest.mark.parametrize("shape", [(3, 5), (64, 64), (1, 7)])
def test_a_re_run_of_runtime_sizes_sees_the_arguments_as_they_came(shape):
    cf = lowering.compile(later_flag, dynamic=True)
    rng = np.random.default_rng(3)
    for k in range(3):
        a, b = rng.standard_normal(shape), rng.standard_normal(shape)
        c = -np.abs(rng.standard_normal(shape))  # (log of negatives: invalid, re-run)
        mine, theirs = a.copy(), a.copy()
        (r1, got), (r2, want) = _warned(cf, mine, b, c), _warned(later_flag, theirs, b, c)
        np.testing.assert_array_equal(mine, theirs)  # (added once, not twice)
        np.testing.assert_array_equal(r1, r2)
        assert got == want


def _warned(fn, *args):
    """fn(*args) and the messages of the warnings it gave, in order."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args)
    return result, [str(w.message) for w in caught]


def _layout(x: np.ndarray, layout: str) -> np.ndarray:
    if layout == "C":
        return np.array(x, order="C")
    if layout == "F":
        return np.asfortranarray(x)
    if layout == "transposed":
        return np.ascontiguousarray(x.T).T
    big = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    big[..., ::2] = x
    return big[..., ::2]


@pytest.mark.parametrize("layout", ["F", "transposed", "strided"])
@pytest.mark.parametrize("shape", [(7, 5), (16, 32, 64), BIG, (3, 1, 4)])
@pytest.mark.parametrize("fn", [iadd, twice, shift_copy, self_shift, read_old_after])
def test_other_layouts_match_numpy(fn, shape, layout):
    rng = np.random.default_rng(7)
    args = [_layout(rng.standard_normal(shape), layout)
            for _ in range(1 if fn is self_shift else 2)]
    assert_matches_numpy(fn, *args, calls=3)


@pytest.mark.parametrize("shape", [(7, 5), BIG])
def test_f_ordered_re_run_sees_the_argument_as_it_came(shape):
    cf = lowering.compile(twice)
    cf(np.asfortranarray(np.ones(shape)), np.asfortranarray(np.ones(shape)))
    a, b = np.asfortranarray(np.ones(shape)), np.asfortranarray(np.ones(shape))
    a[-1, 0] = b[-1, 0] = 1e308
    want = a.copy(order="F")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        twice(want, b)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cf(a, b)
    np.testing.assert_array_equal(a, want)
    assert [str(x.message) for x in w] == ["overflow encountered in add"]


def test_f_ordered_argument_is_written_in_its_memory_order():
    """The kernel runs over the transpose's points (its innermost loop over
    the F-ordered argument's unit strides) and stores at the result's own
    index; the undo buffer holds the old values transposed."""
    from xdsl.parser import Parser

    from lowering.pipeline import context, lower

    a = np.asfortranarray(np.ones((30, 40)))
    report = lowering.explain(lowering.compile(iadd, backend="cpu"))(a, a.copy(order="F"))
    module = Parser(context(), report.graphs[0]).parse_module()
    text = str(lower(module, "cpu", ["F", "F"])[0])
    assert "kernel.kernel \"k1\"(%0, %1, %2) parallel [40]" in text
    assert "loop.store %" in text and "%0[affine_map<(d0, d1) -> (d1, d0)>]" in text
    assert "lowering.undo = 0 : i64, lowering.undo_transposed" in text
    assert "memref.alloc() {lowering.undo = 0 : i64, lowering.undo_transposed} : memref<40x30xf64>" in text


def mul_into(x, y):
    x *= y
    return x


@pytest.mark.parametrize("fn, views", [
    (mul_into, lambda buf, n: (buf[:2 * n:2], buf[n + 1:2 * n + 1])),  # interleaved
    (mul_into, lambda buf, n: (buf[:n], buf[n // 2:n // 2 + n])),  # shifted
    (shift_copy, lambda buf, n: (buf[1:n + 1], buf[:n])),
])
@pytest.mark.parametrize("n", [16, 200_000])
def test_overlapping_arguments_on_the_tracing_call(fn, views, n):
    """The call that traces runs the program on its own arguments before
    the entry's overlap guard keeps such calls out: where the written
    argument overlaps another, its result is not computed in place (it was:
    the kernel wrote over values it read later, a wrong answer)."""
    cf = lowering.compile(fn)
    ours, ref = np.arange(2 * n + 2.0) % 7, np.arange(2 * n + 2.0) % 7
    cf(*views(ours, n))
    fn(*views(ref, n))
    np.testing.assert_array_equal(ours, ref)
