"""Python state around the arrays: reads through attributes, items and
globals are inputs read on every call (never constants baked in), writes to
Python state are replayed on every call with the compiled results, and no
traced value is ever left in the user's objects."""

from __future__ import annotations

import functools
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.capture.traced import TracedArray


def _no_tracers(obj, depth=0):
    if isinstance(obj, TracedArray):
        raise AssertionError("a traced value was left in user state")
    if depth > 6:
        return
    if isinstance(obj, dict):
        for v in obj.values():
            _no_tracers(v, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _no_tracers(v, depth + 1)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        for v in vars(obj).values():
            _no_tracers(v, depth + 1)


class Layer:
    def __init__(self, n):
        self.W = np.eye(n)
        self.scale = 2.0
        self.running_mean = np.zeros(n)

    def forward(self, x):
        m = x.mean(axis=0)
        self.running_mean = 0.9 * self.running_mean + 0.1 * m
        return x @ self.W * self.scale


def _eager_twin(layer):
    twin = Layer(layer.W.shape[0])
    twin.W, twin.scale, twin.running_mean = layer.W.copy(), layer.scale, layer.running_mean.copy()
    return twin


def test_attributes_are_read_on_every_call_and_writes_replayed():
    x = np.arange(6.0).reshape(2, 3)
    layer, ref = Layer(3), Layer(3)
    f = lowering.compile(layer.forward)
    for step in range(4):
        if step == 1:  # rebind
            layer.W = ref.W = np.full((3, 3), 0.5)
        if step == 2:  # mutate in place
            layer.W[0, 0] = ref.W[0, 0] = 7.0
        if step == 3:  # a scalar attribute
            layer.scale = ref.scale = 0.25
        np.testing.assert_array_equal(f(x), ref.forward(x))
        assert type(layer.running_mean) is np.ndarray
        np.testing.assert_array_equal(layer.running_mean, ref.running_mean)
        _no_tracers(layer)
    # the rebinding and the in-place write changed no guard: only the scalar did
    assert f.stats["compiles"] == 2 and f.stats["cache_hits"] == 2


def test_decorated_method_reads_self_attributes():
    class Model:
        def __init__(self):
            self.W = np.ones((2, 2))

        @lowering.compile
        def __call__(self, x):
            return x @ self.W

    m = Model()
    x = np.ones((1, 2))
    np.testing.assert_array_equal(m(x), [[2.0, 2.0]])
    m.W = np.eye(2) * 3
    np.testing.assert_array_equal(m(x), [[3.0, 3.0]])


P = {"W": np.ones(3), "b": np.zeros(3), "lr": 0.5}


def _sgd(g):
    P["b"] -= P["lr"] * g  # in place: the same array object stays in P
    P["W"] = P["W"] - P["lr"] * g  # rebinding: a new array in P
    return P["W"].sum()


def test_global_dict_items_read_and_written():
    b_before = P["b"]
    f = lowering.compile(_sgd)
    g = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(f(g), 3 - 0.5 * 6)
    np.testing.assert_array_equal(P["W"], [0.5, 0.0, -0.5])
    np.testing.assert_array_equal(P["b"], [-0.5, -1.0, -1.5])
    assert P["b"] is b_before  # -= kept the object, as numpy does
    np.testing.assert_allclose(f(g), 0 - 3)
    np.testing.assert_array_equal(P["W"], [0.0, -1.0, -2.0])
    P["W"] = np.zeros(3)  # rebound from outside: read again
    np.testing.assert_allclose(f(g), -3)
    P["lr"] = 1.0  # a scalar item: guarded, recompiles
    np.testing.assert_allclose(f(g), -3 - 6)
    assert f.stats["compiles"] == 2
    _no_tracers(P)


G_OUT = None


def _writes_global(x):
    global G_OUT
    G_OUT = x * 2
    return x + 1


def test_global_rebinding_is_replayed():
    f = lowering.compile(_writes_global)
    for v in (1.0, 3.0):
        np.testing.assert_array_equal(f(np.full(2, v)), [v + 1] * 2)
        assert type(G_OUT) is np.ndarray
        np.testing.assert_array_equal(G_OUT, [2 * v] * 2)


def test_global_bound_after_compile_is_read_at_call_time():
    ns: dict = {}
    exec("def f(x):\n    return x + LATE\n", ns)
    f = lowering.compile(ns["f"])
    ns["LATE"] = np.ones(2)
    np.testing.assert_array_equal(f(np.zeros(2)), [1, 1])
    ns["LATE"] = np.full(2, 5.0)
    np.testing.assert_array_equal(f(np.zeros(2)), [5, 5])
    ns["LATE"] = 2.5  # now a scalar: another entry
    np.testing.assert_array_equal(f(np.zeros(2)), [2.5, 2.5])


GA = np.ones(3)


def _through_arg_and_global(x):
    x += 1
    return GA * 2


def test_global_passed_as_argument_and_mutated_through_it():
    global GA
    GA = np.ones(3)
    f = lowering.compile(_through_arg_and_global)
    np.testing.assert_array_equal(f(GA), [4, 4, 4])
    np.testing.assert_array_equal(GA, [2, 2, 2])
    np.testing.assert_array_equal(f(GA), [6, 6, 6])
    other = np.zeros(3)
    np.testing.assert_array_equal(f(other), [6, 6, 6])  # GA itself unchanged now
    np.testing.assert_array_equal(other, [1, 1, 1])


def test_list_append_and_dict_set_on_arguments_are_kept():
    def fn(x, log, d):
        log.append(x.sum())
        d["y"] = x * 3
        return x

    f = lowering.compile(fn)
    log, d = [], {}
    f(np.ones(2), log, d)
    f(np.ones(2), log, d)
    assert [float(v) for v in log] == [2.0, 2.0]
    assert all(type(v) is np.float64 for v in log)
    np.testing.assert_array_equal(d["y"], [3, 3])
    _no_tracers((log, d))


def test_closure_state_and_nested_objects():
    class Cfg:
        pass

    cfg = Cfg()
    cfg.layers = [{"W": np.eye(2)}, {"W": np.eye(2) * 2}]
    cfg.act = np.tanh

    def fn(x):
        for layer in cfg.layers:
            x = cfg.act(x @ layer["W"])
        return x

    f = lowering.compile(fn)
    x = np.array([[0.5, -0.25]])
    np.testing.assert_allclose(f(x), fn(x))
    cfg.layers[1]["W"] = np.eye(2) * -1
    np.testing.assert_allclose(f(x), fn(x))
    cfg.act = np.sin  # a function in state: identity-guarded
    np.testing.assert_allclose(f(x), fn(x))
    cfg.layers.append({"W": np.eye(2)})  # the loop is longer now
    np.testing.assert_allclose(f(x), fn(x))
    assert f.stats["compiles"] == 3


def test_any_callable_compiles():
    W = np.eye(2) * 3

    def g(W, x):
        return x @ W

    class Call:
        def __init__(self):
            self.b = np.ones(2)

        def __call__(self, x):
            return x + self.b

    x = np.ones((1, 2))
    f = lowering.compile(functools.partial(g, W))
    np.testing.assert_array_equal(f(x), [[3, 3]])
    W[0, 0] = 5.0  # the partial's argument, changed in place
    np.testing.assert_array_equal(f(x), [[5, 3]])
    c = Call()
    fc = lowering.compile(c)
    np.testing.assert_array_equal(fc(x), [[2, 2]])
    c.b = np.zeros(2)
    np.testing.assert_array_equal(fc(x), [[1, 1]])


def test_error_in_the_function_leaves_numpys_partial_effects():
    def fn(x, i):
        x += 1
        return x[i]

    f = lowering.compile(fn)
    x = np.zeros(3)
    with pytest.raises(IndexError):
        f(x, 5)
    np.testing.assert_array_equal(x, [1, 1, 1])  # numpy had already added 1


def test_runtime_index_error_reaches_the_users_try_except():
    def fn(x, idx):
        x += 1
        try:
            return x[idx]
        except IndexError:
            return x[:1] * 0 - 1

    f = lowering.compile(fn)
    x = np.zeros(3)
    np.testing.assert_array_equal(f(x, np.array([0, 2])), [1, 1])
    np.testing.assert_array_equal(x, [1, 1, 1])
    np.testing.assert_array_equal(f(x, np.array([7, 0])), [-1])  # the kernel's index check
    np.testing.assert_array_equal(x, [2, 2, 2])


def test_traced_value_stored_in_an_object_never_escapes():
    class Box:
        pass

    box = Box()

    def fn(x):
        box.inner = Box()
        box.inner.v = x * 2
        return x

    f = lowering.compile(fn)
    for v in (1.0, 2.0):
        f(np.full(2, v))
        assert type(box.inner.v) is np.ndarray
        np.testing.assert_array_equal(box.inner.v, [2 * v] * 2)
    _no_tracers(box)


# ---- random Python-state programs, replayed and compared with eager ----

_OPS = ["set_attr", "set_item", "append", "inplace", "rebind_global", "read_scalar"]


class _Obj:
    pass


def _make_state(seed):
    r = np.random.default_rng(seed)
    o = _Obj()
    o.a = r.standard_normal(3)
    o.items = {"k0": r.standard_normal(3), "k1": r.standard_normal(3)}
    o.log = []
    o.c = float(r.integers(1, 4))
    return o


@settings(deadline=None, max_examples=25)
@given(ops=st.lists(st.sampled_from(_OPS), min_size=1, max_size=6),
       seed=st.integers(0, 2**16), calls=st.integers(1, 3))
def test_random_state_programs_match_eager(ops, seed, calls):
    def make_fn(o):
        def fn(x):
            y = x
            for op in ops:
                if op == "set_attr":
                    o.a = o.a * 0.5 + y
                elif op == "set_item":
                    o.items["k1"] = o.items["k0"] - y
                elif op == "append":
                    o.log.append(y.sum())
                elif op == "inplace":
                    o.items["k0"] += y
                elif op == "rebind_global":
                    o.items = dict(o.items, k2=y * o.c)
                else:
                    y = y * o.c
            return y

        return fn

    eager_o, comp_o = _make_state(seed), _make_state(seed)
    eager, comp = make_fn(eager_o), lowering.compile(make_fn(comp_o))
    x = np.linspace(-1.0, 1.0, 3)
    for _ in range(calls):
        np.testing.assert_array_equal(comp(x), eager(x))
        np.testing.assert_array_equal(comp_o.a, eager_o.a)
        assert comp_o.items.keys() == eager_o.items.keys()
        for k in eager_o.items:
            np.testing.assert_array_equal(comp_o.items[k], eager_o.items[k])
        assert len(comp_o.log) == len(eager_o.log)
        for a, b in zip(comp_o.log, eager_o.log):
            assert a == b and type(a) is type(b)
        _no_tracers(comp_o)


def test_concurrent_first_calls_make_one_entry():
    def fn(x):
        return x * 2 + 1

    f = lowering.compile(fn)
    x = np.linspace(-1, 1, 64)
    barrier = threading.Barrier(8)
    errors: list = []

    def worker():
        try:
            barrier.wait()
            for _ in range(200):
                np.testing.assert_array_equal(f(x), fn(x))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert f.stats["compiles"] == 1 and len(f.entries) == 1
    assert f.stats["graph_breaks"] == 0 and f.stats["eager_fallbacks"] == 0
    assert f.stats["cache_hits"] == 8 * 200 - 1


def _branch_on_type(x):
    if type(x) is np.ndarray and isinstance(x, np.ndarray):
        return x * 2
    return x * -1


def test_type_of_a_traced_array_is_ndarray():
    f = lowering.compile(_branch_on_type)
    np.testing.assert_array_equal(f(np.ones(3)), [2, 2, 2])
    assert "type" not in globals()  # the module's namespace is as it was
    assert type(3) is int and isinstance(int, type)


def test_state_read_by_a_function_with_a_graph_break():
    class M:
        pass

    m = M()
    m.W, m.scale, m.hist = np.eye(2), np.full(2, 3.0), []

    def fn(x):
        y = x @ m.W
        if y.sum() > 0:  # a graph break: later calls replay the graphs
            out = y * m.scale
        else:
            out = -y
        m.hist.append(out.sum())
        return out

    f = lowering.compile(fn)
    ref = M()
    ref.W, ref.scale, ref.hist = m.W.copy(), m.scale.copy(), []

    def eager(x):
        y = x @ ref.W
        out = y * ref.scale if y.sum() > 0 else -y
        ref.hist.append(out.sum())
        return out

    for step, v in enumerate([1.0, -1.0, 2.0, 1.0, -2.0]):
        if step == 2:
            m.W = ref.W = np.eye(2) * 5
        if step == 3:
            m.scale[1] = ref.scale[1] = -1.0
        x = np.full((1, 2), v)
        np.testing.assert_array_equal(f(x), eager(x))
        assert [float(h) for h in m.hist] == [float(h) for h in ref.hist]
    assert f.stats["compiles"] == 2


def test_returned_objects_hold_ndarrays():
    import dataclasses

    @dataclasses.dataclass
    class Out:
        y: object
        stats: dict

    class Plain:
        pass

    def fn(x):
        p = Plain()
        p.z = x + 1
        return Out(x * 2, {"mean": x.mean()}), p

    f = lowering.compile(fn)
    for v in (1.0, 3.0):
        out, p = f(np.full(3, v))
        assert type(out) is Out and type(out.y) is np.ndarray
        np.testing.assert_array_equal(out.y, [2 * v] * 3)
        assert out.stats["mean"] == v and type(out.stats["mean"]) is np.float64
        np.testing.assert_array_equal(p.z, [v + 1] * 3)
        _no_tracers((out, p))
    assert f.stats["compiles"] == 1


def test_one_array_under_two_keys_of_a_global_dict():
    A = np.zeros(3)
    P = {"a": A, "b": A}

    def f(x):
        P["a"] += x
        return P["b"] * 1

    cf = lowering.compile(f)
    for _ in range(3):
        A[:] = 0
        want = f(np.ones(3)).copy()
        A[:] = 0
        np.testing.assert_array_equal(cf(np.ones(3)), want)
        assert P["a"] is P["b"] is A


def test_state_array_that_becomes_the_argument_it_was_not():
    class M:
        pass

    def f(x, m):
        x += 1
        return m.W * 2

    cf = lowering.compile(f)
    for alias in [False, True, True, False]:
        xe, xc = np.zeros(3), np.zeros(3)
        me, mc = M(), M()
        me.W = xe if alias else np.zeros(3)
        mc.W = xc if alias else np.zeros(3)
        np.testing.assert_array_equal(cf(xc, mc), f(xe, me))
        np.testing.assert_array_equal(xc, xe)


def test_scalar_read_by_getattr_with_a_string_is_guarded():
    class M:
        pass

    m = M()

    def f(x, m):
        return x * getattr(m, "alpha") + getattr(m, "k")

    cf = lowering.compile(f)
    for a, k in [(2.0, 1), (3.0, 1), (3.0, 5)]:
        m.alpha, m.k = a, k
        np.testing.assert_array_equal(cf(np.ones(3), m), f(np.ones(3), m))


# ---- the fast call reads Python state as the entry does ----------------------

GLOBAL_W = np.arange(4.0)


def _helper(x):
    return x * 3


class _Scaled:
    def __init__(self):
        self.scale, self.b = 2.0, np.ones(4)


_SCALED = _Scaled()


def _reads_state(x):
    return _helper(x) * GLOBAL_W + _SCALED.b * _SCALED.scale


def test_the_fast_call_reads_state_by_its_paths():
    """A function calling a module's helper and reading a global array and
    attributes gets a fast call (no generic entry per call) that reads each
    of them by its path on every call, as the entry's guards do: a rebound
    global, a new attribute value, a redefined helper, a deleted attribute
    are seen, never a stale value."""
    global GLOBAL_W, _helper
    f = lowering.compile(_reads_state, backend="cpu")
    x = np.arange(4.0)
    saved = GLOBAL_W, _helper, _SCALED.b, _SCALED.scale
    try:
        assert np.array_equal(f(x), _reads_state(x))
        assert f._fast is not None
        GLOBAL_W = np.arange(4.0) * 10
        assert np.array_equal(f(x), _reads_state(x))
        _SCALED.b = np.zeros(4)
        assert np.array_equal(f(x), _reads_state(x))
        assert f.stats["compiles"] == 1
        _SCALED.scale = 3.0
        assert np.array_equal(f(x), _reads_state(x))
        del _SCALED.b
        with pytest.raises(AttributeError):
            f(x)
        _SCALED.b = np.ones(4)

        def _helper(x):  # noqa: F811  (redefined: the identity guard fails)
            return x - 1

        assert np.array_equal(f(x), _reads_state(x))
    finally:
        GLOBAL_W, _helper, _SCALED.b, _SCALED.scale = saved


# ---- names given as strings ------------------------------------------------

ITEM_KEY_NAME = (np.full(3, 7.0),)  # a global named like a dict key the function reads


def _reads_item(d):
    return d["ITEM_KEY_NAME"] * 2.0


def test_a_string_key_reads_no_global_of_that_name():
    """`d["ITEM_KEY_NAME"]` reads an item, not the global of that name: the
    entry neither reads nor guards that global (rebinding it costs no
    recompile) and its call is the native one of the argument's leaves."""
    global ITEM_KEY_NAME
    f = lowering.compile(_reads_item, backend="cpu")
    saved = ITEM_KEY_NAME
    try:
        d = {"ITEM_KEY_NAME": np.arange(3.0)}
        ITEM_KEY_NAME = (d,)  # the argument itself reachable from the global
        np.testing.assert_array_equal(f(d), [0.0, 2.0, 4.0])
        assert hasattr(f._fast, "native")  # no Python state read: the native call
        ITEM_KEY_NAME = None
        np.testing.assert_array_equal(f({"ITEM_KEY_NAME": np.ones(3)}), [2.0, 2.0, 2.0])
        assert f.stats["compiles"] == 1
    finally:
        ITEM_KEY_NAME = saved


BY_NAME = np.ones(3)


def _reads_global_by_string(x):
    return x + globals()["BY_NAME"]


def test_a_global_read_through_globals_by_string_is_read_on_every_call():
    """`globals()["BY_NAME"]`: the global is an input read on every call,
    never a constant of the trace."""
    global BY_NAME
    f = lowering.compile(_reads_global_by_string, backend="cpu")
    saved = BY_NAME
    try:
        for v in (1.0, 4.0, -2.5):
            BY_NAME = np.full(3, v)
            np.testing.assert_array_equal(f(np.zeros(3)), [v] * 3)
    finally:
        BY_NAME = saved
