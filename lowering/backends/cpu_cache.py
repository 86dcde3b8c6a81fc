"""CPU programs kept on disk (`runtime/disk_cache.py`), so that a new process
runs a program compiled before without the passes or LLVM.

An entry is addressed by what the program depends on: the segment's IR
text, the backend, its inputs' layouts, the forward/backward partition, the
pipeline's passes with their options, the compiler's own source and the
versions of xdsl, llvmlite (and LLVM), numpy and Python, the target (CPU
name and features, vector width) and numpy's IEEE flags at the special
inputs where they depend on the CPU (`numpy_fpe.digest()`: the kernels'
flag checks are built from them). It holds the program's plan
(`cpu_backend.program_plan`: its steps as plain values, an extern numpy runs
as the MLIR text of its op) and its lowering report as JSON, and the object
code of every distinct kernel body, which the process links in
(`cpu.load_object`) instead of compiling.

A program whose entry is written compiles all its kernel bodies into the
object, those this process compiled before for other programs too, so that
the entry stands alone."""

from __future__ import annotations

import hashlib
import importlib
import itertools
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm
import numpy as np
import xdsl
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Region
from xdsl.parser import Parser

from dialects import loop as L
from dialects.context import context
from dialects.dtypes import to_text
from passes import cost_model
from runtime import cpu, disk_cache

from ..codegen import numpy_fpe
from . import cpu_backend as B

FORMAT = 2  # of the entry's metadata
PACKAGES = ("lowering", "passes", "dialects", "runtime")

_suspended = False
_ids = itertools.count()
_environment: dict | None = None


def suspend() -> None:
    """No entry read or written for the rest of the process: a compile-time
    setting the key does not name may have changed (`clear_programs`)."""
    global _suspended
    _suspended = True


def cache() -> disk_cache.DiskCache | None:
    """The process's cache when it is on."""
    if _suspended:
        return None
    c = disk_cache.current()
    return c if c.usable() else None


def source_digest() -> str:
    """sha256 of the compiler's own source files' names, sizes and
    modification times (every .py of its packages; what Python's own
    bytecode cache checks): a changed compiler never reads an entry an
    older one wrote."""
    h = hashlib.sha256()
    for pkg in PACKAGES:
        root = Path(importlib.import_module(pkg).__file__).parent  # type: ignore[arg-type]
        for path in sorted(root.rglob("*.py")):
            st = path.stat()
            h.update(f"{path.relative_to(root.parent)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def version(module) -> str:
    """A package's version without importlib.metadata (a lazy `__version__`,
    as xdsl's, imports it: ~60 ms): its dist-info directory's name."""
    v = getattr(module, "__version__", None)
    if isinstance(v, str):
        return v
    site = Path(module.__file__).parent.parent
    name = module.__name__
    found = sorted(p.name for p in site.glob(f"{name}-*.dist-info"))
    return found[-1] if found else f"? ({Path(module.__file__).parent})"


def environment() -> dict:
    """The compiler's and the target's part of every key (made once)."""
    global _environment
    if _environment is None:
        tm = cpu.target_machine()
        ours = getattr(sys.modules.get("lowering"), "__version__", "?")  # (imported: our caller)
        _environment = {
            "format": FORMAT, "source": source_digest(), "lowering": ours,
            "xdsl": version(xdsl), "llvmlite": version(llvmlite),
            "llvm": ".".join(map(str, llvm.llvm_version_info)), "numpy": version(np),
            "python": sys.version, "machine": platform.machine(), "triple": tm.triple,
            "cpu": llvm.get_host_cpu_name(), "features": llvm.get_host_cpu_features().flatten(),
            "array_offsets": list(cpu.ARRAY_OFFSETS),
            # numpy's flags at special inputs on this CPU, which the kernels'
            # flag checks are built from (another CPU's numpy: other kernels)
            "numpy_fpe": numpy_fpe.digest(),
        }
    return {**_environment, "vector_bits": cpu.vector_bits()}


def entry_key(ir: str, layouts, partition, passes: list[str]) -> str:
    return disk_cache.digest({"ir": ir, "backend": "cpu", "layouts": list(layouts),
                              "partition": list(partition), "passes": passes,
                              "costs": cost_model.digest(), **environment()})


@dataclass
class DiskEntry:
    """A program's place in the cache: `program` when the entry was there
    and valid, else `build` makes the program and writes the entry."""
    cache: disk_cache.DiskCache
    key: str
    program: B.CpuProgram | None = None

    def build(self, kernel_module: ModuleOp, report, stage=B._untimed) -> B.CpuProgram:
        """The program, each emitter stage under `stage(name)`; its entry written."""
        prog, meta, data = compile_entry(self.key, kernel_module, report, stage)
        self.cache.put(self.key, meta, data)
        return prog


def find(module: ModuleOp, key, layouts, partition, passes) -> DiskEntry | None:
    """The program's entry (its `program` set when found), or None when the
    cache is off. `key` is the program's in-process key (its IR: text, or a
    structural key — ops, operands, properties, attributes and types as
    xDSL's reprs, which name every parameter: its repr names the program
    as the printed IR does, ten times faster than printing a big module:
    0.1 s against 1.1 s for the 200x200 Seidel sweep's 13000 ops)."""
    c = cache()
    # (a program for many sizes, whose structural key ends with its symbols:
    # this process's only)
    if c is None or (isinstance(key, tuple) and key and key[-1]):
        return None
    ir = key if isinstance(key, str) else "structural " + repr(key)
    entry = DiskEntry(c, entry_key(ir, layouts, partition, [str(p.pipeline_pass_spec())
                                                            for p in passes]))
    found = c.get(entry.key)
    if found is not None:
        try:
            entry.program = load_program(entry.key, found)
        except Exception as e:  # (a valid checksum: written by a compiler with a bug)
            c.reject(entry.key, f"cannot rebuild its program: {e}")
    return entry


# ---- writing ---------------------------------------------------------------

def compile_entry(key: str, kernel_module: ModuleOp, report,
                  stage=B._untimed) -> tuple[B.CpuProgram, dict, bytes]:
    """The program of a kernel-level module, its kernels compiled to one
    object file and linked in, and the entry that rebuilds it: metadata, object."""
    plan, kernels, keys = B.program_plan(kernel_module)
    first: dict = {}
    for name, body in keys.items():
        first.setdefault(body, name)
    tag = key if cpu.loaded_object(key) is None else f"{key}#{next(_ids)}"
    prefix = f"c{hashlib.sha256(tag.encode()).hexdigest()[:16]}_"
    data, symbols, text = b"", {}, ""
    if first:
        ops = [kernels[n] for n in first.values()]
        with stage("llvm-emit"):
            text, emitted = B.emit_llvm(kernel_module, prefix, ops)
        try:
            with stage("llvm-jit"):  # (to an object file, linked below)
                data = cpu.compile_object(text)
        finally:
            for op, name in zip(ops, first.values()):
                op.sym_name = StringAttr(name)
        of_body = {body: prefix + name for body, name in first.items()}
        symbols = {name: of_body[body] for name, body in keys.items()}
    prog = link(tag, plan, symbols, keys, data, B.merged_report(report, kernel_module), text,
                stage)
    meta = {"plan": plan_json(plan), "symbols": symbols, "report": report_json(prog.report)}
    return prog, meta, data


def link(tag: str, plan: B.ProgramPlan, symbols: dict[str, str], keys: dict, data: bytes,
         report, llvm_ir: str = "", stage=B._untimed) -> B.CpuProgram:
    """The program, its kernels' functions from the object file `data`
    (loaded once per process, for the bodies not compiled in it yet)."""
    have = {name: cpu.compiled_kernel(body) for name, body in keys.items()}
    if any(a is None for a in have.values()):
        addrs = cpu.load_object(data, sorted(set(symbols.values())), tag)
        for name, body in keys.items():
            cpu.remember_kernel(body, addrs[symbols[name]])
            have[name] = cpu.compiled_kernel(body)
    return B.program(plan, have, report, llvm_ir, stage)  # type: ignore[arg-type]


def plan_json(plan: B.ProgramPlan) -> dict:
    steps: list = []
    for st in plan.steps:
        if isinstance(st, B.AllocStep):
            steps.append(["alloc", st.slot, list(st.shape), to_text(st.dtype)])
        elif isinstance(st, B.KernelPlan):
            steps.append(["kernel", st.name, st.body, list(st.bufs), st.work, st.threads,
                          list(st.params), [list(c) for c in st.checks], list(st.stores),
                          list(st.loads)])
        elif isinstance(st, B.BlasPlan):
            steps.append(["blas", st.routine, list(st.args), list(st.words), st.flops])
        else:
            steps.append(["extern", st.fn, list(st.args), st.n_inputs, list(st.transposed),
                          st.flops, None if st.op is None else extern_text(st.op)])
    return {"n_inputs": plan.n_inputs, "outputs": list(plan.outputs), "steps": steps,
            "written": sorted(plan.written)}


def extern_text(op: L.ExternOp) -> str:
    """An extern as a module of its own: a function of its buffers that runs it."""
    block = Block(arg_types=[b.type for b in op.buffers])
    clone = op.clone()
    for i, a in enumerate(block.args):
        clone.operands[i] = a
    block.add_op(clone)
    block.add_op(func.ReturnOp())
    f = func.FuncOp("extern", ([b.type for b in op.buffers], []), Region(block))
    return str(ModuleOp([f]))


def report_json(report) -> dict | None:
    if report is None:
        return None
    return {"kernels": [[name, list(ops)] for name, ops in report.kernels],
            "refused": list(report.refused), "paths": list(report.paths),
            "locations": list(report.locations)}


# ---- reading ---------------------------------------------------------------

def load_program(key: str, entry: disk_cache.Entry) -> B.CpuProgram:
    """The program an entry holds (ValueError, KeyError, TypeError: it holds none)."""
    meta = entry.meta
    plan = plan_from_json(meta["plan"])
    symbols = {str(k): str(v) for k, v in meta["symbols"].items()}
    # a loaded body is known by its entry and number (the kernels of this
    # entry share it, in this process, with no freshly compiled one)
    keys = {k.name: ("entry", key, k.body) for k in plan.steps if isinstance(k, B.KernelPlan)}
    if set(symbols) != set(keys):
        raise ValueError("its symbols are not its kernels")
    return link(key, plan, symbols, keys, entry.data, report_from_json(meta["report"]))


def plan_from_json(d: dict) -> B.ProgramPlan:
    steps: list = []
    for st in d["steps"]:
        kind = st[0]
        if kind == "alloc":
            _, slot, shape, dtype = st
            steps.append(B.AllocStep(int(slot), tuple(int(n) for n in shape), np.dtype(dtype)))
        elif kind == "kernel":
            _, name, body, bufs, work, threads, params, checks, stores, loads = st
            steps.append(B.KernelPlan(str(name), int(body),
                                      tuple(int(b) for b in bufs), int(work), int(threads),
                                      tuple(int(p) for p in params),
                                      tuple((int(a), int(n)) for a, n in checks),
                                      tuple(int(s) for s in stores), tuple(int(s) for s in loads)))
        elif kind == "blas":
            _, routine, args, words, flops = st
            steps.append(B.BlasPlan(str(routine), tuple(int(a) for a in args),
                                    tuple(int(w) for w in words), int(flops)))
        elif kind == "extern":
            _, fn, args, n_inputs, transposed, flops, text = st
            op = None if text is None else extern_from_text(text)
            steps.append(B.ExternPlan(str(fn), tuple(int(a) for a in args), int(n_inputs),
                                      (bool(transposed[0]), bool(transposed[1])), int(flops), op))
        else:
            raise ValueError(f"unknown step {kind!r}")
    return B.ProgramPlan(int(d["n_inputs"]), tuple(steps), tuple(int(o) for o in d["outputs"]),
                         frozenset(int(s) for s in d["written"]))


def extern_from_text(text: str) -> L.ExternOp:
    module = Parser(context(), text).parse_module()
    return next(op for op in module.walk() if isinstance(op, L.ExternOp))


def report_from_json(d: dict | None):
    from passes.lower_to_loop import LoweringReport

    if d is None:
        return None
    return LoweringReport([(str(n), [str(o) for o in ops]) for n, ops in d["kernels"]],
                          [str(r) for r in d["refused"]], [str(p) for p in d.get("paths", [])],
                          [str(t) for t in d.get("locations", [])])


# ---- the user's view ---------------------------------------------------------

def cache_info() -> dict:
    """The on-disk compile cache: its directory, whether it is on (and why
    not), its entries and their bytes; this process's hits, misses, writes
    and rejected entries, and what LLVM did in it (`llvm`: modules of kernels
    compiled, native entries compiled, entries' object files linked in)."""
    c = disk_cache.current()
    info = c.info()
    if _suspended:
        info.update(enabled=False, reason="suspended for this process (clear_programs)")
    info["llvm"] = dict(cpu.COUNTS)
    return info


def cache_clear() -> int:
    """Remove every entry of the on-disk compile cache; how many were removed."""
    return disk_cache.current().clear()
