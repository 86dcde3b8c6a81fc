"""Guards, caching and recompiles: what decides whether a call reuses a graph."""

import logging
import warnings

import numpy as np
import pytest

import lowering
from lowering.config import patch
from lowering.testing import assert_same_value


def _f(x, y):
    return x * y + 1


def test_same_shapes_and_dtypes_hit_the_cache():
    f = lowering.compile(_f)
    x, y = np.ones((3, 4), np.float32), np.full((3, 4), 2, np.float32)
    for _ in range(5):
        assert_same_value(f(x, y), _f(x, y))
    assert f.stats["compiles"] == 1
    assert f.stats["cache_hits"] == 4
    assert f.stats["recompiles"] == 0


def test_new_values_same_shape_do_not_recompile_and_are_read_at_call_time():
    f = lowering.compile(_f)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, y = rng.normal(size=(5,)), rng.normal(size=(5,))
        assert_same_value(f(x, y), _f(x, y))
    assert f.stats["compiles"] == 1


@pytest.mark.parametrize(
    "second, message",
    [
        ((np.ones((4, 4), np.float32), np.ones((4, 4), np.float32)), "'x' size mismatch at index 0: expected 3, got 4"),
        ((np.ones((3, 4), np.float64), np.ones((3, 4), np.float32)), "'x' dtype mismatch: expected float32, got float64"),
        ((np.ones((3, 4), np.float32), np.ones((4,), np.float32)), "'y' rank mismatch: expected 2, got 1"),
        ((np.ones((4, 3), np.float32).T, np.ones((3, 4), np.float32)), "'x' layout mismatch"),
    ],
)
def test_guard_failure_recompiles_and_logs_the_failing_guard(caplog, second, message):
    f = lowering.compile(_f)
    first = (np.ones((3, 4), np.float32), np.ones((3, 4), np.float32))
    f(*first)
    with caplog.at_level(logging.INFO, logger="lowering.recompiles"):
        assert_same_value(f(*second), _f(*second))
    assert f.stats["compiles"] == 2 and f.stats["recompiles"] == 1
    assert any(message in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    # both entries stay valid
    f(*first)
    f(*second)
    assert f.stats["compiles"] == 2 and f.stats["cache_hits"] == 2


def test_specialized_int_is_guarded_by_value():
    f = lowering.compile(lambda x, n: x.sum(axis=n))
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(f(x, 0), x.sum(0))
    np.testing.assert_array_equal(f(x, 1), x.sum(1))
    np.testing.assert_array_equal(f(x, 0), x.sum(0))
    assert f.stats["compiles"] == 2 and f.stats["cache_hits"] == 1


def test_python_float_is_a_graph_input_not_a_constant():
    f = lowering.compile(lambda x, s: x * s)
    x = np.ones(3, np.float32)
    for s in (2.0, 3.5, -1.0):
        r = f(x, s)
        assert r.dtype == np.float32
        np.testing.assert_array_equal(r, x * s)
    assert f.stats["compiles"] == 1


def test_recompile_limit_runs_eagerly_and_warns_once():
    f = lowering.compile(lambda x: x + 1, dynamic=False)  # (every size a compile of its own)
    with patch(recompile_limit=2):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for n in range(1, 7):
                np.testing.assert_array_equal(f(np.zeros(n)), np.ones(n))
    assert f.stats["compiles"] == 3  # the first compile + 2 recompiles
    assert f.stats["recompiles"] == 2
    assert f.stats["eager_fallbacks"] == 3
    limit_warnings = [x for x in w if "recompile limit" in str(x.message)]
    assert len(limit_warnings) == 1


def test_stats_keys():
    f = lowering.compile(_f)
    assert set(f.stats) == {"compiles", "cache_hits", "recompiles", "graph_breaks", "eager_fallbacks",
                            "kernel_bodies"}


def test_global_array_is_read_at_call_time_and_guarded():
    g = {"W": np.ones((2, 2))}
    exec("def use_global(x):\n    return x @ W\n", g)
    f = lowering.compile(g["use_global"])
    x = np.eye(2)
    np.testing.assert_array_equal(f(x), np.ones((2, 2)))
    g["W"] = np.full((2, 2), 3.0)  # rebinding the global is seen
    np.testing.assert_array_equal(f(x), np.full((2, 2), 3.0))
    g["W"][0, 0] = 5.0  # and so is mutating it in place
    np.testing.assert_array_equal(f(x), g["W"])
    assert f.stats["compiles"] == 1
    g["W"] = np.ones((2, 3))  # a new shape is a guard failure
    np.testing.assert_array_equal(f(x), np.ones((2, 3)))
    assert f.stats["recompiles"] == 1


def test_closure_array_and_scalar_are_guarded():
    scale = 2.0
    table = np.arange(3.0)

    def fn(x):
        return x * scale + table

    f = lowering.compile(fn)
    x = np.ones(3)
    np.testing.assert_array_equal(f(x), fn(x))
    scale = 5.0  # noqa: F841  (the closure cell changes)
    np.testing.assert_array_equal(f(x), fn(x))
    table = np.zeros(3)  # noqa: F841
    np.testing.assert_array_equal(f(x), fn(x))


def test_aliased_arguments_share_storage():
    def fn(a, b):
        a += 1
        return b * 2

    f = lowering.compile(fn)
    x, x_ref = np.zeros(3), np.zeros(3)
    got, want = f(x, x), fn(x_ref, x_ref)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(x, x_ref)
    # distinct arrays do not satisfy the alias guard: a new entry
    y, z = np.zeros(3), np.zeros(3)
    np.testing.assert_array_equal(f(y, z), np.zeros(3))
    np.testing.assert_array_equal(y, np.ones(3))
    assert f.stats["compiles"] == 2


def test_overlapping_inputs_written_through_run_like_numpy():
    def fn(a, b):
        a[:] = b + 1
        return a

    f = lowering.compile(fn)
    base, base_ref = np.arange(6.0), np.arange(6.0)
    f(base[1:], base[:-1])
    fn(base_ref[1:], base_ref[:-1])
    np.testing.assert_array_equal(base, base_ref)


def test_pytree_arguments_and_results():
    def fn(params, x):
        return {"y": x @ params["w"] + params["b"], "n": [x.sum(), None]}

    f = lowering.compile(fn)
    params = {"w": np.ones((3, 2)), "b": np.zeros(2)}
    x = np.arange(6.0).reshape(2, 3)
    got, want = f(params, x), fn(params, x)
    assert set(got) == {"y", "n"} and got["n"][1] is None
    np.testing.assert_array_equal(got["y"], want["y"])
    assert type(got["n"][0]) is type(want["n"][0]) and got["n"][0] == want["n"][0]
    # a new key is a new structure
    params2 = dict(params, extra=np.ones(1))
    f(params2, x)
    assert f.stats["recompiles"] == 1


def test_decorator_forms():
    @lowering.compile
    def a(x):
        return x + 1

    @lowering.compile(fullgraph=True)
    def b(x):
        return x + 1

    np.testing.assert_array_equal(a(np.zeros(2)), b(np.zeros(2)))
    assert b.__name__ == "b"


def test_bad_options_are_clear_errors():
    with pytest.raises(ValueError, match="mode"):
        lowering.compile(lambda x: x, mode="fastest")
    with pytest.raises(ValueError, match="backend"):
        lowering.compile(lambda x: x, backend="tpu")


def test_strided_inputs_are_guarded_by_their_exact_strides():
    # whether reshape returns a view (and so whether the write below reaches
    # the caller's array) depends on the exact strides of a strided input
    def fn(x):
        r = x.reshape(-1)
        r[0] = 5
        return r

    f = lowering.compile(fn)
    a, a_ref = np.zeros((2, 3, 2))[:, :, 0], np.zeros((2, 3, 2))[:, :, 0]
    np.testing.assert_array_equal(f(a), fn(a_ref))
    base, base_ref = np.zeros((2, 4, 2)), np.zeros((2, 4, 2))
    b, b_ref = base[:, :3, 0], base_ref[:, :3, 0]
    np.testing.assert_array_equal(f(b), fn(b_ref))
    np.testing.assert_array_equal(base, base_ref)
    assert f.stats["compiles"] == 2


def test_weak_float_argument_promotes_like_a_python_float():
    def fn(x, s):
        return np.where(x > 0, x, s), np.stack([x, x * s])

    from lowering.testing import assert_matches_numpy

    assert_matches_numpy(fn, np.arange(-2, 2, dtype=np.float32), 0.5)


def test_ndarray_subclasses_run_eagerly_with_their_own_semantics():
    """np.matrix redefines `*` as a matrix product and masked arrays carry a
    mask: a compiled function hands them to numpy as they are."""
    f = lowering.compile(lambda a, b: a * b + 1)
    m = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    got = f(m, m)
    assert type(got) is np.matrix
    np.testing.assert_array_equal(got, m * m + 1)
    ma = np.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0])
    got = f(ma, ma)
    assert isinstance(got, np.ma.MaskedArray) and got.mask.tolist() == [False, True, False]
    assert f.stats["eager_fallbacks"] == 2 and f.stats["compiles"] == 0
    x = np.arange(3.0)
    np.testing.assert_array_equal(f(x, x), x * x + 1)  # plain arrays still compile
    assert f.stats["compiles"] == 1
