"""The one representation of a guard: each check kind rendered to Python and
evaluated agrees with its failure reason, the native entry's argument
checks are derived from the same checks, and access paths have one
renderer."""

import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.capture.sources import Path
from lowering.codegen.entry import ArgCheck, arg_checks
from runtime.guards import (
    ArrayCheck,
    GuardSet,
    IdentityCheck,
    LenCheck,
    SameAsCheck,
    TypeCheck,
    ValueCheck,
    layout_of,
    path_source,
    render_checks,
)


def holds(check, leaves, globals_=()) -> bool:
    """The check's rendered Python condition, evaluated as the guard does."""
    ns: dict = {}
    (cond,) = render_checks([check], ns)
    return bool(eval(cond, ns, {"L": list(leaves), "G": list(globals_)}))


def array_check(x, name="x", where="L", index=0):
    return ArrayCheck(where, index, name, x.dtype, x.shape, layout_of(x), x.flags.writeable)


F32 = np.ones((3, 4), np.float32)
READ_ONLY = np.ones((3, 4), np.float32)
READ_ONLY.flags.writeable = False
SENTINEL = object()


class Sub(np.ndarray):
    pass


# (check, values it admits, (value, the reason it fails))
CASES = [
    (array_check(F32), [np.zeros((3, 4), np.float32)], [
        ([1.0], "'x' type mismatch: expected ndarray, got list"),
        (np.zeros((3, 4), np.float32).view(Sub), "'x' type mismatch: expected ndarray, got Sub"),
        (F32.astype(np.float64), "'x' dtype mismatch: expected float32, got float64"),
        (np.ones(12, np.float32), "'x' rank mismatch: expected 2, got 1"),
        (np.ones((3, 5), np.float32), "'x' size mismatch at index 1: expected 4, got 5"),
        (np.ones((4, 3), np.float32).T, "'x' layout mismatch: expected C-contiguous, "
                                        "got F-contiguous"),
        (READ_ONLY, "'x' is read-only now"),
    ]),
    (array_check(np.ones((4, 3), np.float32).T), [np.zeros((4, 3), np.float32).T], [
        (F32, "'x' layout mismatch: expected F-contiguous, got C-contiguous"),
    ]),
    (array_check(np.ones((3, 8))[:, ::2]), [np.zeros((3, 8))[:, ::2]], [
        (np.ones((3, 4)), "'x' layout mismatch: expected strides (64, 16), got C-contiguous"),
        (np.ones((3, 12))[:, ::3], "'x' layout mismatch: expected strides (64, 16), "
                                   "got strides (96, 24)"),
    ]),
    (array_check(READ_ONLY), [F32, READ_ONLY], []),
    (TypeCheck("L", 0, "s", float, "float"), [2.0, -0.0], [
        (2, "'s' type mismatch: expected float, got int"),
        (np.float64(2.0), "'s' type mismatch: expected float, got float64"),
    ]),
    (TypeCheck("L", 0, "z", np.float32, "scalar"), [np.float32(1)], [
        (np.float64(1), "'z' type mismatch: expected float32, got float64"),
    ]),
    (ValueCheck("L", 0, "n", 1), [1], [
        (0, "'n' value mismatch: expected 1, got 0"),
        (True, "'n' value mismatch: expected 1, got True"),
        (1.0, "'n' value mismatch: expected 1, got 1.0"),
    ]),
    (ValueCheck("L", 0, "flag", None), [None], [(0, "'flag' value mismatch: expected None, got 0")]),
    (IdentityCheck("L", 0, "fn", SENTINEL), [SENTINEL], [
        (object(), "'fn' is a different object than when compiled"),
    ]),
    (LenCheck("L", 0, "items", 2), [[1, 2], (3, 4)], [
        ([1], "'items' length mismatch: expected 2, got 1"),
    ]),
]


@pytest.mark.parametrize("check, admitted, refused", CASES,
                         ids=[f"{type(c).__name__}-{i}" for i, (c, _, _) in enumerate(CASES)])
def test_each_check_kind_rendered_agrees_with_its_failure_reason(check, admitted, refused):
    for x in admitted:
        assert holds(check, [x]) and check.failure([x], []) is None
    for x, reason in refused:
        assert not holds(check, [x])
        assert check.failure([x], []) == reason


def test_same_as_relates_two_values_in_both_renderings():
    a, b = np.zeros(3), np.zeros(3)
    alias = SameAsCheck("L", 1, "y", "L", 0)
    assert holds(alias, [a, a]) and alias.failure([a, a], []) is None
    assert not holds(alias, [a, b])
    assert alias.failure([a, b], []) == "'y' no longer is the same object as argument 0"
    leaf = SameAsCheck("G", 0, "G['W']", "L", 0)
    assert holds(leaf, [a], [a]) and leaf.failure([a], [a]) is None
    assert not holds(leaf, [a], [b])
    assert leaf.failure([a], [b]) == "\"G['W']\" no longer is the same array as argument 0"
    state = SameAsCheck("G", 1, "G['V']", "G", 0)
    assert holds(state, [], [a, a]) and not holds(state, [], [a, b])
    assert state.failure([], [a, b]) == "\"G['V']\" no longer is the same object as argument 0"


_dtypes = st.sampled_from([np.float32, np.float64, np.int32])
_shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)
_views = st.sampled_from(["C", "F", "strided", "read-only"])


def _make(dtype, shape, view):
    x = np.zeros(shape, dtype)
    if view == "F":
        x = np.asfortranarray(x)
    elif view == "strided" and shape:
        x = np.zeros(shape[:-1] + (2 * shape[-1],), dtype)[..., ::2]
    elif view == "read-only":
        x.flags.writeable = False
    return x


@settings(max_examples=60, deadline=None)
@given(_dtypes, _shapes, _views, _dtypes, _shapes, _views)
def test_array_guard_and_reason_agree_on_any_pair(dt0, shape0, view0, dt1, shape1, view1):
    traced, called = _make(dt0, shape0, view0), _make(dt1, shape1, view1)
    check = array_check(traced)
    assert holds(check, [called]) == (check.failure([called], []) is None)
    assert holds(check, [traced])


def test_guard_set_function_and_why_come_from_the_same_checks():
    x, s = np.ones((2, 2)), 2.0
    checks = [array_check(x), TypeCheck("L", 1, "s", float, "float")]
    treedef = object()
    g = GuardSet(treedef, 2, checks)
    ns: dict = {}
    for cond in render_checks(checks, ns):
        assert cond in g.source
    assert g(treedef, [x, s], []) and g.why(treedef, [x, s], []) == "no guard failed"
    assert not g(treedef, [x, 2], [])
    assert g.why(treedef, [x, 2], []) == "'s' type mismatch: expected float, got int"


def test_native_arg_checks_are_derived_from_the_array_checks():
    def axpb(x, y):
        return x * 2 + y

    x, y = np.ones((6, 8), np.float32).T, np.ones((8, 6), np.float32)[:, ::1]
    f = lowering.compile(axpb, backend="cpu")
    f(x, y)
    assert type(f._fast) is types.BuiltinFunctionType
    guards = f.entries[0].guards
    derived, descrs = arg_checks(guards.checks)
    assert f._fast.__self__.spec.checks == derived
    for c, a, d in zip(guards.checks, derived, descrs):
        assert a == ArgCheck.of(c, d) and a.arg == c.index and a.shape == c.shape
        assert a.layout == c.layout and a.writeable == c.writeable and d == c.dtype


def test_checks_without_a_native_form_give_no_arg_checks():
    x = np.ones(3, np.float32)
    assert arg_checks([array_check(x), TypeCheck("L", 1, "s", np.float32, "scalar")]) is None
    assert arg_checks([array_check(x), ValueCheck("L", 1, "s", 2**70)]) is None  # (past int64)
    assert arg_checks([array_check(x), ValueCheck("L", 1, "s", "a str")]) is None
    assert arg_checks([array_check(x, where="G")]) is None
    # a Python float (a 0-d input) and a specialized int have native forms
    (_, f, v), _ = arg_checks([array_check(x), TypeCheck("L", 1, "s", float, "float"),
                               ValueCheck("L", 2, "n", 3)])
    assert (type(f).__name__, f.arg, type(v).__name__, v.value) == ("FloatArg", 1, "ValueArg", 3)
    swapped = x.astype(np.dtype(np.float32).newbyteorder())
    assert arg_checks([array_check(swapped)]) is None
    (strided,), _ = arg_checks([array_check(np.ones((3, 8))[:, ::2])])
    assert strided.layout == (64, 16)


class _Holder:
    scale = 3.0

    def __init__(self):
        self.items = {"w": [np.arange(3.0)], (1, 2): "tuple key"}


def test_one_renderer_of_paths_for_state_and_checks():
    ns: dict = {}
    assert path_source("L", (("i", 0),)) == "L[0]"
    assert path_source("L", (("i", 0), ("a", "items"), ("i", "w"), ("i", 0)), ns) == \
        "L[0].__dict__['items']['w'][0]"
    assert path_source("R", (("c", "scale"),), ns) == "getattr(type(R), 'scale')"
    key = path_source("x", (("i", (1, 2)),), ns)
    assert eval(key, ns, {"x": {(1, 2): "found"}}) == "found"  # a non-literal key, bound in ns
    assert ArrayCheck("G", 3, "w", F32.dtype, (3, 4), "C", True).source() == "G[3]"
    h = _Holder()
    for p in [Path("L", 0, (("a", "items"), ("i", "w"), ("i", 0))),
              Path("L", 0, (("c", "scale"),)), Path("L", 0, (("a", "items"), ("i", (1, 2)))),
              Path("O", h, (("a", "items"),)), Path("G", {"h": h}, (("i", "h"),))]:
        ns = {}
        got = eval(p.expr(ns), ns, {"L": [h], "R": None})
        want = p.get([h], None)
        assert got is want
