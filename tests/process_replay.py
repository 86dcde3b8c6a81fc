"""Process replay: the same programs must give the same kernels.

A guard for refactors of the compiler that are meant to change nothing (the
idea is tinygrad's "process replay"). For a fixed set of programs — every
built-in example of `python -m lowering.dump --example` and the benchmark
workloads of `bench/workloads.py`, all at small sizes — it records the
kernel-level IR (after `schedule`) and the LLVM IR the CPU backend emits
(before LLVM's -O3), exactly as `lowering.dump --stage kernel|llvm` prints
them, in `tests/process_replay_baseline.json`; `check` recomputes them and
prints a unified diff for every program whose text changed.

    .venv/bin/python -m tests.process_replay record    # write the baseline
    .venv/bin/python -m tests.process_replay check     # exit 1 if a kernel changed
    .venv/bin/python -m tests.process_replay check --only W1,softmax

A change that is meant to change kernels is recorded again (`record`) and the
baseline's diff reviewed in the same commit.

The target is pinned so that the text does not depend on the machine: the
environment below (vector width, kernel threads, the forward/backward
partition, the backend, the table of numpy's IEEE flags at special inputs)
is set before `lowering` is imported, and the
baseline's header records it; a target that differs from the header anyway
(the knobs were not applied) is a failure, not a pass.
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# the project's own knobs (lowering/config.py, runtime/cpu.py), read when
# lowering is imported: main() sets them first (importing this module does
# not, so that a test session importing it keeps its own environment)
# (the on-disk compile cache off: every program compiled here, none read back;
# the cost table a copy of one shipped table, so that a calibration — the
# user's or a new shipped one — changes no recorded kernel; numpy's IEEE flags
# at special inputs, which the kernels' flag checks are built from and which
# depend on the CPU numpy runs on, a fixed table: lowering/codegen/numpy_fpe.py)
COST_TABLE = Path(__file__).with_name("process_replay_cost_table.json")
NUMPY_FPE = Path(__file__).with_name("process_replay_numpy_fpe.json")
PINNED_ENV = {"LOWERING_VECTOR_BITS": "256", "LOWERING_THREADS": "4",
              "LOWERING_PARTITION": "min_cut", "LOWERING_BACKEND": "cpu", "LOWERING_CACHE": "0",
              "LOWERING_COST_TABLE": str(COST_TABLE), "LOWERING_NUMPY_FPE": str(NUMPY_FPE)}

BASELINE = Path(__file__).with_name("process_replay_baseline.json")
STAGES = ("kernel", "llvm")


@dataclass(frozen=True)
class Program:
    name: str
    fn: Callable
    spec: str  # lowering.dump's argument spec
    seed: int = 0  # lowering.dump --seed: the inputs


def programs() -> dict[str, Program]:
    """The recorded programs, by name: the dump's examples, then the workloads."""
    import lowering
    from bench import models
    from bench import workloads as W
    from lowering.examples import EXAMPLES

    small = {  # the examples at their own small sizes, mlp a little smaller still
        "mlp": "f32[16,32] f32[32,64] f32[64] f32[64,10] f32[10]",
    }
    out = [Program(e.name, e.fn, small.get(e.name, e.small_args)) for e in EXAMPLES.values()]
    mlp = "f32[16,32] i64[16] f32[32,64] f32[64] f32[64,10] f32[10]"  # labels in [0, 10)
    out += [
        Program("W1", W.layernorm, "f32[64,256] f32[256] f32[256]"),
        Program("W2", W.softmax, "f32[64,256]"),
        Program("W3", W.bias_gelu, "f32[64,256] f32[256]"),
        Program("W4", W.rmsnorm, "f32[64,256] f32[256]"),
        Program("W5", W.mlp_step, mlp),
        # W8 as the benchmark runs it in lowering (bench/peers/lowering_peer.py)
        Program("W8", lowering.value_and_grad(models.mlp_loss, argnums=(2, 3, 4, 5)), mlp),
        Program("W6", W.axpb, "f32[16]"),
        Program("W7", W.black_scholes, "f32[4096] f32[4096] f32[4096]"),
        # branch on the sign of sum(2x + 1): seed 0 takes the tanh side (R1's),
        # seed 97 the `y * 3` side (R2's); _check_branch says so
        Program("R1", W.branch, "f32[16]", seed=0),
        Program("R2", W.branch, "f32[16]", seed=97),
        # 200 iterations (the function's own constant), so 200 kernels: 8 columns
        # keep the baseline small (its LLVM text is half of the whole)
        Program("R3", W.row_fill, f"f32[{W.ROW_FILL_ROWS},8] f32[8]"),
    ]
    return {p.name: p for p in out}


def _check_branch(p: Program) -> None:
    """R1 and R2 must take the branch sides they stand for."""
    if p.name in ("R1", "R2"):
        from lowering.dump import make_inputs

        (x,), _ = make_inputs(p.spec, p.seed)
        if ((x * 2 + 1).sum() > 0) != (p.name == "R1"):
            raise RuntimeError(f"{p.name}: seed {p.seed} no longer takes its branch side")


def target() -> dict:
    """What the kernel level depends on besides the program."""
    from lowering.codegen import numpy_fpe
    from lowering.config import config
    from runtime import cpu

    return {"vector_bits": cpu.vector_bits(), "threads": cpu.THREADS,
            "parallel_threshold": cpu.parallel_threshold(),
            "array_offsets": list(cpu.ARRAY_OFFSETS),  # numpy's ABI, read by the LLVM IR
            "numpy_fpe": numpy_fpe.digest(),  # the flag checks' table
            "partition": config.partition, "backend": config.backend}


def render(p: Program) -> dict[str, str]:
    """stage -> text, as `lowering.dump --stage kernel|llvm` prints it below its header."""
    from lowering.dump import capture, parse_spec, print_lower_stages

    _check_branch(p)
    with warnings.catch_warnings():  # numpy's own, on random inputs (W7's log of T < 0)
        warnings.simplefilter("ignore", RuntimeWarning)
        d = capture(p.fn, parse_spec(p.spec), p.seed, p.name)
    buf = io.StringIO()
    print_lower_stages(d, buf, STAGES)
    # print_lower_stages writes per graph: "// -----// STAGE level[ graph i] //----- //"
    # and the text; each stage's text is its sections, in graph order
    texts = {s: [] for s in STAGES}
    stage = None
    for line in buf.getvalue().splitlines(keepends=True):
        if line.startswith("// -----// "):
            stage = line.split()[2]
        texts[stage].append(line)
    return {s: f"// {d.title}\n" + "".join(lines) for s, lines in texts.items()}


def compare(old: dict[str, str], new: dict[str, str], name: str) -> str:
    """A unified diff of one program's stages ('' when the same)."""
    out = []
    for s in sorted(set(old) | set(new)):
        a, b = old.get(s, ""), new.get(s, "")
        if a != b:
            out += difflib.unified_diff(a.splitlines(keepends=True), b.splitlines(keepends=True),
                                        f"baseline/{name}/{s}", f"current/{name}/{s}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)


def load(path: Path = BASELINE) -> dict:
    return json.loads(path.read_text())


def record(names: list[str] | None = None, path: Path = BASELINE) -> dict:
    """Render the programs and write the baseline (with --only: those entries)."""
    entries = load(path)["programs"] if names and path.exists() else {}
    for name, p in _select(names).items():
        entries[name] = {"spec": p.spec, "seed": p.seed, **render(p)}
    base = {"target": target(),
            "programs": {k: entries[k] for k in programs() if k in entries}}
    path.write_text(json.dumps(base, indent=1) + "\n")
    return base


def check(names: list[str] | None = None, path: Path = BASELINE,
          out=sys.stdout) -> int:
    """0: every program renders as recorded; 1: some changed (their diffs
    printed), or the target is not the baseline's (nothing compared)."""
    base = load(path)
    here, there = target(), base["target"]
    if here != there:
        why = ", ".join(f"{k} {there.get(k)} in the baseline, {here.get(k)} here"
                        for k in sorted(set(here) | set(there)) if here.get(k) != there.get(k))
        out.write(f"process replay FAILED, nothing was compared: the target differs ({why}); "
                  f"`python -m tests.process_replay` pins it before lowering is imported\n")
        return 1
    changed = []
    for name, p in _select(names).items():
        entry = base["programs"].get(name)
        if entry is None:
            out.write(f"{name}: not in the baseline (run `record`)\n")
            changed.append(name)
            continue
        if (entry["spec"], entry["seed"]) != (p.spec, p.seed):
            out.write(f"{name}: the baseline has {entry['spec']!r} seed {entry['seed']}, the "
                      f"program table {p.spec!r} seed {p.seed} (run `record`)\n")
            changed.append(name)
            continue
        diff = compare({s: entry[s] for s in STAGES}, render(p), name)
        if diff:
            out.write(diff)
            changed.append(name)
    total = len(_select(names))
    if changed:
        out.write(f"process replay: {len(changed)} of {total} programs changed: "
                  f"{', '.join(changed)}\n")
        return 1
    out.write(f"process replay: {total} programs, kernels unchanged\n")
    return 0


def _select(names: list[str] | None) -> dict[str, Program]:
    progs = programs()
    if not names:
        return progs
    unknown = [n for n in names if n not in progs]
    if unknown:
        raise SystemExit(f"process_replay: unknown program(s) {', '.join(unknown)} "
                         f"(known: {', '.join(progs)})")
    return {n: progs[n] for n in names}


def main(argv: list[str] | None = None) -> int:
    if "lowering" not in sys.modules:  # else target() shows what was not pinned
        os.environ.update(PINNED_ENV)
    ap = argparse.ArgumentParser(prog="python -m tests.process_replay",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("record", "check"))
    ap.add_argument("--only", metavar="NAME,...", help="only these programs")
    ap.add_argument("--baseline", type=Path, default=BASELINE)
    ns = ap.parse_args(argv)
    names = [n for n in ns.only.split(",") if n] if ns.only else None
    t0 = time.perf_counter()
    if ns.command == "record":
        base = record(names, ns.baseline)
        print(f"process replay: recorded {len(names or base['programs'])} programs "
              f"in {ns.baseline} ({time.perf_counter() - t0:.1f} s)")
        return 0
    code = check(names, ns.baseline)
    print(f"({time.perf_counter() - t0:.1f} s)")
    return code


if __name__ == "__main__":
    sys.exit(main())
