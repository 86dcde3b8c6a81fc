"""The cost model (passes/cost_model.py) and its calibration
(lowering/calibrate.py): the table decides between a generated kernel and
numpy's / BLAS's routine for every shape class, the compiled program takes
the path the table predicts faster, and a program compiled under one table
is never reused under another."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace

import numpy as np
import pytest

import lowering
from lowering import calibrate, cost_tables
from passes import cost_model as cm
from passes.lower_to_loop import matmul_work


def _table(generated: cm.Rate, library: cm.Rate, source: str) -> cm.CostTable:
    keys = [k for c in cm.CLASSES.values() for k in c.keys()]
    return cm.CostTable("test", source, {k: {"generated": generated, "library": library}
                                         for k in keys})


FAST, SLOW = cm.Rate(0.0, 0.0, 0.0, 0.0), cm.Rate(1e6, 1.0, 1.0, 1.0)
GENERATED_WINS = _table(FAST, SLOW, "generated wins")
LIBRARY_WINS = _table(SLOW, FAST, "library wins")


def _paths(fn, *args) -> list[str]:
    return [p for ps in lowering.explain(lowering.compile(fn))(*args).paths for p in ps]


def _kernels(fn, *args) -> list[str]:
    return [n for ks in lowering.explain(lowering.compile(fn))(*args).kernels for n, _ in ks]


def _uses_library(names: list[str]) -> bool:
    return any(n.startswith(("blas", "extern")) for n in names)


RNG = np.random.default_rng(0)
A = RNG.standard_normal((64, 256)).astype(np.float32)
B_NARROW = RNG.standard_normal((256, 10)).astype(np.float32)
B_SHORT = RNG.standard_normal((4, 512)).astype(np.float32)
A_SHORT = RNG.standard_normal((64, 4)).astype(np.float32)
X3 = RNG.standard_normal((4, 64, 128)).astype(np.float32)
MASK = RNG.standard_normal((64, 128)) > 0
X_POW = RNG.uniform(0.0, 3.0, 4096).astype(np.float32)

# one program per shape class (and the class it is)
PROGRAMS = {
    "matmul-narrow": (lambda a, b: a @ b, (A, B_NARROW)),
    "matmul-short": (lambda a, b: (a @ b) * 2.0, (A_SHORT, B_SHORT)),
    "matmul-shared-rows": (lambda a, x: a.T @ np.tanh(a @ x), (A, B_NARROW[:, :1])),
    "column-reduction": (lambda x: x.sum(axis=1), (X3,)),
    "column-any": (lambda m: np.any(m, axis=0), (MASK,)),
    "power": (lambda x: x ** 2.2, (X_POW,)),
}


@pytest.mark.parametrize("machine", cm.shipped_machines())
def test_each_shipped_table_covers_every_variant_and_path_of_the_classes_it_measured(machine):
    """Every class a table has rates for, it has for each variant and path
    (the default kind's table: every class); a class measured on no
    machine of that kind yet keeps its generated path (below)."""
    t = cm.shipped(machine)
    assert t.machine == machine  # (the file is named for the machine it was measured on)
    for c in cm.CLASSES.values():
        if machine != cm.DEFAULT_MACHINE and not t.measured(c.name):
            continue
        for k in c.keys():
            for p in cm.PATHS:
                r = t.rates[k][p]
                assert min(r.overhead_us, r.ns_per_byte, r.ns_per_flop, r.ns_per_row) >= 0, (k, p)
    assert t.machine and t.machine != "unmeasured" and "calibrate" in t.source


def test_a_class_the_table_has_not_measured_keeps_its_generated_path():
    """A table from before a class existed: that class's op is generated
    (as before the class), and `explain` says the table has no rates for
    it; a forced path still holds."""
    rates = {k: v for k, v in LIBRARY_WINS.rates.items() if not k.startswith("power/")}
    old = cm.CostTable("old", "before power", rates)
    fn, args = PROGRAMS["power"]
    with cm.use(old):
        assert not old.measured("power") and old.measured("matmul-short")
        assert not _uses_library(_kernels(fn, *args))
        assert any("power (float32): vectorized pow fused into its kernel — cost table old has "
                   "no rates for the class" in p for p in _paths(fn, *args)), _paths(fn, *args)
        with cm.forced({"power": "library"}):
            assert _uses_library(_kernels(fn, *args))

def test_a_process_without_a_calibrated_table_takes_its_machine_kinds(monkeypatch, tmp_path):
    monkeypatch.delenv("LOWERING_COST_TABLE", raising=False)
    monkeypatch.setenv("LOWERING_CACHE_DIR", str(tmp_path))  # (no calibrated table there)
    for machine in cm.shipped_machines():
        monkeypatch.setattr(cost_tables, "machine_name", lambda m=machine: m)
        assert cost_tables.table_for_process().machine == machine
    # a kind no table was measured on: the nearest kind's
    monkeypatch.setattr(cost_tables, "machine_name", lambda: "unknowncpu-2c-256bit")
    t = cost_tables.table_for_process()
    assert t.machine == cm.nearest_machine("unknowncpu-2c-256bit", cm.shipped_machines())
    assert t.machine.endswith("-256bit")  # (a shipped AVX2 table stands in)


def test_the_nearest_machine_kind():
    known = ["rocketlake-2c-512bit", "znver3-2c-256bit", "znver3-8c-256bit", "skylake-4c-256bit"]
    near = cm.nearest_machine
    assert near("znver3-2c-256bit", known) == "znver3-2c-256bit"  # its own
    assert near("znver3-16c-256bit", known) == "znver3-2c-256bit"  # same CPU (then by name)
    assert near("znver3-8c-256bit", known) == "znver3-8c-256bit"
    assert near("haswell-4c-256bit", known) == "skylake-4c-256bit"  # same width, same cores
    assert near("haswell-2c-256bit", known) == "znver3-2c-256bit"
    assert near("sapphirerapids-2c-512bit", known) == "rocketlake-2c-512bit"  # same width
    assert near("neoverse-2c-128bit", known) == "rocketlake-2c-512bit"  # (none alike: the default)
    assert near("neoverse-4c-128bit", known) == "skylake-4c-256bit"  # same cores


def test_a_table_missing_a_rate_is_refused_by_name():
    rates = {k: {"generated": FAST, "library": FAST} for c in cm.CLASSES.values() for k in c.keys()}
    del rates["matmul-short/fused"]["library"]
    with pytest.raises(ValueError, match="matmul-short/fused:library"):
        cm.CostTable("x", "broken", rates)


@pytest.mark.parametrize("shape_class", sorted(PROGRAMS))
def test_the_compiled_path_follows_the_table(shape_class):
    fn, args = PROGRAMS[shape_class]
    want = fn(*args)
    for table, path in ((GENERATED_WINS, "generated"), (LIBRARY_WINS, "library")):
        with cm.use(table):
            paths = _paths(fn, *args)
            names = _kernels(fn, *args)
            got = lowering.compile(fn)(*args)
        what = cm.CLASSES[shape_class].generated if path == "generated" else \
            cm.CLASSES[shape_class].library
        assert any(f": {shape_class}" in p and f": {what} — predicted" in p for p in paths), \
            (path, paths)
        assert _uses_library(names) == (path == "library"), (path, names)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_explain_says_which_path_and_why():
    fn, args = PROGRAMS["matmul-narrow"]
    with cm.use(LIBRARY_WINS):
        text = str(lowering.explain(lowering.compile(fn))(*args))
    line = next(ln for ln in text.splitlines() if " path: " in ln)
    assert "array.dot" in line and "matmul-narrow: BLAS gemm/gemv" in line
    assert "predicted" in line and "generated vs" in line and "cost table test" in line


# shapes of each matmul class (M, K, N): small and large, few and many columns
NARROW_SHAPES = [(1, 2048, 16), (4, 512, 10), (64, 2048, 16), (256, 1024, 10), (1024, 512, 1),
                 (1024, 2048, 10), (16, 128, 1)]
SHORT_SHAPES = [(4, 16, 2048), (512, 1, 2048), (64, 16, 8), (512, 4, 256), (256, 10, 1024)]


def _expected(shape_class: str, m: int, k: int, n: int, fused: bool) -> str:
    w = matmul_work(shape_class, m, k, n, 4, fused and shape_class == "matmul-short",
                    fused and shape_class == "matmul-narrow", False)
    return cm.shipped().choose(shape_class, w).path


def test_with_the_shipped_table_each_shape_takes_the_path_the_table_predicts_faster():
    """The calibration table decides: where it says BLAS wins, BLAS runs;
    where the generated kernel wins, it runs. Both outcomes occur among these
    shapes (else the table would decide nothing)."""
    rng = np.random.default_rng(1)
    seen = set()
    with cm.use(cm.shipped()):
        for shape_class, shapes in (("matmul-narrow", NARROW_SHAPES),
                                    ("matmul-short", SHORT_SHAPES)):
            for m, k, n in shapes:
                for fused in (False, True):
                    a = rng.standard_normal((m, k)).astype(np.float32)
                    b = rng.standard_normal((k, n)).astype(np.float32)
                    if shape_class == "matmul-narrow":
                        fn = (lambda a, b: np.maximum(a, 0) @ b) if fused else (lambda a, b: a @ b)
                    else:
                        fn = (lambda a, b: (a @ b) * 3.0) if fused else (lambda a, b: a @ b)
                    path = _expected(shape_class, m, k, n, fused)
                    seen.add(path)
                    names = _kernels(fn, a, b)
                    assert _uses_library(names) == (path == "library"), (m, k, n, fused, names)
    assert seen == {"generated", "library"}


# A (M, K) of the shared-rows class, f32 and f64: in cache and streamed, short and
# longer rows, under and over the size from which the pass splits across threads
SHARED_SHAPES = [(20, 20), (32, 32), (64, 64), (300, 8), (500, 32), (1024, 128), (4096, 512), (50000, 128), (200000, 32),
                 (20000, 512)]


def _atax(a, x):
    return a.T @ (a @ x)


def test_with_the_shipped_table_a_shared_pass_runs_where_the_table_predicts_it_faster():
    """`A.T @ (A @ x)`: one pass over A's rows where the table predicts it
    faster than BLAS's two products, BLAS where it does not; both occur."""
    from passes.lower_to_loop import shared_rows_work

    rng = np.random.default_rng(2)
    seen = set()
    with cm.use(cm.shipped()):
        for dt in (np.float32, np.float64):
            for m, k in SHARED_SHAPES:
                a = rng.standard_normal((m, k)).astype(dt)
                x = rng.standard_normal(k).astype(dt)
                work = shared_rows_work(m, k, [1], np.dtype(dt).itemsize)
                path = cm.active().choose("matmul-shared-rows", work).path
                seen.add(path)
                names = _kernels(_atax, a, x)
                assert _uses_library(names) == (path == "library"), (dt, m, k, path, names)
                got = lowering.compile(_atax)(a, x)
                np.testing.assert_allclose(got, _atax(a, x), rtol=1e-4 if dt == np.float32 else 1e-10,
                                           atol=1e-4 * np.abs(_atax(a, x)).max())
    assert seen == {"generated", "library"}


def test_a_program_compiled_under_one_table_is_not_reused_under_another(tmp_path, monkeypatch):
    monkeypatch.setenv("LOWERING_CACHE_DIR", str(tmp_path))  # (the disk cache too)
    fn, args = PROGRAMS["matmul-narrow"]
    with cm.use(GENERATED_WINS):
        assert not _uses_library(_kernels(fn, *args))
    with cm.use(LIBRARY_WINS):
        assert _uses_library(_kernels(fn, *args))
    with cm.use(GENERATED_WINS):
        assert not _uses_library(_kernels(fn, *args))


def test_the_table_digest_names_its_rates_and_forced_paths():
    a = GENERATED_WINS
    rates = {k: dict(v) for k, v in a.rates.items()}
    rates["matmul-narrow/plain"]["library"] = replace(FAST, ns_per_byte=0.5)
    b = cm.CostTable("test", "changed", rates)
    assert a.digest != b.digest
    with cm.use(a):
        d = cm.digest()
        with cm.forced({"matmul-short": "library"}):
            assert cm.digest() != d
        assert cm.digest() == d


def test_forced_rejects_unknown_classes_and_paths():
    with pytest.raises(ValueError):
        with cm.forced({"matmul-wide": "generated"}):
            pass
    with pytest.raises(ValueError):
        with cm.forced({"matmul-short": "gpu"}):
            pass


def test_fit_recovers_the_rates_of_exact_timings():
    true = cm.Rate(2.0, 0.01, 0.002, 0.5)
    pts = []
    for m, k, n in [(1, 64, 4), (16, 512, 8), (256, 256, 16), (1024, 2048, 1), (64, 32, 10),
                    (4, 4096, 16), (512, 16, 2)]:
        w = matmul_work("matmul-narrow", m, k, n, 4, False, False, False)
        pts.append((w, true.time_us(w.generated_bytes, w.flops, w.rows)))
    got = calibrate.fit(pts, "generated")
    for name in ("overhead_us", "ns_per_byte", "ns_per_flop", "ns_per_row"):
        assert getattr(got, name) == pytest.approx(getattr(true, name), rel=1e-6, abs=1e-9), name
    # a disturbed timing (10x) does not move the fit
    w, t = pts[3]
    got = calibrate.fit(pts[:3] + [(w, 10 * t)] + pts[4:], "generated")
    assert got.ns_per_flop == pytest.approx(true.ns_per_flop, rel=1e-6)


def test_calibrating_writes_a_table_the_compiler_then_uses(tmp_path, monkeypatch):
    out = tmp_path / "costs.json"
    assert calibrate.main(["--quick", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    table = cm.CostTable.from_json(data, str(out))
    assert {r["class"] for r in data["measured"]} == set(table.rates)
    assert table.machine == calibrate.machine_name()
    monkeypatch.setenv("LOWERING_COST_TABLE", str(out))
    assert cost_tables.table_for_process().digest == table.digest


def test_a_broken_calibrated_table_warns_and_the_shipped_one_is_used(tmp_path, monkeypatch):
    bad = tmp_path / "costs.json"
    bad.write_text('{"machine": "x", "rates": {"matmul-short/plain": {}}}')
    monkeypatch.setenv("LOWERING_COST_TABLE", str(bad))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t = cost_tables.table_for_process()
    assert t.digest == cm.shipped(cost_tables.machine_name()).digest
    assert any("not used" in str(x.message) for x in w)


def test_calibrating_one_class_keeps_the_others_rates(tmp_path):
    """`--only` measures one class (a class new to the model) and keeps every
    other class's rates and measurements from the table it writes over."""
    out = tmp_path / "costs.json"
    base = GENERATED_WINS.to_json()
    base["measured"] = [{"class": "matmul-short/plain", "case": "kept", "path": "library",
                         "us": 1.0, "fitted_us": 1.0}]
    del base["rates"]["matmul-shared-rows/plain"]  # (a table from before the class existed)
    out.write_text(json.dumps(base))
    assert calibrate.main(["--quick", "--only", "matmul-shared-rows", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    table = cm.CostTable.from_json(data, str(out))
    for key, paths in table.rates.items():
        if key.startswith("matmul-shared-rows/"):
            assert paths != GENERATED_WINS.rates[key], key  # measured now
        else:
            assert paths == GENERATED_WINS.rates[key], key
    assert {r["class"] for r in data["measured"]} == {
        "matmul-short/plain", "matmul-shared-rows/plain", "matmul-shared-rows/streamed"}
    assert table.machine == "test" and "matmul-shared-rows:" in table.source
    with pytest.raises(SystemExit):
        calibrate.main(["--only", "matmul-wide", "--out", str(out)])
