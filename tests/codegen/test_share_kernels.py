"""Kernels reused by structure (passes/share_kernels.py and the CPU
backend's one function per distinct body): an unrolled loop compiles one
kernel body per distinct iteration body, launched per iteration with its
own parameters; bodies are shared across functions of the process; every
parameter kind (row offsets, float and integer constants, values such as
NaN, -0.0 and ±Inf, the extents of maps and reductions) gives numpy's
answer, and the index checks' status words and the parameters share the
launch's scalars."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from dialects import kernel as K
from lowering.testing import TOLERANCES, assert_same_value
from runtime import cpu


def rows(n):
    def fill(x, w):
        out = np.zeros((n, x.shape[1]), dtype=x.dtype)
        for i in range(n):
            out[i] = np.tanh(x[i] * w) + i
        return out
    return fill


def test_a_row_loop_compiles_one_kernel_body():
    x, w = np.random.default_rng(0).random((40, 24)), np.random.default_rng(1).random(24)
    f = lowering.compile(rows(40))
    assert_same_value(f(x, w), rows(40)(x, w))
    assert f.stats["eager_fallbacks"] == 0
    assert f.stats["kernel_bodies"] == 1
    out = lowering.explain(rows(40))(x, w)
    assert out.kernel_count == 40 and out.kernel_bodies == 1
    assert "40 (1 distinct kernel bodies)" in str(out)


def test_the_kernel_level_shows_the_parameters():
    import io
    import tempfile
    import textwrap

    from lowering.dump import main

    src = textwrap.dedent('''
        import numpy as np
        def fill(x):
            out = np.zeros_like(x)
            for i in range(3):
                out[i] = x[i] * 2 + i
            return out
    ''')
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(src)
    buf = io.StringIO()
    code = main([f"{fh.name}::fill", "--args", "f64[3,8]", "--stage", "kernel"], out=buf)
    assert code == 0
    text = buf.getvalue()
    assert text.count("kernel.kernel") == 3
    assert 'params ["0", "0.0"]' in text and 'params ["2", "2.0"]' in text
    assert "kernel.param 0" in text and "[s0]" in text


def test_bodies_are_shared_across_functions():
    """A second function whose kernel has the same body (other constants)
    compiles no new kernel: it launches the first one's."""
    x = np.random.default_rng(2).random((6, 40))

    def first(x):
        out = np.zeros_like(x)
        for i in range(6):
            out[i] = np.sin(x[i]) * 3.0 + i
        return out

    def second(x):
        out = np.zeros_like(x)
        for i in range(6):
            out[i] = np.sin(x[i]) * 3.0 + (2 * i - 1)
        return out

    assert_same_value(lowering.compile(first)(x), first(x))
    before = cpu.kernels_compiled()
    got = lowering.compile(second)(x)
    assert cpu.kernels_compiled() == before
    assert_same_value(got, second(x))


SPECIAL = [0.0, -0.0, 1.0, -1.5, np.nan, np.inf, -np.inf, 5e-324, 1e308, -2.2250738585072014e-308]


@settings(max_examples=25, deadline=None)
@given(consts=st.lists(st.sampled_from(SPECIAL) | st.floats(width=64), min_size=2, max_size=7),
       dtype=st.sampled_from([np.float64, np.float32]),
       cols=st.sampled_from([1, 3, 8, 17]),
       reverse=st.booleans())
def test_float_parameters_are_numpy_constants(consts, dtype, cols, reverse):
    """Each iteration's constant (any float, NaN and -0.0 included) reaches
    its launch exactly: the compiled loop equals numpy bit for bit but for
    NaN payloads, float32 included (the constant rounded as numpy rounds)."""
    n = len(consts)
    x = np.random.default_rng(n).standard_normal((n, cols)).astype(dtype)

    def fill(x):
        out = np.empty_like(x)
        for i in range(n):
            j = n - 1 - i if reverse else i
            out[i] = x[j] * consts[i] + consts[j]
        return out

    with np.errstate(all="ignore"):
        want = fill(x)
        got = lowering.compile(fill)(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16, np.uint64])
def test_integer_parameters(dtype):
    info = np.iinfo(dtype)
    consts = [0, 1, int(info.max), int(info.min), 7]
    x = np.arange(5 * 9, dtype=dtype).reshape(5, 9)

    def fill(x):
        out = np.zeros_like(x)
        for i in range(5):
            out[i] = x[i] ^ dtype(consts[i])
        return out

    np.testing.assert_array_equal(lowering.compile(fill)(x), fill(x))


def test_shared_kernels_with_index_checks():
    """A gather in each iteration: the checks' status words and the row
    parameters share one scalars block; an out-of-range index raises
    numpy's IndexError from the shared kernel."""
    x = np.random.default_rng(3).random((4, 10))

    def gather(x, idx):
        out = np.zeros((4, idx.shape[0]))
        for i in range(4):
            out[i] = x[i][idx] + i
        return out

    f = lowering.compile(gather)
    idx = np.array([0, 9, -1, 3, 3])
    np.testing.assert_array_equal(f(x, idx), gather(x, idx))
    # each iteration is two kernels (the checked gather, then the add): two bodies for all
    assert f.stats["kernel_bodies"] == 2
    assert lowering.explain(gather)(x, idx).kernel_count == 8
    with pytest.raises(IndexError, match="out of bounds"):
        f(x, np.array([0, 10, 1, 2, 3]))
    np.testing.assert_array_equal(f(x, idx[::-1].copy()), gather(x, idx[::-1].copy()))


def test_repeated_calls_reuse_the_launch_arguments():
    """The cached call (generated Python or the native entry) hands every
    launch its own parameters on every call."""
    f = lowering.compile(rows(12))
    for seed in range(4):
        rng = np.random.default_rng(seed)
        x, w = rng.random((12, 33)), rng.random(33)
        assert_same_value(f(x, w), rows(12)(x, w))


def test_kernels_of_one_body_run_the_interpreter_too():
    """The loop/kernel-level interpreter reads the parameters as the LLVM
    code does (see tests/passes/test_levels_interpreted.py for the rest)."""
    from lowering.backends.interpreter import run_module
    from lowering.pipeline import lower
    from tests.passes.test_levels_interpreted import graph_inputs

    fill = rows(5)
    x, w = np.random.default_rng(4).random((5, 7)), np.random.default_rng(5).random(7)
    module, inputs = graph_inputs(fill, (x, w))
    final, _ = lower(module, "cpu", ["C"] * len(inputs))
    assert sum(1 for o in final.walk() if isinstance(o, K.ParamOp)) > 0
    assert_same_value(run_module(final, inputs)[0], fill(x, w))


# ---- sizes: a loop over shrinking slices --------------------------------------------------
def correlation(data):
    n = data.shape[1]
    c = np.zeros((n, n))
    for i in range(n):
        c[i, i] = 1.0
        c[i + 1:, i] = c[i, i + 1:] = data[:, i] @ data[:, i + 1:]
    return c


def test_a_loop_over_shrinking_slices_shares_its_bodies():
    """The classic correlation loop: each iteration's slices are one shorter,
    so its kernels differ in sizes too; they share bodies whose extents and
    buffer shapes come with the launch (12 iterations, 5 bodies)."""
    data = np.random.default_rng(6).random((30, 12))
    f = lowering.compile(correlation)
    assert_same_value(f(data), correlation(data))
    assert_same_value(f(data), correlation(data))
    # (compiled both times: an error inside the program would re-run it eagerly)
    assert f.stats["eager_fallbacks"] == 0 and f.stats["cache_hits"] == 1
    out = lowering.explain(correlation)(data)
    assert out.kernel_bodies <= 5 < out.kernel_count
    assert f.stats["kernel_bodies"] == out.kernel_bodies


def test_the_kernel_level_shows_dynamic_sizes():
    from lowering.pipeline import lower
    from tests.passes.test_levels_interpreted import graph_inputs

    module, inputs = graph_inputs(correlation, (np.random.default_rng(7).random((10, 6)),))
    text = str(lower(module, "cpu", ["C"])[0])
    assert "memref.cast" in text and "memref<1x?xf64>" in text
    assert f"loop.map [{L_DYN}] sizes(" in text


L_DYN = -9223372036854775808  # DYN, as the kernel level prints it


def prefix_sums(x):
    out = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = x[i, :i + 1].sum()
    return out


def test_reductions_over_rows_of_different_lengths_share_a_body():
    """Each iteration reduces a row one longer: the reduction's extent is a
    parameter too (`loop.reduce ... sizes(...)`), so the 40 iterations
    launch at most 2 bodies (before: one per row length)."""
    from lowering.pipeline import lower
    from tests.passes.test_levels_interpreted import graph_inputs

    x = np.random.default_rng(9).random((40, 40))
    f = lowering.compile(prefix_sums)
    assert_same_value(f(x), prefix_sums(x), TOLERANCES.rtol(x.dtype, "reduction", 40))
    assert f.stats["kernel_bodies"] <= 2 and f.stats["eager_fallbacks"] == 0
    module, _ = graph_inputs(prefix_sums, (x[:5, :5].copy(),))
    text = str(lower(module, "cpu", ["C"])[0])
    assert f'loop.reduce "sum" [{L_DYN}] sizes(' in text


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 9), extra=st.integers(0, 5), step=st.sampled_from([1, 2]),
       dtype=st.sampled_from([np.float64, np.float32, np.int32]),
       layout=st.sampled_from(["C", "F", "strided"]))
def test_shrinking_slices_equal_numpy(n, extra, step, dtype, layout):
    """Rows of shrinking length (down to empty), read from C, F and strided
    inputs, every dtype class: the shared bodies give numpy's answer."""
    rng = np.random.default_rng(n * 31 + extra)
    base = (rng.standard_normal((n, (n + extra) * step)) * 10).astype(dtype)
    x = {"C": np.ascontiguousarray(base[:, ::step]), "F": np.asfortranarray(base[:, ::step]),
         "strided": base[:, ::step]}[layout]

    def tri(x):
        out = np.zeros_like(x)
        for i in range(n):
            out[i, i:] = x[i, i:] * 2 + i
        return out

    f = lowering.compile(tri)
    assert_same_value(f(x), tri(x))
    assert f.stats["eager_fallbacks"] == 0


def test_large_kernels_keep_their_sizes():
    """Kernels over more than SHARE_SIZES_MAX_ELEMENTS elements share only
    with kernels of their own sizes: no dynamic extent, no cast."""
    from passes.share_kernels import SHARE_SIZES_MAX_ELEMENTS
    from lowering.pipeline import lower
    from tests.passes.test_levels_interpreted import graph_inputs

    rows = SHARE_SIZES_MAX_ELEMENTS // 256 + 8

    def halves(x):
        out = np.zeros_like(x)
        for i in range(2):
            out[i * 8:] = x[i * 8:] * 3.0 + i
        return out

    x = np.random.default_rng(8).random((rows, 256))
    assert_same_value(lowering.compile(halves)(x), halves(x))
    module, inputs = graph_inputs(halves, (x,))
    text = str(lower(module, "cpu", ["C"])[0])
    assert "memref.cast" not in text and str(L_DYN) not in text


def test_large_kernels_keep_their_reduction_extents():
    """The same for reductions: rows of different lengths of a big array
    are reduced by kernels of static extents (one body each)."""
    from passes.share_kernels import SHARE_SIZES_MAX_ELEMENTS
    from lowering.pipeline import lower
    from tests.passes.test_levels_interpreted import graph_inputs

    def longer(x):
        out = np.zeros(3)
        for i in range(3):
            out[i] = x[i, :100 + i].sum()
        return out

    x = np.random.default_rng(10).random((SHARE_SIZES_MAX_ELEMENTS // 256 + 8, 256))
    f = lowering.compile(longer)
    assert_same_value(f(x), longer(x), TOLERANCES.rtol(x.dtype, "reduction", 102))
    assert f.stats["kernel_bodies"] == 3
    module, inputs = graph_inputs(longer, (x,))
    text = str(lower(module, "cpu", ["C"])[0])
    assert "sizes(" not in text and str(L_DYN) not in text
