"""`python -m lowering.dump`: argument specs, inputs, the printed IR (parsed
back), passes, graph breaks, and one-line errors with exit status 2."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from xdsl.parser import Parser

from lowering import dump
from lowering.dump import ArgSpec, UsageError, make_inputs, parse_spec
from lowering.examples import EXAMPLES
from lowering.pipeline import EMITTERS, context, pipeline, tensor_passes

ROOT = Path(__file__).resolve().parent.parent


def run_main(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = dump.main(list(argv), out=out)
    return code, out.getvalue()


def run_cli(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "lowering.dump", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def modules_of(text: str) -> list:
    """The graphs of a dump, parsed back (split where xdsl-opt would split)."""
    return [Parser(context(), chunk).parse_module() for chunk in text.split("\n// -----\n")]


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    p = tmp_path / "model.py"
    p.write_text(textwrap.dedent("""\
        import numpy as np
        import lowering

        def scale(x, s, f, n, flag, eps=1e-3):
            y = x * s * f + n
            return (y if flag else -y) + eps

        def breaks(x):
            y = np.tanh(x)
            if y.sum() > 0:
                y = y * 2.0
            u = np.unique(np.floor(y * 3))
            return y + u.size

        @lowering.compile
        def decorated(x):
            return np.exp(x) - 1.0

        def shapes_mismatch(a, b):
            return a + b

        class Model:
            @staticmethod
            def forward(x):
                return x @ x.T
        """))
    return p


# ---- argument specs -------------------------------------------------------------

def test_parse_spec_forms():
    specs = parse_spec("f32[4096, 4096] f64[] i8 u8[3] bool[2,2] float float:0.25 int:3 "
                       "bool:true eps=float:1e-6")
    assert [str(s) for s in specs] == [
        "f32[4096,4096]", "f64[]", "i8[]", "u8[3]", "bool[2,2]", "float", "float:0.25",
        "int:3", "bool:true", "float:1e-06"]
    assert specs[0] == ArgSpec("array", np.dtype(np.float32), (4096, 4096))
    assert specs[2].shape == () and specs[2].dtype == np.int8
    assert specs[-1].keyword == "eps" and specs[-1].value == 1e-6
    assert specs[7].value == 3 and specs[8].value is True


@pytest.mark.parametrize("spec, words", [
    ("f33[4]", "unknown dtype code 'f33'"),
    ("f32[4", "unclosed"),
    ("f32[a,b]", "comma-separated integers"),
    ("int", "needs a value"),
    ("int:x", "not an integer"),
    ("bool:maybe", "bool:true or bool:false"),
    ("f32:3", "only float, int and bool"),
    ("f32[-1]", "negative dimension"),
    ("f32[100000,100000]", "GiB"),
    ("x=f32 f32", "positional item follows a keyword"),
])
def test_parse_spec_errors(spec, words):
    with pytest.raises(UsageError, match=re.escape(words)):
        parse_spec(spec)


def test_inputs_are_deterministic_and_typed():
    a1, k1 = make_inputs("f32[3,5] f16[4] i64[100] u8[7] bool[50] float int:7 bool:false s=float")
    a2, k2 = make_inputs("f32[3,5] f16[4] i64[100] u8[7] bool[50] float int:7 bool:false s=float")
    for x, y in zip(a1 + list(k1.values()), a2 + list(k2.values())):
        np.testing.assert_array_equal(x, y)
    x, h, i, u, b, f, n, flag = a1
    assert (x.dtype, x.shape) == (np.float32, (3, 5)) and x.std() > 0.1
    assert h.dtype == np.float16
    assert i.dtype == np.int64 and i.min() >= 0 and i.max() < 10 and len(set(i)) > 5
    assert u.dtype == np.uint8 and b.dtype == np.bool_ and 0 < b.sum() < 50
    assert type(f) is float and n == 7 and flag is False and type(k1["s"]) is float
    other, _ = make_inputs("f32[3,5]", seed=1)
    assert not np.array_equal(other[0], x)


def test_big_inputs_are_cheap_to_build():
    (x,), _ = make_inputs("f32[4096,4096]")
    assert x.dtype == np.float32 and x.shape == (4096, 4096)


# ---- dumping ----------------------------------------------------------------------

def test_dump_user_function_round_trips(user_file):
    code, out = run_main(f"{user_file}::scale", "--args", "f32[4,8] f32[8] float int:2 bool:true")
    assert code == 0
    assert out.startswith("// lowering.dump scale(x: f32[4,8], s: f32[8], f: float, n: int:2, "
                          "flag: bool:true) --stage tensor\n")
    assert "// 1 graph, 0 graph breaks" in out
    (module,) = modules_of(out)
    text = str(module)
    assert "func.func @main(%0: tensor<4x8xf32>, %1: tensor<8xf32>, %2: tensor<f64>)" in text
    assert 'array.ufunc "multiply"' in text and 'array.ufunc "negative"' not in text
    assert text in out  # printed exactly as xDSL prints it
    assert "//   flag == True (specialized)" in out


def test_specialized_bool_changes_the_graph(user_file):
    _, out = run_main(f"{user_file}::scale", "--args", "f32[4,8] f32[8] float int:2 bool:false")
    assert 'array.ufunc "negative"' in out


def test_keyword_argument(user_file):
    code, out = run_main(f"{user_file}::scale", "--args",
                         "f32[2] f32[2] float int:1 bool:true eps=float:0.5")
    assert code == 0 and "eps: float:0.5" in out
    # Python floats are graph inputs (0-d f64), not constants: eps is the 4th
    assert "@main(%0: tensor<2xf32>, %1: tensor<2xf32>, %2: tensor<f64>, %3: tensor<f64>)" in out


def test_decorated_and_dotted_targets(user_file):
    code, out = run_main(f"{user_file}::decorated", "--args", "f64[3]")
    assert code == 0 and 'array.ufunc "exp"' in out
    code, out = run_main(f"{user_file}::Model.forward", "--args", "f32[3,4]")
    assert code == 0 and "Model.forward(x: f32[3,4])" in out


def test_graph_breaks_are_printed_with_reasons(user_file):
    code, out = run_main(f"{user_file}::breaks", "--args", "f32[16]")
    assert code == 0
    assert "// 3 graphs, 2 graph breaks" in out
    assert "break 1: bool() of a traced value (data-dependent Python control flow)" in out
    assert "break 2: np.unique has no capture rule" in out
    # the user's own lines: `if y.sum() > 0:` is line 10, np.unique line 12
    assert re.search(r"at .*model\.py:10\b", out) and re.search(r"at .*model\.py:12\b", out)
    mods = modules_of(out)
    assert len(mods) == 3
    assert all(m.ops.first.sym_name.data == "main" for m in mods)


def test_builtin_example_with_default_4096_args():
    code, out = run_main("--example", "layernorm")
    assert code == 0
    assert "layernorm(x: f32[4096,4096], w: f32[4096], b: f32[4096])" in out
    (m,) = modules_of(out)
    assert 'array.reduce "sum"' in str(m) and "tensor<4096x4096xf32>" in str(m)


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_every_example_dumps_small(name):
    code, out = run_main("--example", name, "--args", EXAMPLES[name].small_args)
    assert code == 0, out
    assert "0 graph breaks" in out
    assert modules_of(out)


def test_passes_lists_the_pipeline_in_order():
    code, out = run_main("--passes")
    assert code == 0
    names = re.findall(r"^\s+\d+\. (\S+)", out, re.M)
    tensor = [p.name for p in tensor_passes()]
    assert names == ["keep-flags", "remat"] + tensor + [
        "cover-products", "sink-concat", "annotate-layouts", "lower-to-loop", "schedule", "share-kernels", "llvm-emit",
        "llvm-jit", "memory-plan"]
    assert names[:4] == ["keep-flags", "remat", "array-canonicalize", "decompose"]
    # the listing is the pipeline the compile path runs, pass objects and all
    assert [p.name for p in pipeline("cpu", ["C"])] == names[:-3]
    assert [p.name for p in pipeline("numpy")] == ["keep-flags", "remat"] + tensor
    assert "the numpy backend runs passes 1-8" in out


def test_passes_with_a_function_prints_ir_after_each_pass():
    code, out = run_main("--example", "softmax", "--args", "f32[4,8]", "--passes")
    assert code == 0
    headers = re.findall(r"^// -----// IR after (\S+) \((\d+\.\d+) ms\) //----- //$", out, re.M)
    assert [h[0] for h in headers] == [p.name for p in pipeline("cpu")]
    after_decompose = out.split("IR after decompose")[1].split("// -----//")[0]
    assert "math.exp" in after_decompose and 'array.ufunc "exp"' not in after_decompose
    # down to the kernel level: the loop level after lower-to-loop, the kernel level after
    # schedule
    after_lower = out.split("IR after lower-to-loop")[1].split("// -----//")[0]
    assert "loop.kernel" in after_lower and "array.ufunc" not in after_lower
    after_schedule = out.split("IR after schedule")[1].split("// -----//")[0]
    assert "kernel.kernel" in after_schedule and "loop.kernel" not in after_schedule
    times = re.search(r"^// stage times \(all graphs\): (.*)$", out, re.M).group(1)
    assert [t.rsplit(" ", 2)[0] for t in times.split(", ")] == \
        [p.name for p in pipeline("cpu")] + [n for n, _ in EMITTERS["cpu"]]


def test_time_passes_times_every_stage_without_printing_ir():
    code, out = run_main("--example", "softmax", "--args", "f32[4,8]", "--time-passes",
                         "--stage", "kernel")
    assert code == 0
    assert "IR after" not in out and "kernel.kernel" in out
    times = re.search(r"^// stage times \(all graphs\): (.*)$", out, re.M).group(1)
    stages = {t.rsplit(" ", 2)[0]: float(t.rsplit(" ", 2)[1]) for t in times.split(", ")}
    assert list(stages) == [p.name for p in pipeline("cpu")] + [n for n, _ in EMITTERS["cpu"]]
    assert all(v >= 0 for v in stages.values()) and stages["llvm-jit"] > 0


def test_print_between_passes_for_each_graph(user_file):
    code, out = run_main(f"{user_file}::breaks", "--args", "f32[8]", "--print-between-passes")
    assert code == 0
    assert out.count("IR after decompose") == 3
    assert "math.tanh" in out


# ---- errors: one line on stderr, exit 2 ---------------------------------------------

@pytest.mark.parametrize("argv, words", [
    (["nope.py::f"], "no such file: nope.py"),
    (["{file}::missing"],
     "has no 'missing' (defined there: Model, breaks, decorated, scale, shapes_mismatch)"),
    (["{file}"], "expected PATH.py::FUNCTION"),
    (["{file}::scale", "--args", "f32[4] q64"], "unknown dtype code 'q64'"),
    (["{file}::scale", "--args", "f32[4]"],
     "--args does not fit scale(x, s, f, n, flag, eps=0.001)"),
    (["{file}::shapes_mismatch", "--args", "f32[3] f32[4]"],
     "fails on these arguments in numpy itself: ValueError: operands could not be broadcast"),
    (["--example", "nope"], "unknown example 'nope' (built-in: layernorm"),
    (["--example", "softmax", "--stage", "gpu"],
     "unknown stage 'gpu'; the stages that exist so far: tensor, loop, kernel, llvm, asm, triton, all"),
    ([], "nothing to dump"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_errors_are_one_line(user_file, argv, words, capsys):
    try:
        code, out = run_main(*[a.replace("{file}", str(user_file)) for a in argv])
    except SystemExit as e:  # argparse's own errors
        code, out = e.code, ""
    err = capsys.readouterr().err
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("lowering.dump: error: "), err
    assert words in err, err


def test_cli_error_is_one_line_and_exit_2(user_file):
    p = run_cli(f"{user_file}::missing")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == (f"lowering.dump: error: {user_file} has no 'missing' (defined there: "
                        "Model, breaks, decorated, scale, shapes_mismatch)\n")


def test_error_in_the_user_file(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(x):\n    return x +\n")
    p = run_cli(f"{bad}::f", "--args", "f32[2]")
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert "importing" in p.stderr and "SyntaxError" in p.stderr
    boom = tmp_path / "boom.py"
    boom.write_text("raise RuntimeError('at import')\n")
    p = run_cli(f"{boom}::f")
    assert p.returncode == 2 and "RuntimeError: at import" in p.stderr


def test_help_documents_the_spec_and_stages():
    p = run_cli("--help")
    assert p.returncode == 0
    for words in ("f32[4096,4096]", "int:3", "bool:true", "f16 f32 f64 i8 i16 i32 i64 u8 bool",
                  "--print-between-passes", "stages (--stage)", "tensor", "layernorm", "rmsnorm"):
        assert words in p.stdout, words


def test_cli_output_is_what_xdsl_opt_reads(tmp_path):
    p = run_cli("--example", "rmsnorm", "--args", "f32[8,16] f32[16]")
    assert p.returncode == 0
    f = tmp_path / "rmsnorm.mlir"
    f.write_text(p.stdout)
    opt = Path(sys.executable).parent / "xdsl-opt"
    q = subprocess.run([str(opt), "-p", "decompose", str(f)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONWARNINGS="ignore"), timeout=120)
    assert q.returncode == 0, q.stderr
    assert "math.sqrt" in q.stdout and 'array.ufunc "sqrt"' not in q.stdout


@pytest.mark.parametrize("stage, needle", [
    ("loop", "loop.kernel"), ("kernel", "kernel.kernel"), ("llvm", "define i32"),
    ("asm", "ret"),
])
def test_lower_stages_print(stage, needle):
    code, out = run_main("--example", "softmax", "--args", "f32[8,40]", "--stage", stage)
    assert code == 0, out
    assert needle in out
    if stage in ("loop", "kernel"):  # one fused kernel: max, exp-sum and the division
        assert out.count(f"{stage}.kernel \"") == 1
        modules_of(out)  # parses back


def test_stage_all_prints_every_level_in_order():
    code, out = run_main("--example", "layernorm", "--args", "f32[4,33] f32[33] f32[33]",
                         "--stage", "all")
    assert code == 0, out
    marks = [out.index(m) for m in ("array.reduce", "// -----// loop level", "// -----// kernel level",
                                    "// -----// llvm level", "// -----// asm level")]
    assert marks == sorted(marks)


def test_grad_dump_shows_joint_forward_backward_and_saved_bytes(tmp_path):
    p = tmp_path / "loss.py"
    p.write_text("import numpy as np\n"
                 "def loss(X, W1, b1, W2, b2):\n"
                 "    h = np.maximum(X @ W1 + b1, 0.0)\n"
                 "    return ((h @ W2 + b2) ** 2).sum()\n")
    code, out = run_main(f"{p}::loss", "--args", "f32[8,16] f32[16,32] f32[32] f32[32,4] f32[4]",
                         "--grad", "--memory-budget", "0.5")
    assert code == 0
    assert "joint forward+backward" in out and "{bwd}" in out
    for name in ("save_all", "min_cut", "memory_budget=0.5"):
        assert f"// -----// {name}" in out
    m = re.search(r"saved bytes per strategy: save_all (\d+), min_cut (\d+), "
                  r"memory_budget=0\.5 -> \w+ (\d+)", out)
    assert m, out[-2000:]
    save_all, min_cut, budget = map(int, m.groups())
    assert 0 < min_cut <= save_all and budget <= 0.5 * save_all
    # each forward and backward function parses back and verifies
    funcs = re.findall(r"// -----// [^\n]*(?:forward|backward) //----- //\n(builtin\.module \{.*?\n\})\n",
                       out, re.S)
    assert len(funcs) == 6
    for text in funcs:
        Parser(context(), text).parse_module().verify()


def test_grad_dump_needs_a_float_argument_and_budget_needs_grad():
    code, _ = run_main("--example", "mlp", "--memory-budget", "0.5")
    assert code == 2


def test_grad_dump_refuses_a_non_scalar_function_and_a_stage(capsys):
    code, _ = run_main("--example", "softmax", "--args", "f32[4,8]", "--grad")
    assert code == 2
    assert "must return a scalar, got (4, 8)" in capsys.readouterr().err
    code, _ = run_main("--example", "layernorm", "--grad", "--stage", "kernel")
    assert code == 2
    assert "--stage does not apply" in capsys.readouterr().err
