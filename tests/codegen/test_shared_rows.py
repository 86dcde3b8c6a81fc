"""A matrix-vector product that contracts over a matrix's rows (`A.T @ v`,
`v @ A`) whose vector's elements come from products by the same rows (`A @ W`):
logistic regression's `X.T @ (sigmoid(X @ w) - y)`, atax's `A.T @ (A @ x)`,
`(A @ x) @ A`. BLAS reads A once per product; generated, one ordered kernel
over A's rows computes each row's products, the values between, and adds
the row into the result (`SharedRowsEmitter`), reading A once. The cost
model picks that kernel or BLAS (`matmul-shared-rows`); here each path is
forced, so both are checked on every shape.

With integer-valued inputs every order of the sums is exact, so results
must equal numpy's bit for bit, NaN and ±Inf placement included; with
arbitrary floats the results must be within the reduction tolerance of the
bound the two products' errors make."""

from __future__ import annotations

import io
import re
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lowering
from lowering.testing import TOLERANCES, assert_matches_numpy, examples, stage_text
from passes import cost_model

FORCED = "matmul-shared-rows"


def atax(a, w, c):
    return a.T @ (a @ w[:, 0])


def relu_gradient(a, w, c):
    return a.T @ np.maximum(a @ w[:, :1] - c[:, :1], 0.0)


def masked(a, w, c):
    h = a @ w[:, 0] - c[:, 0]  # (read twice in the row: computed once there)
    return a.T @ (h * (h > 0))


def two_columns(a, w, c):
    z = a @ w  # (its columns 0 and 2 read in the row: two dot products there)
    return a.T @ (z[:, 0] * z[:, -1] - c[:, 1])


def row_vector_chain(a, w, c):
    return (a @ w[:, 0]) @ a


def row_through_transpose(a, w, c):
    return (a @ w[:, 1:2] + c[:, :1]).T @ a


PROGRAMS = {"atax": atax, "relu_gradient": relu_gradient, "masked": masked,
            "two_columns": two_columns, "row_vector_chain": row_vector_chain,
            "row_through_transpose": row_through_transpose}


def logistic_gradient(X, y, w):
    return X.T @ (1.0 / (1.0 + np.exp(-(X @ w))) - y)


def logreg(X, y, w, steps):
    n = X.shape[0]
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        w = w - 0.1 * (X.T @ (p - y)) / n
    return w


def kernels(fn, *args) -> list[tuple[str, list[str]]]:
    return [k for ks in lowering.explain(lowering.compile(fn))(*args).kernels for k in ks]


def uses_blas(fn, *args) -> bool:
    return any(name.startswith(("blas", "extern")) for name, _ in kernels(fn, *args))


@st.composite
def cases(draw):
    dt = np.dtype(draw(st.sampled_from([np.float32, np.float64])))
    m = draw(st.sampled_from([17, 64, 257]))
    k = draw(st.sampled_from([8, 33, 64]))
    n = draw(st.sampled_from([2, 3]))
    name = draw(st.sampled_from(sorted(PROGRAMS)))
    specials = draw(st.booleans())
    return dt, m, k, n, name, specials, draw(st.integers(0, 2**32 - 1))


@examples(1.0)
@given(cases())
def test_shared_passes_match_numpy_exactly_on_exact_sums(case):
    dt, m, k, n, name, specials, seed = case
    rng = np.random.default_rng(seed)
    # |A| <= 2, |W| <= 1: every partial sum an integer below 2**24 (float32's exact
    # range; two_columns: |z0 z2| <= 64 * 64, times |A| <= 2, over 257 rows)
    a = rng.integers(-2, 3, (m, k)).astype(dt)
    w = rng.integers(-1, 2, (k, n)).astype(dt)
    c = rng.integers(-2, 3, (m, n)).astype(dt)
    if specials:  # a NaN and infinities reach whole rows and columns of the results
        a.flat[rng.integers(0, a.size)] = np.nan
        w.flat[rng.integers(0, w.size)] = np.inf
        a.flat[rng.integers(0, a.size)] = -np.inf
    fn = PROGRAMS[name]
    # (errors ignored: under numpy's default errstate a product read in part,
    # two_columns' z with three columns, keeps its unread column's
    # floating-point flags, which the one-pass evaluation does not compute:
    # the program then stays on BLAS, tests/test_errstate_partial_reads.py)
    for path in cost_model.PATHS:
        with cost_model.forced({FORCED: path}), np.errstate(all="ignore"):
            assert uses_blas(fn, a, w, c) == (path == "library"), (path, kernels(fn, a, w, c))
            assert_matches_numpy(fn, a, w, c, rtol=0.0, calls=2, compiled=lowering.compile(fn))


@examples(0.5)
@given(dt=st.sampled_from([np.float32, np.float64]), m=st.sampled_from([17, 64, 300, 2049]),
       k=st.sampled_from([8, 100, 256]), seed=st.integers(0, 2**32 - 1))
def test_logistic_gradients_are_within_the_products_bound(dt, m, k, seed):
    """Each element within the reduction tolerance (over the M rows and the
    K columns summed) of the bound |X|^T (|p - y| + |X| |w| |p'|), p' <= 1/4
    the sigmoid's slope: the error of X @ w moves p by at most a quarter of
    it. (M 64 and 300 with K 100 or 256: the sigmoids of a block's rows
    side by side, 8 and 4 rows a block.)"""
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((m, k)) * 10.0 ** rng.integers(-2, 2, (m, k))).astype(dt)
    y = (rng.random(m) > 0.5).astype(dt)
    w = (rng.standard_normal(k) / np.sqrt(k)).astype(dt)
    X64, w64 = X.astype(np.float64), w.astype(np.float64)
    want = logistic_gradient(X64, y.astype(np.float64), w64)
    z_bound = np.abs(X64) @ np.abs(w64)
    bound = np.abs(X64).T @ (np.abs(1.0 / (1.0 + np.exp(-(X64 @ w64))) - y) + z_bound / 4)
    tol = TOLERANCES.rtol(dt, "reduction", m + k)
    for path in cost_model.PATHS:
        with cost_model.forced({FORCED: path}):
            with np.errstate(over="ignore"):
                got = lowering.compile(logistic_gradient)(X, y, w)
        assert got.dtype == dt
        assert np.all(np.abs(got - want) <= tol * bound), (path, np.max(np.abs(got - want) / bound))


def test_a_logistic_regression_step_reads_X_once():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1024, 128)).astype(np.float32)  # (under the parallel threshold)
    y = (rng.random(1024) > 0.5).astype(np.float32)
    w = np.zeros(128, np.float32)
    with cost_model.forced({FORCED: "generated"}):
        cf = lowering.compile(logreg)
        ex = lowering.explain(cf)(X, y, w, 3)
        got = cf(X, y, w, 3)
    names = [name for ks in ex.kernels for name, _ in ks]
    # per step: one pass over X (both products, the sigmoid between), then w's update
    assert len(names) == 6 and not any(n.startswith(("blas", "extern")) for n in names), names
    for step in ex.kernels[0][::2]:
        assert sum(op.startswith("array.dot") for op in step[1]) == 2, step
        assert any(op.startswith("math.exp") for op in step[1]), step
    assert any("matmul-shared-rows: one ordered pass" in p for ps in ex.paths for p in ps)
    assert any("computed in the pass of array.dot" in p for ps in ex.paths for p in ps)
    np.testing.assert_allclose(got, logreg(X, y, w, 3), rtol=1e-4, atol=1e-6)


def loop_text(fn, spec: str, backend: str = "cpu") -> str:
    from xdsl.parser import Parser

    from lowering.dump import make_inputs
    from lowering.pipeline import context, lower

    args, _ = make_inputs(spec)
    (graph,) = lowering.explain(lowering.compile(fn, backend="numpy"))(*args).graphs
    module = Parser(context(), graph).parse_module()
    final, _ = lower(module, backend, ["C"] * len(args))
    out = io.StringIO()
    print(final, file=out)
    return out.getvalue()


def test_the_gpu_backend_keeps_blas():
    """The Triton emitter has no rule for an ordered kernel with a
    reduction: on the GPU backend both products stay matmuls."""
    with cost_model.forced({FORCED: "generated"}):
        cpu, gpu = (loop_text(atax, "f64[64,64] f64[64,2] f64[64,2]", b) for b in ("cpu", "gpu"))
    ordered = re.compile(r"[{ ]accumulate[,}]")  # (the kernel attribute, among others)
    assert ordered.search(cpu) and 'loop.extern "matmul"' not in cpu, cpu
    assert not ordered.search(gpu) and gpu.count('loop.extern "matmul') == 2, gpu


def _product_returned_too(a, w, c):
    z = a @ w
    return a.T @ z, z


def _read_across_its_columns(a, w, c):
    z = a @ w
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return a.T @ (e / e.sum(axis=1, keepdims=True))


def _another_matrix(a, w, c):
    return c.T @ (a @ w[:, :1])


def _into_three_columns(a, w, c):
    return a.T @ np.tanh(a @ w)


@pytest.mark.parametrize("fn", [_product_returned_too, _read_across_its_columns, _another_matrix,
                                _into_three_columns])
def test_no_shared_pass_where_the_rows_are_not_only_the_products(fn):
    """The product is stored for another reader, its row is read across
    columns (a row reduction over them), the transposed product is over
    another matrix, or into several columns (each row added into 3
    interleaved outputs: BLAS's gemm): BLAS for the transposed product."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 64))
    w = rng.standard_normal((64, 3))
    c = rng.standard_normal((300, 64))
    with cost_model.forced({FORCED: "generated"}):
        paths = [p for ps in lowering.explain(lowering.compile(fn))(a, w, c).paths for p in ps]
        assert not any("matmul-shared-rows" in p for p in paths), paths
        got, want = lowering.compile(fn)(a, w, c), fn(a, w, c)
        for got, want in zip(*((x,) if isinstance(x, np.ndarray) else x for x in (got, want))):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


def test_a_matrix_laid_out_by_columns_is_not_read_by_rows():
    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.standard_normal((300, 64)))
    w = rng.standard_normal((64, 2))
    with cost_model.forced({FORCED: "generated"}):
        assert uses_blas(atax, a, w, w)
        assert_matches_numpy(atax, a, w, w)


def test_rows_longer_than_the_pass_takes_stay_blas():
    """Rows of up to SHARED_ROW_BYTES (32 KiB, a 4096-element float64 row)
    are the class's (the cost model decides); longer ones were not measured:
    BLAS's."""
    from passes.lower_to_loop import SHARED_ROW_BYTES

    assert SHARED_ROW_BYTES == 32 << 10
    rng = np.random.default_rng(0)
    for k, blas in ((SHARED_ROW_BYTES // 8, False), (SHARED_ROW_BYTES // 8 + 1, True)):
        a, w = rng.standard_normal((40, k)), rng.standard_normal((k, 2))
        with cost_model.forced({FORCED: "generated"}):
            assert uses_blas(atax, a, w, w) == blas, k
            np.testing.assert_allclose(lowering.compile(atax)(a, w, w), atax(a, w, w), rtol=1e-10)


@pytest.mark.parametrize("m, k", [(37, 513), (64, 777), (33, 1024)])
def test_long_rows_match_numpy_exactly(m, k):
    """Rows longer than L1 keeps beside the output (over 4 KiB), each
    program forced onto the pass: integer-valued float64 sums are exact in
    any order, so the results are numpy's bit for bit, a NaN and
    infinities included."""
    rng = np.random.default_rng(k)
    a = rng.integers(-2, 3, (m, k)).astype(np.float64)
    w = rng.integers(-1, 2, (k, 3)).astype(np.float64)
    c = rng.integers(-2, 3, (m, 3)).astype(np.float64)
    a[m // 2, k // 3] = np.nan
    a[m - 1, k - 1] = -np.inf
    for name, fn in PROGRAMS.items():
        with cost_model.forced({FORCED: "generated"}), np.errstate(all="ignore"):
            assert not uses_blas(fn, a, w, c), (name, kernels(fn, a, w, c))
            assert_matches_numpy(fn, a, w, c, rtol=0.0, calls=2, compiled=lowering.compile(fn))


def test_the_pass_takes_vectors_of_256_bits_at_most():
    """`schedule.SHARED_ROWS_VECTOR_BITS`: compiled for 512-bit vectors, the
    pass's kernel takes 256 (4 float64 lanes; where A streams from memory it
    ran 1.4-1.9x faster so), a pointwise kernel of the same program 512."""
    from runtime import cpu

    def program(a, w, c):
        return atax(a, w, c) * 2.0 + 1.0, a * 3.0

    with cpu.vector_width(512), cost_model.forced({FORCED: "generated"}):
        text = stage_text(program, "f64[4000,64] f64[64,2] f64[4000,2]", stage="kernel")
    kernels_ = {}  # name: (vector width, has a reduction)
    for part in text.split('kernel.kernel "')[1:]:
        name, width = re.match(r'(\w+)".*? vector (\d+) : i64', part).groups()
        kernels_[name] = (int(width), "loop.reduce" in part.split("kernel.kernel")[0])
    shared = [w for w, reduces in kernels_.values() if reduces]
    assert shared and set(shared) == {4}, kernels_
    assert 8 in [w for w, reduces in kernels_.values() if not reduces], kernels_


# ---- the pass split across threads --------------------------------------------
# With `threads` > 1 and a matrix of `parallel_threshold` elements or more, the
# pass runs its rows in one chunk per thread (`k<i>_part`, each chunk into a
# partial result of its own) and adds the partials (`k<i>_join`). Here the
# runtime's thread count and threshold are set for the test (as
# LOWERING_THREADS and a big matrix would), so that small matrices split too,
# into more chunks than rows, odd and uneven ones.

SPLIT_THRESHOLD = 64


@contextmanager
def split_rows(threads: int):
    """The pipeline compiles for `threads` threads (`runtime.cpu.THREADS`,
    LOWERING_THREADS's), splitting from SPLIT_THRESHOLD elements on."""
    from lowering.pipeline import clear_programs
    from runtime import cpu

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cpu, "PARALLEL_THRESHOLD", SPLIT_THRESHOLD)
        mp.setattr(cpu, "THREADS", threads)
        clear_programs()
        try:
            yield
        finally:
            clear_programs()


def kernel_threads(fn, *args) -> dict[str, int]:
    """Each kernel's threads, as `schedule` decided them (kernel level)."""
    import re

    spec = " ".join(f"f{a.dtype.itemsize * 8}[{','.join(map(str, a.shape))}]" for a in args)
    text = loop_text(fn, spec)
    return {m[1]: int(m[2]) for m in re.finditer(r'kernel\.kernel "(\w+)".*? threads (\d+)', text)}


@st.composite
def split_cases(draw):
    dt = np.dtype(draw(st.sampled_from([np.float32, np.float64])))
    threads = draw(st.sampled_from([2, 3, 5, 32]))
    # 0 and 1 rows and up to 16 are BLAS's (no pass over so few rows); from 17 on, fewer
    # rows than chunks (32 threads), odd and uneven chunks
    m = draw(st.sampled_from([0, 1, 2, 16, 17, 18, 31, 33, 64, 101, 257]))
    k = draw(st.sampled_from([8, 9, 33]))
    name = draw(st.sampled_from(sorted(PROGRAMS)))
    layout = draw(st.sampled_from(["C", "rows of a wider matrix", "every other row"]))
    return dt, threads, m, k, name, layout, draw(st.booleans()), draw(st.integers(0, 2**32 - 1))


def _matrix(rng, dt, m, k, layout):
    """An (m, k) integer-valued matrix, |a| <= 2, laid out as asked: a view
    whose rows are not contiguous with each other is BLAS's (its rows are
    not one block of memory)."""
    if layout == "C":
        return rng.integers(-2, 3, (m, k)).astype(dt)
    if layout == "rows of a wider matrix":
        return rng.integers(-2, 3, (m, k + 3)).astype(dt)[:, 1:k + 1]
    return rng.integers(-2, 3, (2 * m, k)).astype(dt)[::2]


@examples(1.0)
@given(split_cases())
def test_split_passes_match_numpy_exactly_on_exact_sums(case):
    """Integer-valued inputs: every order of the sums is exact, so the split
    pass gives numpy's results bit for bit, NaN and ±Inf placement included."""
    dt, threads, m, k, name, layout, specials, seed = case
    rng = np.random.default_rng(seed)
    a = _matrix(rng, dt, m, k, layout)
    w = rng.integers(-1, 2, (k, 3)).astype(dt)
    c = rng.integers(-2, 3, (m, 3)).astype(dt)
    if specials and a.size:
        a[rng.integers(0, m), rng.integers(0, k)] = np.nan
        a[rng.integers(0, m), rng.integers(0, k)] = -np.inf
        w.flat[rng.integers(0, w.size)] = np.inf
    fn = PROGRAMS[name]
    # (errors ignored: see test_shared_passes_match_numpy_exactly_on_exact_sums)
    with split_rows(threads), cost_model.forced({FORCED: "generated"}), \
            np.errstate(all="ignore"):
        assert_matches_numpy(fn, a, w, c, rtol=0.0, calls=2, compiled=lowering.compile(fn))
        names = kernels(fn, a, w, c)
        shared = m > 16 and layout == "C"
        assert (not uses_blas(fn, a, w, c)) == shared, names
        part = [n for n, _ in names if n.endswith("_part")]
        assert len(part) == shared and sum(n.endswith("_join") for n, _ in names) == shared, names
        if shared:  # one thread per chunk (fewer rows than threads: one row each)
            ran = kernel_threads(fn, a, w, c)[part[0]]
            assert ran == min(threads, m), (ran, threads, m)


@examples(0.5)
@given(dt=st.sampled_from([np.float32, np.float64]), threads=st.sampled_from([2, 3, 7]),
       m=st.sampled_from([17, 300, 2049]), k=st.sampled_from([8, 100, 256]),
       seed=st.integers(0, 2**32 - 1))
def test_split_logistic_gradients_are_within_the_products_bound(dt, threads, m, k, seed):
    """As `test_logistic_gradients_are_within_the_products_bound`, the rows
    summed in chunks: each element within the reduction tolerance (over the
    M rows and K columns summed) of the bound the products' errors make."""
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((m, k)) * 10.0 ** rng.integers(-2, 2, (m, k))).astype(dt)
    y = (rng.random(m) > 0.5).astype(dt)
    w = (rng.standard_normal(k) / np.sqrt(k)).astype(dt)
    X64, w64 = X.astype(np.float64), w.astype(np.float64)
    want = logistic_gradient(X64, y.astype(np.float64), w64)
    bound = np.abs(X64).T @ (np.abs(1.0 / (1.0 + np.exp(-(X64 @ w64))) - y)
                             + np.abs(X64) @ np.abs(w64) / 4)
    tol = TOLERANCES.rtol(dt, "reduction", m + k)
    with split_rows(threads), cost_model.forced({FORCED: "generated"}):
        with np.errstate(over="ignore"):
            got = lowering.compile(logistic_gradient)(X, y, w)
            names = [n for n, _ in kernels(logistic_gradient, X, y, w)]
    assert any(n.endswith("_part") for n in names) and any(n.endswith("_join") for n in names), \
        names
    assert got.dtype == dt
    assert np.all(np.abs(got - want) <= tol * bound), np.max(np.abs(got - want) / bound)


def test_one_thread_keeps_the_single_ordered_pass():
    """LOWERING_THREADS=1: one kernel over the rows, no partial results; and
    below the parallel threshold (a matrix one thread runs anyway) too."""
    rng = np.random.default_rng(0)
    a, w = rng.standard_normal((300, 64)), rng.standard_normal((64, 3))
    small = rng.standard_normal((17, 3))  # 51 elements, under the threshold
    with cost_model.forced({FORCED: "generated"}):
        with split_rows(1):
            one = [n for n, _ in kernels(atax, a, w, w)]
        with split_rows(2):
            two = [n for n, _ in kernels(atax, a, w, w)]
            under = [n for n, _ in kernels(atax, small, w[:3], w[:3])]
    assert not any(n.endswith(("_part", "_join")) for n in one + under), (one, under)
    assert any(n.endswith("_part") for n in two) and any(n.endswith("_join") for n in two), two


def test_the_split_pass_runs_on_the_threads_of_a_fresh_process():
    """LOWERING_THREADS read at import, as a user sets it: 1 keeps one
    ordered kernel, 2 and 3 split (3 threads on a 2-core machine still give
    numpy's answer: chunks never straddle threads)."""
    import json
    import os
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    script = textwrap.dedent("""
        import json
        import numpy as np
        import lowering
        from passes import cost_model
        from lowering.backends.cpu_backend import KernelStep
        rng = np.random.default_rng(0)
        X = rng.integers(-2, 3, (1 << 14, 129)).astype(np.float64)  # 2M elements: splits
        w = rng.integers(-1, 2, 129).astype(np.float64)
        f = lambda X, w: X.T @ np.maximum(X @ w, 0.0)
        with cost_model.forced({"matmul-shared-rows": "generated"}):
            cf = lowering.compile(f)
            got = cf(X, w)
            names = [n for ks in lowering.explain(cf)(X, w).kernels for n, _ in ks]
        threads = [s.threads for p in cf.programs_run for s in p.steps
                   if isinstance(s, KernelStep)]
        print(json.dumps({"equal": bool(np.array_equal(got, f(X, w))), "names": names,
                          "threads": threads}))
    """)
    root = Path(__file__).resolve().parents[2]
    for n in (1, 2, 3):
        env = dict(os.environ, LOWERING_THREADS=str(n), PYTHONPATH=str(root))
        proc = subprocess.run([sys.executable, "-c", script], cwd=root, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        assert res["equal"], (n, res)
        split = [k for k in res["names"] if k.endswith(("_part", "_join"))]
        assert len(split) == (0 if n == 1 else 2), (n, res)
        assert max(res["threads"]) == n, (n, res)  # (the part: one chunk per thread)


@pytest.mark.parametrize("m, k, dt, block, side_by_side", [
    (64, 32, "f32", 4, False), (66, 32, "f32", 2, False), (65, 32, "f32", 1, False),
    (64, 64, "f32", 8, True), (60, 64, "f32", 4, True), (64, 1024, "f32", 8, True),
    (64, 512, "f64", 8, True), (63, 512, "f64", 1, False), (32, 4096, "f64", 8, True),
    (36, 8192, "f32", 4, True)])
def test_a_point_takes_a_block_of_rows(m, k, dt, block, side_by_side):
    """`shared_row_block`: up to SHARED_ROW_BLOCK rows per point (with an
    exp and a division between, on rows of SHARED_VECTOR_ROW_BYTES or more:
    SHARED_VECTOR_ROWS) where they divide M and fit SHARED_BLOCK_BYTES
    together; each row's product is its own reduction (one of each per row,
    none computed twice), and the map adds the block's rows into the output
    once per point. Side by side (`vector_rows`): the block's products
    stored, the sigmoids computed in one map over the block's rows
    (`any_width`) into a buffer the rows' map reads one scalar each from;
    else one row at a time, in the point's own code."""
    from passes.lower_to_loop import (SHARED_BLOCK_BYTES, SHARED_ROW_BLOCK, SHARED_VECTOR_ROW_BYTES,
                                      SHARED_VECTOR_ROWS)

    assert SHARED_ROW_BLOCK == 4 and SHARED_VECTOR_ROWS == 8 and SHARED_BLOCK_BYTES == 256 << 10
    assert SHARED_VECTOR_ROW_BYTES == 256
    with cost_model.forced({FORCED: "generated"}):
        text = loop_text(logistic_gradient, f"{dt}[{m},{k}] {dt}[{m}] {dt}[{k}]")
    k1 = text[text.index('kernel.kernel "k1'):]
    if "kernel.kernel" in k1[1:]:
        k1 = k1[:k1.index("kernel.kernel", 1)]
    assert f"parallel [{m // block}]" in k1, k1
    assert k1.count("loop.reduce") == block
    assert k1.count("math.exp") == (1 if side_by_side else block)
    if side_by_side:
        maps = k1.split("loop.map")[1:]
        assert len(maps) == 2 and f"[{block}]" in maps[0] and "any_width" in maps[0], k1
        assert "math.exp" in maps[0] and "math.exp" not in maps[1]
        # the block's products stored, their sigmoids stored, the output stored
        assert k1.count("loop.store") == block + 2
    else:
        assert k1.count("loop.map") == 1 and k1.count("loop.store") == 1


@pytest.mark.parametrize("m, k, dt, block", [
    (64, 32, "f64", 8), (64, 31, "f64", 4), (64, 32, "f32", 4), (64, 4096, "f64", 8),
    (36, 4096, "f64", 4), (24, 8192, "f32", 8), (40, 2048, "f64", 8)])
def test_long_rows_take_blocks_of_eight(m, k, dt, block):
    """Without values between (`A.T @ (A @ x)`): rows of
    SHARED_VECTOR_ROW_BYTES or more take SHARED_LONG_ROW_BLOCK (8) a point,
    narrower ones SHARED_ROW_BLOCK (4) — each of a block's rows its own
    reduction, read in one pass (as many streams from memory), and one
    map adding them into the output — where they divide M."""
    from passes.lower_to_loop import SHARED_LONG_ROW_BLOCK

    assert SHARED_LONG_ROW_BLOCK == 8
    with cost_model.forced({FORCED: "generated"}):
        text = loop_text(atax, f"{dt}[{m},{k}] {dt}[{k},2] {dt}[{m},2]")
    k1 = text[text.index('kernel.kernel "k1'):]
    k1 = k1[:k1.index("kernel.kernel", 1)] if "kernel.kernel" in k1[1:] else k1
    assert f"parallel [{m // block}]" in k1, k1
    assert k1.count("loop.reduce") == block and k1.count("loop.map") == 1
