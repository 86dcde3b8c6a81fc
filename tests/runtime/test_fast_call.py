"""The cached call's fast path (`lowering/fastpath.py`) for calls that are
not flat positional arrays: keyword arguments, nested tuples, lists, dicts
and namedtuples in and out. The generated call checks the structure (types,
lengths, a dict's keys in order) before it reads a leaf, so a call of any
other structure misses and takes the general path: never another entry's
leaves, never a wrong answer."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

import lowering
from lowering.testing import assert_same_value

Pair = namedtuple("Pair", "lo hi")


def arrays(n=16, k=3, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(np.float32) for _ in range(k)]


def fast_of(f):
    return f._fast is not None and f._fast_kw


def test_keyword_arguments_take_the_fast_call():
    def f(x, y=None, z=None):
        return x * 2 + y - z

    x, y, z = arrays()
    cf = lowering.compile(f)
    assert_same_value(cf(x, y=y, z=z), f(x, y=y, z=z))
    assert fast_of(cf)
    hits = cf.stats["cache_hits"]
    for _ in range(3):
        assert_same_value(cf(x, y=y, z=z), f(x, y=y, z=z))
    assert cf.stats["cache_hits"] == hits + 3 and cf.stats["compiles"] == 1
    # the same keywords in another order are another structure: the general
    # path decides (the values must land on their own names either way)
    assert_same_value(cf(x, z=z, y=y), f(x, z=z, y=y))
    assert_same_value(cf(x, y, z), f(x, y, z))
    assert_same_value(cf(x, y=z, z=y), f(x, y=z, z=y))


def test_a_dict_argument_misses_when_its_keys_change_order():
    def f(d):
        return d["a"] * 2 - d["b"]

    a, b, _ = arrays()
    cf = lowering.compile(f)
    assert_same_value(cf({"a": a, "b": b}), f({"a": a, "b": b}))
    assert fast_of(cf)
    assert_same_value(cf({"b": b, "a": a}), f({"b": b, "a": a}))
    assert_same_value(cf({"a": b, "b": a}), f({"a": b, "b": a}))
    assert_same_value(cf({"a": a, "b": b, "c": a}), f({"a": a, "b": b, "c": a}))


def test_a_function_that_iterates_a_dict_sees_its_order():
    def weighted(d):
        out = 0
        for i, k in enumerate(d):
            out = out + d[k] * (i + 1)
        return out

    a, b, _ = arrays()
    cf = lowering.compile(weighted)
    assert_same_value(cf({"a": a, "b": b}), weighted({"a": a, "b": b}))
    assert fast_of(cf)
    for _ in range(2):
        assert_same_value(cf({"b": b, "a": a}), weighted({"b": b, "a": a}))
        assert_same_value(cf({"a": a, "b": b}), weighted({"a": a, "b": b}))


def test_nested_lists_tuples_and_namedtuples_in_and_out():
    def f(ps, scale):
        lo, hi = ps[0], ps[1]
        # (the namedtuple out is the argument's own type: a global name read
        # would be Python state, which the general path guards)
        return {"mid": type(lo)((lo.lo + lo.hi) * scale[0], (hi.lo + hi.hi) * scale[1]),
                "all": [lo.lo * hi.hi]}

    a, b, c = arrays()
    args = ([Pair(a, b), Pair(b, c)], (np.float32(0.5), np.float32(2.0)))
    cf = lowering.compile(f)
    want = f(*args)
    got = cf(*args)
    assert fast_of(cf)
    for _ in range(2):
        got = cf(*args)
        assert set(got) == {"mid", "all"} and type(got["mid"]) is Pair and type(got["all"]) is list
        assert_same_value(got["mid"].lo, want["mid"].lo)
        assert_same_value(got["mid"].hi, want["mid"].hi)
        assert_same_value(got["all"][0], want["all"][0])
    # a tuple where a list was: another structure
    other = (tuple(args[0]), args[1])
    assert_same_value(cf(*other)["all"][0], f(*other)["all"][0])
    # (the results are fresh arrays on every call)
    assert cf(*args)["all"][0] is not cf(*args)["all"][0]


def test_positional_calls_keep_the_native_entry_beside_keywords():
    def f(x, y=None):
        return x * 2 + (0 if y is None else y)

    x, y, _ = arrays()
    cf = lowering.compile(f)
    cf(x)
    first = cf._fast
    assert_same_value(cf(x, y=y), f(x, y=y))
    assert_same_value(cf(x), f(x))
    assert cf._fast is first or fast_of(cf)


def test_nested_results_of_positional_calls_keep_their_structure():
    """A flat positional call whose result nests (`divmod` inside a tuple):
    the native entry returns the flat tuple of results and the generated
    call around it builds the nesting."""
    def f(x, y):
        return x * 2, (x + y, np.divmod(x, 3.0)), [y * 3]

    x, y, _ = arrays()
    cf = lowering.compile(f)
    want = f(x, y)
    for _ in range(3):
        got = cf(x, y)
        assert type(got) is tuple and type(got[1]) is tuple and type(got[1][1]) is tuple
        assert type(got[2]) is list
        assert_same_value(got[1][1][1], want[1][1][1])
        assert_same_value(got[2][0], want[2][0])
    assert getattr(cf._fast, "native", None) is not None


def test_keyword_spellings_after_a_positional_call_get_calls_of_their_own():
    """f(x, y) first, then f(x, y=y) and f(x=x, y=y): each spelling gets a
    generated call (keyed by positional count and keyword names in order),
    so none runs the general path after its first call; each still lands
    its values on their own names."""
    def f(x, y):
        return x * 2 - y

    x, y, _ = arrays()
    cf = lowering.compile(f)
    assert_same_value(cf(x, y), f(x, y))
    spellings = [lambda a, b: cf(a, y=b), lambda a, b: cf(x=a, y=b), lambda a, b: cf(y=b, x=a)]
    for call in spellings:
        call(x, y)
    general = []
    real = cf._try_entries
    cf._try_entries = lambda *a: (general.append(a), real(*a))[1]
    for call in spellings:
        for a, b in ((x, y), (y, x)):
            assert_same_value(call(a, b), f(a, b))
    assert general == []  # every call ran a generated one
    # another shape misses the generated call: the general path compiles it
    x2, y2 = np.ones(5, np.float32), np.arange(5, dtype=np.float32)
    assert_same_value(cf(x=x2, y=y2), f(x2, y2))
    assert general


def test_nested_arguments_reach_the_native_entry():
    """A call of nested tuples, lists or namedtuples (no Python state read):
    the generated call checks the structure, then hands the leaves to the
    flat call's native builtin (its guards native too); another structure,
    dtype or shape misses and the general path answers."""
    def f(ps, q):
        return ps[0] * 2 + ps[1].lo - q[0]

    def call_args(seed):
        a, b, c, d = arrays(k=4, seed=seed)
        return (a, Pair(b, c)), [d]

    cf = lowering.compile(f)
    args = call_args(0)
    assert_same_value(cf(*args), f(*args))
    assert getattr(cf._fast, "native", None) is not None
    hits = cf.stats["cache_hits"]
    for k in range(1, 4):
        args = call_args(k)
        assert_same_value(cf(*args), f(*args))
    assert cf.stats["cache_hits"] == hits + 3 and cf.stats["compiles"] == 1
    # another structure (a list for the tuple), dtype or shape: not this entry's
    (a, p), q = call_args(5)
    for other in (([a, p], q), ((a.astype(np.float64), p), q),
                  ((a[:5], Pair(p.lo[:5], p.hi[:5])), [q[0][:5]])):
        assert_same_value(cf(*other), f(*other))


def test_every_plain_entry_gets_a_fast_call_of_its_own(monkeypatch):
    """A second size, a default left out after a keyword call, a value
    specialized anew: each entry's calls skip the walk over every entry's
    guards (10 µs a call), each giving its own entry's answer; and a call no
    fast call takes still finds its entry."""
    def f(x, y, scale=2.0):
        return x * scale + y

    x, y, _ = arrays(8)
    big, other, _ = arrays(16, seed=1)
    cf = lowering.compile(f, dynamic=False)
    cases = [((x, y), {"scale": 3.0}), ((x, y), {}), ((big, other), {}), ((x, y, 5.0), {})]
    for args, kw in cases:
        assert_same_value(cf(*args, **kw), f(*args, **kw))
    assert cf.stats["compiles"] == 4 and len(cf._fast_more) == 3

    def walked(*a, **k):
        raise AssertionError("the general path ran")
    monkeypatch.setattr(cf, "_try_entries", walked)
    hits = cf.stats["cache_hits"]
    for args, kw in cases * 2:
        assert_same_value(cf(*args, **kw), f(*args, **kw))
    assert cf.stats["cache_hits"] == hits + 2 * len(cases)
    monkeypatch.undo()
    a32 = x.astype(np.float64)  # (another dtype: no fast call takes it)
    assert_same_value(cf(a32, a32), f(a32, a32))
    assert cf.stats["compiles"] == 5


def test_structured_results_reach_the_native_entry():
    """A dict, list or tuple of results, whatever the arguments' form
    (positional, keywords, a dict): the native builtin computes the flat
    results and the generated call builds the structure — fresh arrays each
    call, the values numpy's; a miss of the builtin's guards (another shape,
    dtype) goes through the flat Python call to the general path. (A
    namedtuple result reads its class, Python state: the Python call.)"""
    def positional(x, y):
        return {"a": x * 2 + 1, "b": (y - x, [x * y])}

    def keywords(x, y=None):
        return [x + y, {"d": x - y}]

    def nested(d):
        return {"s": d["x"] + d["y"], "p": d["x"] * d["y"]}

    calls = [(positional, lambda a, b: ((a, b), {})), (keywords, lambda a, b: ((a,), {"y": b})),
             (nested, lambda a, b: (({"x": a, "y": b},), {}))]
    for fn, spell in calls:
        cf = lowering.compile(fn)
        firsts = []
        for seed in range(4):
            a, b, _ = arrays(seed=seed)
            args, kw = spell(a, b)
            got, want = cf(*args, **kw), fn(*args, **kw)
            assert type(got) is type(want)
            flat_got, flat_want = _leaves(got), _leaves(want)
            assert len(flat_got) == len(flat_want)
            for g, w in zip(flat_got, flat_want):
                assert_same_value(g, w)
            firsts.append(flat_got[0])
        assert getattr(cf._fast, "native", None) is not None, fn.__name__
        assert cf.stats["compiles"] == 1
        assert len({id(r) for r in firsts}) == len(firsts)  # (a new array per call)
        # the builtin's guards miss: another shape, another dtype
        for a, b in ((np.ones(5, np.float32), np.arange(5, dtype=np.float32)),
                     (np.ones(16), np.arange(16.0))):
            args, kw = spell(a, b)
            for g, w in zip(_leaves(cf(*args, **kw)), _leaves(fn(*args, **kw))):
                assert_same_value(g, w)


def _leaves(tree):
    if isinstance(tree, dict):
        return [x for v in tree.values() for x in _leaves(v)]
    if isinstance(tree, (list, tuple)):
        return [x for v in tree for x in _leaves(v)]
    return [tree]


def test_writes_into_arguments_take_the_fast_call():
    """`x *= y` (returning x, or nothing), a slice of an argument updated
    with another value returned, by keyword too: the generated call runs the
    program and copies the written result into the argument, as the general
    path does — the caller's array holds numpy's values after every call,
    and is the result returned; arguments that overlap miss the call and
    numpy's aliasing answers."""
    def scale(x, y):
        x *= y
        return x

    def scale_quietly(x, y):
        x *= y

    def shift_add(x, y=None):
        x[1:] += y[:-1]
        return x.sum()

    calls = [(scale, lambda a, b: ((a, b), {})), (scale_quietly, lambda a, b: ((a, b), {})),
             (shift_add, lambda a, b: ((a,), {"y": b}))]
    for fn, spell in calls:
        cf = lowering.compile(fn)
        a, b, _ = arrays(seed=1)
        mine, theirs = a.copy(), a.copy()
        general = []
        for k in range(5):
            if k == 2:  # (from the third call on: no call may take the general path)
                real = cf._try_entries
                cf._try_entries = lambda *x, real=real: (general.append(x), real(*x))[1]
            args, kw = spell(mine, b)
            got = cf(*args, **kw)
            targs, tkw = spell(theirs, b)
            want = fn(*targs, **tkw)
            np.testing.assert_array_equal(mine, theirs)  # (written into the caller's array)
            if want is None:
                assert got is None
            elif isinstance(want, np.ndarray):
                assert got is mine
            else:
                assert_same_value(got, want)
        assert general == [] and cf._fast is not None, fn.__name__
        # the same array twice, or overlapping views of the traced shape:
        # numpy's aliasing, not the program's
        n = mine.shape[0]
        for twice in (True, False):
            ours, ref = np.arange(n + 1.0), np.arange(n + 1.0)
            for buf, run in ((ours, cf), (ref, fn)):
                x, y = (buf[:n], buf[:n]) if twice else (buf[1:], buf[:-1])
                args, kw = spell(x, y)
                run(*args, **kw)
            np.testing.assert_array_equal(ours, ref)


def test_a_program_with_nothing_to_run_gets_a_fast_call():
    """`np.positive(x, out=x)`: the program runs no step (the result is the
    argument, written in place by nothing); its fast call returns the
    argument itself."""
    def f(x):
        return np.positive(x, out=x)

    cf = lowering.compile(f)
    x = np.array([-2147483648, 3], dtype=np.int32)
    for _ in range(3):
        assert cf(x) is x
    np.testing.assert_array_equal(x, [-2147483648, 3])
    assert cf._fast is not None


def test_a_failure_making_the_fast_call_leaves_the_general_path(monkeypatch, caplog):
    """A bug in the fast call's generation costs speed, not the call: the
    failure is logged ("perf") and the general path answers."""
    from lowering import fastpath

    def broken(*a, **k):
        raise SyntaxError("a generated line the parser refuses")
    monkeypatch.setattr(fastpath._FastBody, "compile", broken)

    def f(x):
        return x * 2 + 1

    cf = lowering.compile(f)
    x, _, _ = arrays()
    with caplog.at_level("WARNING"):
        for _ in range(3):
            assert_same_value(cf(x), f(x))
    assert cf._fast is None
    assert any("no fast call" in r.getMessage() for r in caplog.records)


def test_writes_into_arguments_take_the_native_entry():
    """A flat positional call that writes into its arguments (`x *= y`,
    returning x, nothing, or another value) is the native builtin: it runs
    the program, then copies each result into its argument once the
    program succeeded; x is the result returned. Its overlap check is native
    too: the same array twice, overlapping views, miss it and numpy's
    aliasing answers; so do a strided or read-only argument."""
    def scale(x, y):
        x *= y
        return x

    def scale_quietly(x, y):
        x *= y

    def shift_add(x, y):
        x[1:] += y[:-1]
        return x.sum(), x

    for fn in (scale, scale_quietly, shift_add):
        cf = lowering.compile(fn)
        a, b, _ = arrays(seed=2)
        mine, theirs = a.copy(), a.copy()
        for k in range(4):
            got, want = cf(mine, b), fn(theirs, b)
            np.testing.assert_array_equal(mine, theirs)
            if want is None:
                assert got is None
            elif isinstance(want, np.ndarray):
                assert got is mine
            else:
                assert_same_value(got[0], want[0])
                assert got[1] is mine
        assert type(cf._fast).__name__ == "builtin_function_or_method", fn.__name__
        n = mine.shape[0]
        for case in ("twice", "views", "strided", "read-only"):
            ours, ref = np.arange(2 * n + 2.0), np.arange(2 * n + 2.0)
            results = []
            for buf, run in ((ours, cf), (ref, fn)):
                x, y = {"twice": (buf[:n], buf[:n]), "views": (buf[1:n + 1], buf[:n]),
                        "strided": (buf[:2 * n:2], buf[n + 1:2 * n + 1]),
                        "read-only": (buf[:n], buf[n:2 * n])}[case]
                if case == "read-only":
                    x.flags.writeable = False
                try:
                    results.append(run(x, y))
                except ValueError as e:
                    results.append(type(e))
            np.testing.assert_array_equal(ours, ref)
            if results[1] is ValueError:
                assert results[0] is ValueError, case


def test_a_native_write_that_raises_flags_leaves_the_argument_to_numpy():
    """Overflow in `x *= y`: the builtin's program raised IEEE flags, so
    nothing reached x before numpy ran the call itself: numpy's warning,
    numpy's values; under errstate(over="raise"), numpy's error and numpy's
    partial effect (its in-place loop ran whole before it raised)."""
    import warnings

    import pytest

    def scale(x, y):
        x *= y
        return x

    cf = lowering.compile(scale)
    x, y = np.ones(8, np.float32), np.full(8, 2.0, np.float32)
    cf(x.copy(), y)
    cf(x.copy(), y)
    assert type(cf._fast).__name__ == "builtin_function_or_method"
    big, ref = np.full(8, 3e38, np.float32), np.full(8, 3e38, np.float32)
    big[0] = ref[0] = 1.0
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert cf(big, y) is big
    assert [str(w.message) for w in seen] == ["overflow encountered in multiply"]
    with np.errstate(over="ignore"):
        scale(ref, y)
    np.testing.assert_array_equal(big, ref)
    big, ref = np.full(8, 3e38, np.float32), np.full(8, 3e38, np.float32)
    with np.errstate(over="raise"):
        with pytest.raises(FloatingPointError):
            cf(big, y)
        with pytest.raises(FloatingPointError):
            scale(ref, y)
    np.testing.assert_array_equal(big, ref)


def test_arguments_returned_unchanged_take_the_fast_call_with_numpys_aliasing():
    """A program that returns an argument as it came (no op computes the
    result) has a fast call too (it had none: 9 us a call for
    `x.astype(np.float32)` of float32): the argument itself where numpy
    returns it or a view of it (`x`, `x.T`, `x[1:]`, `np.asarray(x)`,
    `astype(copy=False)`), a fresh copy where numpy makes a new array
    (`np.array(x)`, `x.astype(x.dtype)`, `x.copy()`) — writing into the
    result reaches the caller's array exactly when it does in numpy."""
    cases = [lambda x: x, lambda x: x.T, lambda x: x.reshape(4, 2), lambda x: x[1:],
             lambda x: np.asarray(x), lambda x: x.astype(x.dtype),
             lambda x: x.astype(x.dtype, copy=False), lambda x: np.array(x),
             lambda x: x.copy(), lambda x: x.ravel(), lambda x: (x.copy(), x.sum())]
    for k, fn in enumerate(cases):
        cf = lowering.compile(fn)
        for _ in range(3):
            mine, theirs = np.arange(8.0).reshape(2, 4), np.arange(8.0).reshape(2, 4)
            got, want = cf(mine), fn(theirs)
            g0 = got[0] if isinstance(got, tuple) else got
            w0 = want[0] if isinstance(want, tuple) else want
            assert (g0 is mine) == (w0 is theirs), k
            assert np.shares_memory(g0, mine) == np.shares_memory(w0, theirs), k
            np.testing.assert_array_equal(g0, w0)
            g0[...] = -1.0  # a write into the result reaches the argument as in numpy
            w0[...] = -1.0
            np.testing.assert_array_equal(mine, theirs)
        assert cf._fast is not None, k


def test_an_argument_copied_into_another_takes_the_native_entry():
    """`a[...] = b` (returning a, or nothing): the program returns b as it
    came, and the call copies it into a — once, natively (before, the
    general path copied b, then copied the copy into a: 25 us for 8x8).
    Where the copied argument is itself written (`old = b.copy(); b[...] =
    0; a[...] = old`), its old values still reach a, on every path."""
    def assign(a, b):
        a[...] = b
        return a

    def assign_quietly(a, b):
        a[...] = b

    def swap_out(b, a):
        old = b.copy()
        b[...] = 0.0
        a[...] = old

    def assign_then_scale(a, b):
        a[...] = b
        b *= 2.0
        return a, b

    for fn in (assign, assign_quietly, swap_out, assign_then_scale):
        cf = lowering.compile(fn)
        for k in range(4):
            a, b, _ = arrays(seed=k)
            mine, theirs = (a.copy(), b.copy()), (a.copy(), b.copy())
            got, want = cf(*mine), fn(*theirs)
            np.testing.assert_array_equal(mine[0], theirs[0])
            np.testing.assert_array_equal(mine[1], theirs[1])
            if want is None:
                assert got is None
            elif isinstance(want, np.ndarray):
                assert got is mine[0]
            else:
                assert got[0] is mine[0] and got[1] is mine[1]
        if fn in (assign, assign_quietly):
            assert type(cf._fast).__name__ == "builtin_function_or_method", fn.__name__
        # overlapping views, a strided destination: numpy's answer
        for case in ("views", "strided"):
            ours, ref = np.arange(40.0), np.arange(40.0)
            for buf, run in ((ours, cf), (ref, fn)):
                run(*({"views": (buf[1:17], buf[:16]),
                       "strided": (buf[:32:2], buf[20:36])}[case]))
            np.testing.assert_array_equal(ours, ref)


def test_an_argument_copied_into_another_by_the_general_path_is_copied_once(monkeypatch):
    """The general path hands the written result to `apply_plan` as it is
    (its copy into the argument is numpy's assignment): no copy of it is
    made first, unless it shares memory with an argument written (then it
    is copied first, and its old values reach the other argument)."""
    from lowering import api

    monkeypatch.setattr(api, "make_fast_call", lambda *a, **k: None)
    copies = []
    real = api.fresh_results

    def counting(results, *rest):
        out = real(results, *rest)
        copies.append(sum(o is not r for o, r in zip(out, results)))
        return out
    monkeypatch.setattr(api, "fresh_results", counting)

    def assign(a, b):
        a[...] = b

    def swap_out(b, a):
        old = b.copy()
        b[...] = 0.0
        a[...] = old

    for fn, want_copies in ((assign, 0), (swap_out, 1)):
        cf = lowering.compile(fn)
        copies.clear()
        for k in range(3):
            a, b, _ = arrays(seed=k)
            mine, theirs = (a.copy(), b.copy()), (a.copy(), b.copy())
            cf(*mine)
            fn(*theirs)
            np.testing.assert_array_equal(mine[0], theirs[0])
            np.testing.assert_array_equal(mine[1], theirs[1])
        assert cf._fast is None
        assert len(copies) >= 2 and copies[-2:] == [want_copies] * 2, (fn.__name__, copies)


def test_a_dynamic_entry_that_writes_into_arguments_takes_the_fast_call():
    """An entry compiled for many sizes (a second size makes it dynamic)
    that writes into its arguments (`x += y`, `x[...] = 2 * y`, a shifted
    window) is a fast call: the program for the call's sizes runs and each
    written result is copied into its argument, as the general path does
    (which cost 25-40 us a call: 54 us against numpy's 3.9 for 20x500).
    The caller's arrays hold numpy's values after every call; arguments
    that overlap miss it and numpy's aliasing answers; a raised flag
    leaves the argument to numpy's re-run."""
    def iadd(x, y):
        x += y
        return x

    def assign(x, y):
        x[...] = 2.0 * y

    def shift(x, y):
        x[..., 1:] = y[..., :-1]
        return x

    for fn in (iadd, assign, shift):
        cf = lowering.compile(fn)
        general = []
        for k, shape in enumerate([(6, 5), (7, 9), (3, 11), (7, 9), (12, 4)]):
            if k == 3:  # (the sizes' fast call made on the third size's call)
                real = cf._try_entries
                cf._try_entries = lambda *x, real=real: (general.append(x), real(*x))[1]
            rng = np.random.default_rng(k)
            a, b = rng.standard_normal(shape), rng.standard_normal(shape)
            mine, theirs = a.copy(), a.copy()
            got, want = cf(mine, b), fn(theirs, b)
            np.testing.assert_array_equal(mine, theirs)
            assert (got is None) if want is None else (got is mine), fn.__name__
        assert general == [], fn.__name__
        for case in ("twice", "views"):
            ours, ref = np.arange(40.0).reshape(4, 10), np.arange(40.0).reshape(4, 10)
            for buf, run in ((ours, cf), (ref, fn)):
                run(*({"twice": (buf[:3], buf[:3]), "views": (buf[1:], buf[:3])}[case]))
            np.testing.assert_array_equal(ours, ref)
    cf = lowering.compile(iadd)
    for shape in ((3, 4), (5, 6), (5, 6)):
        x, y = np.full(shape, 1e308), np.full(shape, 1e308)
        with np.errstate(over="raise"):
            try:
                cf(x, y)
            except FloatingPointError:
                pass
            else:
                raise AssertionError("numpy raises FloatingPointError")
        np.testing.assert_array_equal(x, np.inf)  # (numpy's ufunc wrote x, then raised)


def test_a_dynamic_entry_runs_each_sizes_program_natively(monkeypatch):
    """An entry of many sizes puts the native builtin of the sizes called
    last in front (made on a size's NATIVE_AFTER_CALLS-th call; its guards:
    those sizes; its fallback: the sizes' dispatch): calls of one size run
    natively, a call of other sizes misses it into the dispatch, which
    answers and puts their builtin in front. Alternating sizes, a third
    size, arguments that break a relation of sizes or a guard, all answer
    as numpy."""
    from lowering import fastpath

    monkeypatch.setattr(fastpath, "NATIVE_AFTER_CALLS", 1)

    def f(a, b):
        return a * 2.0 + b, a.sum(axis=1)

    cf = lowering.compile(f)
    rng = np.random.default_rng(0)
    shapes = [(4, 6), (5, 7), (5, 7), (4, 6), (9, 3), (4, 6), (5, 7), (5, 7)]
    for k, shape in enumerate(shapes):
        a, b = rng.standard_normal(shape), rng.standard_normal(shape)
        assert_same_value(cf(a, b), f(a, b))
        if k >= 2:
            assert type(cf._fast).__name__ == "builtin_function_or_method", k
    a = rng.standard_normal((5, 7))
    for other in (rng.standard_normal((5, 8)),  # (a relation of sizes broken: numpy's error)
                  rng.standard_normal((5, 7)).astype(np.float32),
                  np.asfortranarray(rng.standard_normal((5, 7)))):
        try:
            want = f(a, other)
        except ValueError as e:
            want = type(e)
        try:
            got = cf(a, other)
        except ValueError as e:
            got = type(e)
        if isinstance(want, type):
            assert got is want
        else:
            assert_same_value(got, want)


def test_a_size_called_often_gets_its_builtin_and_a_new_size_does_not():
    """After a second size makes the entry dynamic, a size called
    NATIVE_AFTER_CALLS times runs a native builtin (before: the dynamic
    entry's Python call, 4 us for an 8x8 `a + b` against numpy's 0.5);
    sizes called fewer times make none (its ~15 ms would cost more than
    the calls save: 0.4 ms a new size)."""
    from lowering import fastpath

    def add(a, b):
        return a + b

    cf = lowering.compile(add)
    a, b = np.ones((9, 9)), np.ones((9, 9))
    cf(a, b), cf(np.ones((3, 3)), np.ones((3, 3)))
    for n in range(4, 8):
        x = np.ones((n, n))
        np.testing.assert_array_equal(cf(x, x), x + x)
    dispatch = cf._fast
    assert dispatch.natives == {}
    for k in range(fastpath.NATIVE_AFTER_CALLS + 1):
        np.testing.assert_array_equal(cf(a, b), a + b)
        if k < fastpath.NATIVE_AFTER_CALLS - 2:
            assert cf._fast is dispatch
    assert type(cf._fast).__name__ == "builtin_function_or_method"
    assert list(dispatch.natives) == [(9, 9, 9, 9)]
    x = np.ones((5, 5))
    np.testing.assert_array_equal(cf(x, x), x + x)  # (another size: the dispatch answers)


def test_writes_into_strided_arguments_take_the_native_entry():
    """A window written into strided arguments (every other element): the
    native entry's overlap check compares the arrays' bounds from their
    data pointers, as numpy's `may_share_memory` does (before: no native
    form, 4.4 us against numpy's 1.0 for 1000 elements). Interleaved or
    overlapping views of one buffer miss it, and numpy's aliasing answers;
    views of a reversed buffer (a negative stride) keep the Python call."""
    def shift(x, y):
        x[1:] = y[:-1]
        return x

    cf = lowering.compile(shift)
    rng = np.random.default_rng(0)
    big, other = rng.standard_normal(64), rng.standard_normal(64)
    for _ in range(3):
        mine, theirs = big.copy(), big.copy()
        got = cf(mine[::2], other[::2])
        want = shift(theirs[::2], other[::2])
        np.testing.assert_array_equal(mine, theirs)
        np.testing.assert_array_equal(got, want)
    assert type(cf._fast).__name__ == "builtin_function_or_method"
    for case in ("interleaved", "overlapping", "apart", "reversed"):
        ours, ref = np.arange(80.0), np.arange(80.0)
        for buf, run in ((ours, cf), (ref, shift)):
            x, y = {"interleaved": (buf[0:64:2], buf[1:65:2]),
                    "overlapping": (buf[0:64:2], buf[4:68:2]),
                    "apart": (buf[0:32:2], buf[40:72:2]),
                    "reversed": (buf[62::-2], buf[0:64:2])}[case]
            run(x, y)
        np.testing.assert_array_equal(ours, ref)


def test_a_sort_runs_from_the_native_entry_without_the_flags_collector(monkeypatch):
    """numpy consults no errstate in a sort (`routines.QUIET`): the native
    entry calls it back with no collector around it; NaNs, infinities and
    signed zeros sort as numpy's, under errstate raise too."""
    from lowering import fastpath

    made = []
    real = fastpath._flagged
    monkeypatch.setattr(fastpath, "_flagged", lambda *a: (made.append(a), real(*a))[1])

    def f(a):
        return np.sort(a)

    cf = lowering.compile(f)
    x = np.array([3.0, np.nan, -0.0, 0.0, -np.inf, 1.0, np.inf, -2.0])
    with np.errstate(all="raise"):
        for _ in range(3):
            got = cf(x)
            np.testing.assert_array_equal(got, f(x))
            assert [np.signbit(v) for v in got] == [np.signbit(v) for v in f(x)]
    assert type(cf._fast).__name__ == "builtin_function_or_method" and made == []


def test_the_entry_called_last_goes_in_front():
    """Calls of one layout after another's: the entry a call hit among the
    later ones becomes the first tried (the one before goes where it was),
    so a run of calls of one layout skips the other's miss; alternating
    layouts, sizes and keyword spellings all answer as numpy."""
    def iadd(a, b):
        a += b
        return a

    cf = lowering.compile(iadd, dynamic=False)
    rng = np.random.default_rng(0)
    c = [rng.standard_normal((8, 8)) for _ in range(2)]
    f = [np.asfortranarray(x) for x in c]
    small = [rng.standard_normal((3, 8)) for _ in range(2)]
    first = None
    for k, args in enumerate([c, f, f, f, c, small, f, c, c, small]):
        mine, theirs = [x.copy(order="K") for x in args], [x.copy(order="K") for x in args]
        got = cf(*mine) if k % 3 else cf(mine[0], b=mine[1])
        want = iadd(*theirs)
        np.testing.assert_array_equal(mine[0], want)
        assert got is mine[0]
        if k == 0:
            first = cf._fast
        if k == 3:  # (a run of F-ordered calls: their entry in front)
            assert cf._fast is not first and type(cf._fast).__name__ == "builtin_function_or_method"
