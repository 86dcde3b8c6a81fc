"""`python -m lowering.dump`: print the IR that `lowering` captures for a function.

    python -m lowering.dump model.py::layernorm --args "f32[4096,4096] f32[4096] f32[4096]"
    python -m lowering.dump --example softmax
    python -m lowering.dump --passes                     # the pipeline, in order
    python -m lowering.dump --example gelu --passes      # IR after each pass, timed
    python -m lowering.dump --example gelu --time-passes # every stage's time

The output is MLIR text that xDSL parses back: each captured graph is one
`builtin.module`; graphs are separated by `// -----` lines (so `xdsl-opt
--split-input-file` takes the whole dump) and everything else — the call, the
graph breaks and their reasons, the guards — is `//` comments.

Inputs are built from an argument spec (see ARGS_HELP), deterministically from
a seed, and the function really runs on them: capture runs what it captured
(the lazy-tensor way), so what you see is what a call with such arguments
compiles. Mistakes in the file, the function name or the spec are one line on
stderr and exit status 2."""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from dialects.dtypes import BFLOAT16, is_float

ARGS_HELP = """\
argument spec (--args): one item per argument, in order, separated by spaces:
  f32[4096,4096]   an array: dtype code, then the shape in brackets
  f32[] or f32     a 0-d array
  float            a Python float (seeded random); float:1e-5 a given value
  int:3            a Python int, specialized (compiled in as a constant, guarded)
  bool:true        a Python bool (true/false), specialized
  name=SPEC        a keyword argument, e.g. eps=float:1e-6
dtype codes: f16 bf16 f32 f64 i8 i16 i32 i64 u8 bool
values: floats are standard normal, integers are in [0, 10) (so they can index
any axis of length >= 10), bools are fair coin flips; all from --seed (default
0), so two runs see the same inputs."""

STAGES = {
    "tensor": "the tensor level: each captured graph is a func.func of value-semantics "
              "`array` ops (after `decompose`, also upstream arith/math on tensors)",
    "loop": "the loop level (after the tensor passes and lower-to-loop): fused "
            "`loop.kernel`s over memref buffers, loads/stores through affine index maps, "
            "`loop.extern` calls (BLAS matmul, numpy)",
    "kernel": "the kernel level (after `schedule`): `kernel.kernel`s with vector width, "
              "unroll, thread split and reduction strategy decided for this CPU",
    "llvm": "the LLVM IR the CPU backend emits (before LLVM's -O3)",
    "asm": "the machine code for this CPU (after LLVM -O3)",
    "triton": "the Triton source the GPU emitter generates from the kernel level "
              "(lowering.codegen.triton_kernel): one @triton.jit function per kernel and its "
              "launch; the emitter reads the kernels' structure, not the CPU schedule's "
              "vector widths and threads",
    "all": "every stage above, in order",
}
LOWER_STAGES = ("loop", "kernel", "llvm", "asm", "triton")

DTYPE_CODES: dict[str, np.dtype] = {
    "f16": np.dtype(np.float16), "bf16": BFLOAT16, "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i8": np.dtype(np.int8), "i16": np.dtype(np.int16), "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64), "u8": np.dtype(np.uint8), "bool": np.dtype(np.bool_),
}
_CODE_OF = {v: k for k, v in DTYPE_CODES.items()}
MAX_INPUT_BYTES = 8 << 30


class UsageError(Exception):
    """A mistake in what the user asked for: one line on stderr, exit 2."""


# ---- argument specs ---------------------------------------------------------------

@dataclass(frozen=True)
class ArgSpec:
    kind: str  # "array" | "float" | "int" | "bool"
    dtype: np.dtype | None = None
    shape: tuple[int, ...] = ()
    value: Any = None  # for scalars given a value
    keyword: str | None = None

    def __str__(self) -> str:
        if self.kind == "array":
            assert self.dtype is not None
            return f"{_CODE_OF[self.dtype]}[{','.join(map(str, self.shape))}]"
        if self.value is None:
            return self.kind
        v = str(self.value).lower() if self.kind == "bool" else repr(self.value)
        return f"{self.kind}:{v}"


def _split_items(text: str) -> list[str]:
    """Split on whitespace outside brackets, so `f32[4096, 4096]` is one item."""
    items, cur, depth = [], [], 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"bad argument spec {text!r}: unbalanced ']'")
        if ch.isspace() and depth == 0:
            if cur:
                items.append("".join(cur))
                cur = []
            continue
        cur.append(ch)
    if depth:
        raise UsageError(f"bad argument spec {text!r}: unclosed '['")
    if cur:
        items.append("".join(cur))
    return items


def parse_item(item: str) -> ArgSpec:
    keyword = None
    m = re.fullmatch(r"([A-Za-z_]\w*)=(.*)", item)
    if m:
        keyword, item = m.group(1), m.group(2)
    spec = _parse_value_spec(item)
    return ArgSpec(spec.kind, spec.dtype, spec.shape, spec.value, keyword)


def _parse_value_spec(item: str) -> ArgSpec:
    def bad(why: str) -> UsageError:
        return UsageError(f"bad argument spec {item!r}: {why}")

    head, colon, val = item.partition(":")
    if colon:
        if head == "float":
            try:
                return ArgSpec("float", value=float(val))
            except ValueError:
                raise bad(f"{val!r} is not a float") from None
        if head == "int":
            try:
                return ArgSpec("int", value=int(val, 0))
            except ValueError:
                raise bad(f"{val!r} is not an integer") from None
        if head == "bool":
            if val.lower() not in ("true", "false"):
                raise bad("a bool is bool:true or bool:false")
            return ArgSpec("bool", value=val.lower() == "true")
        raise bad("only float, int and bool take a ':value'")
    if item == "float":
        return ArgSpec("float")
    if item == "int":
        raise bad("an int is specialized, so it needs a value, e.g. int:3")
    m = re.fullmatch(r"(\w+)(?:\[([^\]]*)\])?", item)
    if not m:
        raise bad("expected DTYPE[d0,d1,...], float, int:N or bool:true")
    code, dims = m.group(1), m.group(2)
    if code not in DTYPE_CODES:
        raise bad(f"unknown dtype code {code!r} (known: {' '.join(DTYPE_CODES)})")
    shape: tuple[int, ...] = ()
    if dims is not None and dims.strip():
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            raise bad(f"shape [{dims}] must be comma-separated integers") from None
        if any(d < 0 for d in shape):
            raise bad("negative dimension")
    dtype = DTYPE_CODES[code]
    if int(np.prod(shape, dtype=np.float64)) * dtype.itemsize > MAX_INPUT_BYTES:
        raise bad(f"more than {MAX_INPUT_BYTES >> 30} GiB")
    return ArgSpec("array", dtype, shape)


def parse_spec(text: str) -> list[ArgSpec]:
    specs = [parse_item(item) for item in _split_items(text)]
    seen: set[str] = set()
    for s in specs:
        if s.keyword is not None:
            if s.keyword in seen:
                raise UsageError(f"bad argument spec: keyword {s.keyword!r} given twice")
            seen.add(s.keyword)
        elif seen:
            raise UsageError("bad argument spec: a positional item follows a keyword item")
    return specs


def make_value(spec: ArgSpec, rng: np.random.Generator) -> Any:
    if spec.kind == "float":
        return float(rng.standard_normal()) if spec.value is None else spec.value
    if spec.kind in ("int", "bool"):
        return spec.value
    dt = spec.dtype
    assert dt is not None
    if is_float(dt):
        gen = np.float32 if dt in (np.float16, BFLOAT16) else dt.type
        return np.asarray(rng.standard_normal(spec.shape, dtype=gen), dtype=dt)
    if dt.kind == "b":
        return rng.random(spec.shape) < 0.5
    return rng.integers(0, 10, size=spec.shape, dtype=dt)


def make_inputs(spec: str | Sequence[ArgSpec], seed: int = 0) -> tuple[list, dict]:
    """(args, kwargs) for a spec: the same values for the same spec and seed."""
    specs = parse_spec(spec) if isinstance(spec, str) else list(spec)
    rng = np.random.default_rng(seed)
    args, kwargs = [], {}
    for s in specs:
        v = make_value(s, rng)
        if s.keyword is None:
            args.append(v)
        else:
            kwargs[s.keyword] = v
    return args, kwargs


# ---- the function ---------------------------------------------------------------

def load_function(target: str) -> tuple[Callable, str]:
    """`PATH.py::NAME` (NAME may be dotted: `Model.forward`) -> (function, NAME)."""
    path, sep, name = target.rpartition("::")
    if not sep or not path or not name:
        raise UsageError(f"expected PATH.py::FUNCTION, got {target!r}")
    if not os.path.isfile(path):
        raise UsageError(f"no such file: {path}")
    mod_name = "_lowering_dump_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {path} (not a Python file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except SystemExit as e:
        raise UsageError(f"importing {path} called exit({e.code})") from None
    except BaseException as e:  # noqa: BLE001  (any error in the user's file)
        if isinstance(e, KeyboardInterrupt):
            raise
        raise UsageError(f"importing {path} failed: {_one_line(e)}") from None
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            funcs = sorted(k for k, v in vars(module).items()
                           if callable(v) and getattr(v, "__module__", None) == mod_name)
            hint = f" (defined there: {', '.join(funcs)})" if funcs else ""
            raise UsageError(f"{path} has no {name!r}{hint}")
        obj = getattr(obj, part)
    from .api import CompiledFunction

    if isinstance(obj, CompiledFunction):
        obj = obj.fn
    if not callable(obj):
        raise UsageError(f"{path}::{name} is a {type(obj).__name__}, not a function")
    return obj, name


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: " + " ".join(str(e).split())


def _bind(fn: Callable, specs: list[ArgSpec], label: str) -> list[str]:
    """Check the spec against fn's signature; the parameter name of each item."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return [s.keyword or f"arg{i}" for i, s in enumerate(specs)]
    pos = [object()] * sum(1 for s in specs if s.keyword is None)
    kw = {s.keyword: object() for s in specs if s.keyword is not None}
    try:
        bound = sig.bind(*pos, **kw)
    except TypeError as e:
        raise UsageError(f"--args does not fit {label}{sig}: {e}") from None
    names: list[str] = []
    for pname, val in bound.arguments.items():
        p = sig.parameters[pname]
        if p.kind is p.VAR_POSITIONAL:
            names.extend(f"{pname}[{i}]" for i in range(len(val)))
        elif p.kind is p.VAR_KEYWORD:
            names.extend(val)
        else:
            names.append(pname)
    return names


# ---- capture and printing -------------------------------------------------------

@dataclass
class Dump:
    """What one dump captured: the explain report and the parsed graphs."""

    title: str
    report: Any  # lowering.explain.ExplainOutput
    modules: list  # xdsl ModuleOp per graph, parsed back from the report's text


def capture(fn: Callable, specs: list[ArgSpec], seed: int = 0, label: str | None = None,
            dynamic=None) -> Dump:
    """Trace fn on inputs built from specs; `lowering.explain` reports it."""
    from xdsl.parser import Parser

    from .explain import explain
    from .pipeline import context

    label = label or getattr(fn, "__name__", "fn")
    names = _bind(fn, specs, label)
    title = f"{label}(" + ", ".join(f"{n}: {s}" for n, s in zip(names, specs)) + ")"
    args, kwargs = make_inputs(specs, seed)
    try:
        report = explain(fn, dynamic=dynamic)(*args, **kwargs)
    except UsageError:
        raise
    except Exception as e:
        # numpy's own error on these inputs is the user's (a shape that does not
        # fit, say); any other is a compiler bug and keeps its traceback.
        args, kwargs = make_inputs(specs, seed)
        try:
            fn(*args, **kwargs)
        except Exception as eager:
            raise UsageError(f"{label} fails on these arguments in numpy itself: "
                             f"{_one_line(eager)}") from None
        raise RuntimeError(f"lowering failed to capture {title} (numpy runs it fine): "
                           f"{_one_line(e)}") from e
    ctx = context()
    modules = []
    for i, text in enumerate(report.graphs):
        try:
            modules.append(Parser(ctx, text).parse_module())
        except Exception as e:  # printing and parsing must round-trip: a dialect bug
            raise RuntimeError(f"graph {i} of {title} does not parse back from its own "
                               f"printed text:\n{text}") from e
    return Dump(title, report, modules)


def _where(filename: str | None, lineno: int | None) -> str:
    if filename is None:
        return "<unknown>"
    rel = os.path.relpath(filename)
    return f"{filename if rel.startswith('..') else rel}:{lineno}"


def print_header(d: Dump, stage: str, out: TextIO) -> None:
    r = d.report
    out.write(f"// lowering.dump {d.title} --stage {stage}\n")
    out.write(f"// {r.graph_count} graph{'s' * (r.graph_count != 1)}, "
              f"{r.graph_break_count} graph break{'s' * (r.graph_break_count != 1)}\n")
    for i, b in enumerate(r.breaks, 1):
        out.write(f"//   break {i}: {b.reason}\n//     at {_where(b.filename, b.lineno)}\n")
    if r.guards:
        out.write("// guards:\n")
        out.writelines(f"//   {g}\n" for g in r.guards)
    if r.sizes == "":
        out.write("// sizes: symbolic (s0, s1, ...): one program for every size the guards "
                  "admit;\n// the IR prints the sizes it was traced with (the kernel level: "
                  "the parameters\n// and dynamic extents that take each call's)\n")
    elif r.sizes is not None:
        out.write(f"// sizes: as traced (not for other sizes: {r.sizes})\n")
    if r.graph_count == 0:
        out.write("// no graph was captured: the function ran eagerly\n")


def print_graphs(d: Dump, out: TextIO, between: Callable[[int, Any], None] | None = None) -> None:
    """Each graph as MLIR text, `// -----` between graphs, each graph break's
    reason where it happened. `between(i, module)` prints extra per graph."""
    r = d.report
    aligned = len(r.breaks) == len(d.modules) - 1
    for i, module in enumerate(d.modules):
        if i:
            out.write("// -----\n")
            if aligned:
                b = r.breaks[i - 1]
                out.write(f"// graph break {i}: {b.reason} at {_where(b.filename, b.lineno)}\n")
        if len(d.modules) > 1:
            out.write(f"// graph {i}\n")
        out.write(f"{str(module)}\n")
        if between is not None:
            between(i, module)


def print_lower_stages(d: Dump, out: TextIO, which: Sequence[str]) -> None:
    """The levels below the tensor level for each graph (inputs C-contiguous,
    as the dump builds them), as the CPU backend's pipeline leaves them. A
    joint forward+backward graph is lowered whole, uncut (`pipeline.lower`:
    the text process replay records); `--print-between-passes` shows the
    cut and each half's levels, as a compile runs them."""
    from .backends.cpu_backend import emitted
    from .pipeline import LEVEL_AFTER, lower

    for i, module in enumerate(d.modules):
        n = len(next(iter(module.ops)).body.blocks[0].args)  # type: ignore[attr-defined]
        texts: dict[str, str] = {}
        levels = d.report.kernel_levels
        if levels and i < len(levels) and levels[i] and set(which) == {"kernel"}:
            # a program for many sizes: its kernel level as compiled
            out.write(f"// -----// kernel level{f' graph {i}' if len(d.modules) > 1 else ''} "
                      f"(for many sizes) //----- //\n")
            out.write(levels[i].rstrip("\n") + "\n")
            continue

        def keep(p, m, dt: float) -> None:
            if p.name in LEVEL_AFTER:
                texts[LEVEL_AFTER[p.name]] = str(m)

        final, _ = lower(module, "cpu", ["C"] * n, keep)
        if {"llvm", "asm"} & set(which):
            texts.update(emitted(final))
        if "triton" in which:
            from .codegen.triton_kernel import module_text

            # (the GPU backend's own kernel level: its reductions split, its
            # kernels computing float16 and bfloat16 values)
            texts["triton"] = module_text(lower(module, "gpu", ["C"] * n)[0])
        for st in which:
            graph = f" graph {i}" if len(d.modules) > 1 else ""
            out.write(f"// -----// {st} level{graph} //----- //\n")
            out.write(texts[st].rstrip("\n") + "\n")


def pipeline_listing(backend: str = "cpu") -> list[tuple[str, str]]:
    """(stage name, where it lives) for every stage of `backend`, in order:
    the passes, then the emitter."""
    from .pipeline import EMITTERS, pipeline

    rows = [(p.name, f"{type(p).__module__}.{type(p).__name__}") for p in pipeline(backend)]
    return rows + list(EMITTERS[backend])


def print_pipeline(out: TextIO, prefix: str = "") -> None:
    from .pipeline import cut_passes, tensor_passes

    rows = pipeline_listing("cpu")
    w = max(len(n) for n, _ in rows)
    n_tensor = len(cut_passes()) + len(tensor_passes())
    out.write(f"{prefix}the pipeline (lowering.pipeline), in order, for the cpu backend:\n")
    for i, (name, where) in enumerate(rows, 1):
        if i == n_tensor + 1:
            out.write(f"{prefix}  -- below the tensor level --\n")
        out.write(f"{prefix}  {i:2}. {name.ljust(w)}  {where}\n")
    out.write(f"{prefix}the numpy backend runs passes 1-{n_tensor}, then its emitter "
              f"(lowering.backends.numpy_backend)\n")


def run_pipeline_printing(module, out: TextIO, timings: dict[str, float],
                          show_ir: bool = True, budget: float | None = None) -> None:
    """Run the CPU backend's pipeline on a copy of module as a compile runs
    it, printing the IR after each pass (verified), down to the kernel
    level, with the time the pass took; then time each emitter stage. A
    joint function comes out of `remat` as @main_forward and @main_backward
    (partitioned by the configured strategy, under `budget` if given), and
    each half goes below the tensor level by itself, the backward's saved
    values C-contiguous as the forward allocates them."""
    from passes.remat import read_cut

    from .config import config
    from .pipeline import emit, lower_below, tensor_stage

    def after(p, m, dt: float, half: str = "") -> None:
        timings[p.name] = timings.get(p.name, 0.0) + dt
        if show_ir:
            out.write(f"// -----// IR after {p.name}{half} ({dt * 1e3:.2f} ms) //----- //\n")
            out.write(f"{str(m)}\n")
        try:
            m.verify()
        except Exception as e:
            raise RuntimeError(f"pass {p.name} produced IR that does not verify: "
                               f"{_one_line(e)}") from e

    def emitted(name: str, dt: float) -> None:
        timings[name] = timings.get(name, 0.0) + dt

    n = len(next(iter(module.ops)).body.blocks[0].args)  # type: ignore[attr-defined]
    tensor = tensor_stage(module, (config.partition, budget), after)
    cut = read_cut(tensor)
    if cut is None:
        halves = [(tensor, n, "")]
    else:
        halves = [(cut.forward, n, " of the forward"),
                  (cut.backward, n + len(cut.saved), " of the backward")]
    for m, n_args, half in halves:
        final, report = lower_below(m, "cpu", ["C"] * n_args,
                                    lambda p, m, dt, half=half: after(p, m, dt, half))
        emit(final, "cpu", report, emitted, reuse=False)  # (every stage runs: timed)


def _differentiated(fn: Callable, specs: list[ArgSpec], seed: int, label: str) -> Callable:
    """value_and_grad of fn with respect to its floating-point arguments; fn
    must return a scalar (as `lowering.grad` requires)."""
    import functools

    from . import pytree
    from .autodiff import value_and_grad

    @functools.wraps(fn)
    def scalar(*a, **k):
        out = fn(*a, **k)
        if np.ndim(out) != 0 or isinstance(out, (tuple, list, dict)):
            shape = getattr(out, "shape", type(out).__name__)
            raise UsageError(f"--grad: {label} must return a scalar, got {shape}")
        return out

    args, _ = make_inputs(specs, seed)
    nums = tuple(i for i, a in enumerate(args)
                 if isinstance(a, float) or (isinstance(a, (np.ndarray, np.generic))
                                             and is_float(a.dtype)))
    if not nums:
        raise UsageError(f"--grad: {label} has no floating-point argument to differentiate")
    return value_and_grad(scalar, argnums=nums)


def print_grad(d: Dump, out: TextIO, budget: float | None) -> None:
    """The joint function, then per strategy the forward and backward
    functions the `remat` pass makes and what crosses between them."""
    from passes.remat import Remat, read_cut

    from .pipeline import context

    for i, module in enumerate(d.modules):
        graph = f" graph {i}" if len(d.modules) > 1 else ""
        out.write(f"// -----// joint forward+backward{graph} (backward ops marked {{bwd}}) //----- //\n")
        out.write(f"{str(module)}\n")
        totals = []
        plans = [("save_all", None), ("min_cut", None)]
        if budget is not None:
            plans.append(("min_cut", budget))
        for strategy, b in plans:
            cut = module.clone()
            Remat(strategy, b).apply(context(), cut)
            p = read_cut(cut)
            if p is None:
                out.write("// no backward ops: nothing to partition\n")
                break
            name = strategy if b is None else f"memory_budget={b} -> {p.strategy}"
            out.write(f"// -----// {name}: forward{graph} //----- //\n{str(p.forward)}\n")
            out.write(f"// -----// {name}: backward{graph} //----- //\n{str(p.backward)}\n")
            out.write("// " + p.describe().replace("\n", "\n// ") + "\n")
            totals.append((name, p.saved_bytes))
        if totals:
            out.write("// saved bytes per strategy: " +
                      ", ".join(f"{n} {v}" for n, v in totals) + "\n")


# ---- command line ---------------------------------------------------------------

class _ArgParser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse prints usage too)
        self.exit(2, f"lowering.dump: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    from .examples import EXAMPLES

    ex = "\n".join(f"  {e.name:16} {e.about}\n  {'':16} default --args \"{e.args}\""
                   for e in EXAMPLES.values())
    stages = "\n".join(textwrap.fill(v, 79, initial_indent=f"  {k:16} ",
                                      subsequent_indent=" " * 19) for k, v in STAGES.items())
    p = _ArgParser(
        prog="python -m lowering.dump",
        description="Print the IR that lowering captures for a numpy function.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(f"{ARGS_HELP}\n\nstages (--stage):\n{stages}\n\n"
                f"built-in examples (--example):\n{ex}"),
    )
    p.add_argument("target", nargs="?", help="PATH.py::FUNCTION (FUNCTION may be dotted)")
    p.add_argument("--args", dest="spec", metavar="SPEC",
                   help="argument spec, e.g. \"f32[4096,4096] f32[4096] int:3\" (see below)")
    p.add_argument("--example", metavar="NAME",
                   help="dump a built-in example (see below); --args overrides its sizes")
    p.add_argument("--stage", default="tensor", metavar="STAGE",
                   help="which level to print (default: tensor)")
    p.add_argument("--passes", action="store_true",
                   help="list the pipeline's passes in order; with a function, also print "
                        "the IR after each pass and the time it took")
    p.add_argument("--print-between-passes", action="store_true",
                   help="print the IR after each pass, down to the kernel level (with its "
                        "time)")
    p.add_argument("--time-passes", action="store_true",
                   help="time every stage (each pass, and the emitter: LLVM IR, -O3, JIT) "
                        "and print the times")
    p.add_argument("--seed", type=int, default=0, help="seed for the inputs (default 0)")
    p.add_argument("--dynamic", action="store_true",
                   help="compile with dynamic=True (size symbols for every dim but those of "
                        "size 0 or 1) and show the symbols, their relations and the guards")
    p.add_argument("--grad", action="store_true",
                   help="differentiate the function (value_and_grad with respect to every "
                        "floating-point argument; it must return a scalar) and print the joint "
                        "function, the forward and backward functions of each partition "
                        "strategy, the saved values and their bytes")
    p.add_argument("--memory-budget", type=float, default=None, metavar="FRACTION",
                   help="with --grad: also partition under this memory budget (a fraction of "
                        "save_all's bytes)")
    return p


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out if out is not None else sys.stdout
    ns = _parser().parse_args(argv)
    try:
        return _run(ns, out)
    except UsageError as e:
        sys.stderr.write(f"lowering.dump: error: {e}\n")
        return 2


def _run(ns: argparse.Namespace, out: TextIO) -> int:
    from .examples import EXAMPLES

    if ns.stage not in STAGES:
        raise UsageError(f"unknown stage {ns.stage!r}; the stages that exist so far: "
                         f"{', '.join(STAGES)}")
    if ns.target and ns.example:
        raise UsageError("give either PATH.py::FUNCTION or --example, not both")
    if ns.example:
        if ns.example not in EXAMPLES:
            raise UsageError(f"unknown example {ns.example!r} (built-in: {', '.join(EXAMPLES)})")
        e = EXAMPLES[ns.example]
        fn, label, spec_text = e.fn, e.name, ns.spec if ns.spec is not None else e.args
    elif ns.target:
        fn, label = load_function(ns.target)
        spec_text = ns.spec if ns.spec is not None else ""
    else:
        if ns.passes:
            print_pipeline(out)
            return 0
        raise UsageError("nothing to dump: give PATH.py::FUNCTION or --example NAME "
                         "(or --passes alone to list the pipeline)")
    specs = parse_spec(spec_text)
    if ns.grad and ns.stage != "tensor":
        raise UsageError("--grad prints the tensor level (the joint function and its "
                         "partitions); --stage does not apply to it")
    if ns.grad:
        fn = _differentiated(fn, specs, ns.seed, label)
    elif ns.memory_budget is not None:
        raise UsageError("--memory-budget needs --grad")
    d = capture(fn, specs, ns.seed, label, dynamic=True if ns.dynamic else None)
    print_header(d, ns.stage, out)
    if ns.passes:
        print_pipeline(out, prefix="// ")
    timings: dict[str, float] = {}
    between = None
    if ns.passes or ns.print_between_passes or ns.time_passes:
        show_ir = ns.passes or ns.print_between_passes

        def between(i: int, module) -> None:
            run_pipeline_printing(module, out, timings, show_ir, ns.memory_budget)
    if ns.grad:
        print_grad(d, out, ns.memory_budget)
        for i, module in enumerate(d.modules if between is not None else ()):
            between(i, module)
    elif ns.stage in ("tensor", "all"):
        print_graphs(d, out, between)
    if ns.stage != "tensor":  # (never with --grad)
        print_lower_stages(d, out, LOWER_STAGES if ns.stage == "all" else (ns.stage,))
    if ns.stage not in ("tensor", "all") and between is not None:
        for i, module in enumerate(d.modules):
            between(i, module)
    if timings:
        out.write("// stage times (all graphs): " +
                  ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in timings.items()) + "\n")
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except BrokenPipeError:  # `... | head`
        code = 0
    sys.exit(code)
