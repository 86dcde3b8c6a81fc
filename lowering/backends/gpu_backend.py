"""The GPU backend's program: the kernel level run as Triton kernels on a
device (`runtime/gpu.py`: torch CUDA tensors, CuPy arrays, or host memory
under Triton's interpreter).

The emitter (`triton-emit`, `codegen/triton_kernel.py`) makes each
`kernel.kernel` a `@triton.jit` function and its launch plan; this module
lays the function-level ops out as steps over buffer slots, as the CPU
backend does: allocations (device memory), views (`memref.cast`: the same
slot), kernel launches (argument lists built once, at build time, but for
the buffers and the strides of inputs) and externs:

- a matmul without views: the device library's matmul (cuBLAS through torch
  or CuPy), into the output buffer;
- any other routine (numpy's: sorts, FFTs, a matmul of views, ...): its
  operands copied to the host, numpy's routine, the result copied back —
  correct, and slow; `explain` says which externs do this (`host_externs`).

A program is called two ways:

- `program(inputs)` with host (numpy) arrays, as the compiled function's
  entry calls every backend: inputs are copied to the device, results
  copied back, and every input the program writes in place (a slice
  assignment into an argument) is copied back into the caller's array;
- `program.run_device(arrays)` with arrays already on the device: results
  stay there (arrays of the same kind), inputs are written in place;
- `program.capture(arrays, device, graph)` (`mode="reduce-overhead"`):
  the same steps on the device arrays `arrays`, recorded once into a
  `runtime.gpu.DeviceGraph` (a CUDA graph) and replayed by its caller
  (`lowering/device_graph.py`); `graph_why()` says why a program cannot be.

The device does not report IEEE floating-point flags, so `np.errstate` has
no effect on what a GPU program does (as in torch and JAX): no warning, no
FloatingPointError. Shapes are static: a kernel level with a dynamic size
has no rule yet (the compiled function falls back to numpy with a warning)."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import SSAValue

from dialects import kernel as K
from dialects import loop as L
from runtime import gpu
from runtime.errors import as_numpy

from ..codegen.triton_kernel import TritonKernel, emit_kernel, no_rule, root
from . import interpreter
from .cuda_launch import early_runner
from .numpy_ops import dtype_of
from .triton_launch import wait_for_warm_up


@dataclass
class Alloc:
    slot: int
    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass
class Launch:
    kernel: TritonKernel
    bufs: tuple[int, ...]  # slots, in the kernel's operand order
    fixed: dict = field(default_factory=dict)  # run-time arguments known at build time
    strides: tuple = ()  # (name, operand, dim) read off the buffers at each launch
    grid: int = 0
    fn: tuple | None = None  # (interpreted, the @triton.jit function): loaded at first use
    runners: dict = field(default_factory=dict)  # specialization -> compiled kernel's launcher
    constexpr_values: tuple = ()  # the block sizes, in the function's parameter order
    num_warps: int = 4
    tuned: list | None = None  # max-autotune: [(config, median ms)], the chosen first
    needs: tuple = ()  # program-level arguments of the kernel ("status": a gather's)
    tuned_from_disk: bool = False  # max-autotune's winner read from the on-disk cache


@dataclass
class Extern:
    op: L.ExternOp
    ins: tuple[int, ...]
    outs: tuple[int, ...]
    matmul: str | None  # "nn", "nt", ... for a matmul of its own operands, else None
    # a constant (`numpy:array.constant`) nothing writes again or returns: made on
    # the device once, at the first call, and read by every call after it
    once: bool = False
    made: dict = field(default_factory=dict)  # id(device) -> the device array


def _written(k: K.KernelOp) -> set[int]:
    """The operands of a kernel it stores into (through a view: its root)."""
    roots = [root(b) for b in k.buffers]
    out = set()
    for op in k.body.walk():
        if isinstance(op, L.StoreOp):
            r = root(op.buffer)
            out.update(j for j, x in enumerate(roots) if x == r)
    return out


class GpuProgram:
    """One kernel-level function as steps on a device."""

    def __init__(self, module: ModuleOp, device: gpu.Device | None = None):
        self.device = device if device is not None else gpu.device()
        f = next(o for o in module.ops if isinstance(o, func.FuncOp))
        block = f.body.blocks[0]
        slot: dict[SSAValue, int] = {a: i for i, a in enumerate(block.args)}
        self.n_inputs = len(block.args)
        sizes = {v: _nbytes(v.type) for v in block.args}
        # each input's (shape, dtype): what a random draw made on the device makes
        self.input_types = [(tuple(v.type.get_shape()), dtype_of(v.type.element_type))
                            for v in block.args]
        n_slots = self.n_inputs
        self.steps: list[Alloc | Launch | Extern] = []
        self.kernels: list[TritonKernel] = []
        self.host_externs: list[str] = []
        written: set[int] = set()
        writes: Counter = Counter()  # steps writing each slot
        self.outputs: tuple[int, ...] = ()
        self.out_bytes = 0
        for op in block.ops:
            if isinstance(op, memref.AllocOp):
                t = op.memref.type
                assert isinstance(t, MemRefType)
                shape = tuple(t.get_shape())
                if any(n < 0 for n in shape):
                    raise no_rule("a buffer of a dynamic size (the GPU backend's shapes are "
                                  "static)")
                slot[op.memref] = n_slots
                self.steps.append(Alloc(n_slots, shape, dtype_of(t.element_type)))
                n_slots += 1
            elif isinstance(op, memref.CastOp):
                slot[op.dest] = slot[op.source]
            elif isinstance(op, K.KernelOp):
                tk = emit_kernel(op)
                self.kernels.append(tk)
                bufs = tuple(slot[b] for b in op.buffers)
                written.update(bufs[j] for j in _written(op))
                writes.update({bufs[j] for j in _written(op)})
                self.steps.append(self._launch(tk, bufs))
            elif isinstance(op, L.ExternOp):
                n = op.num_inputs.value.data
                ins = tuple(slot[b] for b in op.buffers[:n])
                outs = tuple(slot[b] for b in op.buffers[n:])
                fn = op.fn.data
                mm = (fn[7:] or "nn") if fn.startswith("matmul") and op.body is None else None
                if mm is None:
                    self.host_externs.append(fn)
                written.update(outs)
                writes.update(outs)
                self.steps.append(Extern(op, ins, outs, mm))
            elif isinstance(op, func.ReturnOp):
                self.outputs = tuple(slot[v] for v in op.arguments)
                self.out_bytes = sum(_nbytes(v.type) for v in op.arguments)
            elif isinstance(op, L.KernelOp):
                raise no_rule("loop.kernel (a kernel not yet scheduled)")
            else:
                raise no_rule(f"{op.name} at function level")
        self.n_slots = n_slots
        self.in_bytes = sum(sizes.values())  # what a call with host arrays copies in
        # mode="max-autotune": each kernel's launch configuration chosen by timing
        # candidates on the first call's buffers (`_tune`)
        self.tune = False
        # a host call's results are copies of device memory: never the caller's arrays
        self.fresh = tuple(True for _ in self.outputs)
        # on device arrays, an output is new memory where the program allocates
        # it for that output alone (not an input's buffer, not another output's)
        allocated = {st.slot for st in self.steps if isinstance(st, Alloc)}
        self.device_fresh = tuple(s in allocated and self.outputs.count(s) == 1
                                  for s in self.outputs)
        # inputs the program writes in place: copied back to a host caller's arrays
        self.inputs_written = tuple(sorted(s for s in written if s < self.n_inputs))
        for st in self.steps:
            if isinstance(st, Extern) and st.op.fn.data == "numpy:array.constant" and \
                    not st.ins and len(st.outs) == 1:
                st.once = writes[st.outs[0]] == 1 and st.outs[0] not in self.outputs
        self._lock = threading.Lock()
        # gathers check their indices on the device: an int32 a kernel sets
        # where an index is out of range, read after each run (`_checked`)
        self.checks_indices = any(a.kind == "status" for tk in self.kernels for a in tk.args)
        self._status: dict[tuple, object] = {}  # Device.where() -> its status buffer

    def describe(self) -> list[str]:
        """What each step does on the device, for `explain`: a launch's
        kernel, shape of program and configuration (with max-autotune's
        timings), a matmul's library, a routine run on host copies; and the
        copies a call with host arrays makes."""
        out = []
        for st in self.steps:
            if isinstance(st, Launch):
                tk = st.kernel
                consts = ", ".join(f"{k}={v}" for k, v in zip(tk.constexprs, st.constexpr_values))
                line = (f"{tk.name}: Triton {tk.strategy} kernel, grid {st.grid}, {consts}, "
                        f"{st.num_warps} warps, int{tk.index_bits} indices")
                if st.tuned:
                    line += ("; max-autotune (ms, timed in an earlier run, read from the "
                             "on-disk cache): " if st.tuned_from_disk
                             else "; max-autotune (ms): ") + ", ".join(
                        f"{'/'.join(map(str, c.values()))} x{w}w {ms:.4f}"
                        for (c, w, _), ms in st.tuned)
                out.append(line)
            elif isinstance(st, Extern):
                fn = st.op.fn.data
                out.append(f"extern {fn}: the device library's matmul" if st.matmul is not None
                           else f"extern {fn}: made on the device once, at the first call"
                           if st.once else
                           f"extern {fn}: numpy on host copies of its operands (each "
                           "call copies them to the host and its results back)")
        out.append(f"called with numpy arrays: {self.n_inputs} inputs ({self.in_bytes} bytes) "
                   f"copied to the device, {len(self.outputs)} results ({self.out_bytes} bytes) "
                   "copied back"
                   + (f", {len(self.inputs_written)} arguments written in place copied back"
                      if self.inputs_written else "")
                   + "; with device arrays: none")
        return out

    @property
    def kernel_bodies(self) -> int:
        """Distinct kernel functions (kernels sharing a body share one)."""
        return len({tk.source for tk in self.kernels})

    @staticmethod
    def _launch(tk: TritonKernel, bufs: tuple[int, ...]) -> Launch:
        from .triton_launch import param_value

        fixed: dict[str, object] = {}
        strides = []
        for a in tk.args:
            if a.kind == "param":
                fixed[a.name] = param_value(tk.param_values[a.index], a.sig)
            elif a.kind == "extent":
                fixed[a.name] = tk.first_extent
            elif a.kind == "stride":
                strides.append((a.name, a.index, a.dim))
        return Launch(tk, bufs, fixed, tuple(strides), tk.programs(fixed),
                      constexpr_values=tuple(tk.constexprs.values()), num_warps=tk.num_warps,
                      needs=tuple(a.kind for a in tk.args if a.kind == "status"))

    # ---- running ----
    def __call__(self, inputs):
        """Host arrays in, host arrays out (see the module's text)."""
        dev = self.device
        with self._lock:
            arrays = [dev.from_host(np.asarray(x)) for x in inputs]
            outs = self._run(arrays)
            for s in self.inputs_written:
                target = inputs[s]
                if isinstance(target, np.ndarray):
                    dev.copy_to_host(arrays[s], target)
            return [dev.to_host(o) for o in outs]

    def run_device(self, arrays, device: gpu.Device | None = None):
        """Device arrays in (of `device`'s kind: default the program's),
        device arrays of the same kind out."""
        with self._lock:
            return self._run(list(arrays), device or self.device)

    def _run(self, arrays: list, dev: gpu.Device | None = None) -> list:
        dev = dev or self.device
        vals = arrays + [None] * (self.n_slots - len(arrays))
        for st in self.steps:
            if isinstance(st, Launch):
                if st.grid == 0:
                    continue
                bufs = [vals[s] for s in st.bufs]
                self._run_kernel(st, bufs, dev)
            elif isinstance(st, Alloc):
                vals[st.slot] = dev.empty(st.shape, st.dtype)
            else:
                self._run_extern(st, vals, dev)
        if self.checks_indices:
            self._checked(dev)
        return [vals[s] for s in self.outputs]

    def _kernel_fn(self, st: Launch, dev: gpu.Device):
        """The launch's @triton.jit function, for the device's kind (compiled
        for the GPU, or Triton's interpreter), loaded at first use."""
        fn = st.fn if st.fn is not None and st.fn[0] == dev.interpreted else None
        if fn is None:
            from .triton_launch import load

            st.fn = fn = (dev.interpreted, load(st.kernel, interpret=dev.interpreted))
        return fn[1]

    def _status_of(self, dev: gpu.Device):
        """The device's status buffer of this program (zero until a gather
        meets an index out of range)."""
        buf = self._status.get(dev.where())
        if buf is None:
            buf = self._status[dev.where()] = dev.from_host(np.zeros(1, np.int32))
        return buf

    def _checked(self, dev: gpu.Device) -> None:
        """After a run: IndexError where a gather met an index out of range
        (the status zeroed again for the next run). The caller re-runs the
        call eagerly, so numpy raises its own error. (It reads the status
        back: the run waits for the device.)"""
        buf = self._status_of(dev)
        if int(np.asarray(dev.to_host(buf)).reshape(-1)[0]):
            self._status[dev.where()] = dev.from_host(np.zeros(1, np.int32))
            raise as_numpy(IndexError("an index out of range in a gather on the device"))

    def _launch_values(self, st: Launch, bufs: list, dev: gpu.Device) -> list:
        """The launch's arguments in the kernel's order: its buffers as the
        launcher takes them, the strides read off them, the fixed values."""
        tk = st.kernel
        args = dict(st.fixed)
        if "status" in st.needs:
            args["status"] = dev.launch_arg(self._status_of(dev))
        for name, j, d in st.strides:
            x = bufs[j]
            args[name] = int(x.strides[d] // x.itemsize) if isinstance(x, np.ndarray) or \
                not callable(getattr(x, "stride", None)) else int(x.stride(d))
        return [dev.launch_arg(bufs[a.index]) if a.kind == "buffer" else args[a.name]
                for a in tk.args]

    def _run_kernel(self, st: Launch, bufs: list, dev: gpu.Device) -> None:
        tk = st.kernel
        fn = self._kernel_fn(st, dev)
        values = self._launch_values(st, bufs, dev)
        if dev.interpreted:
            with np.errstate(all="ignore"):
                fn[(st.grid,)](*values, **tk.constexprs)
            return
        if self.tune and st.tuned is None:
            self._tune(st, fn, values, bufs, dev)
        # a compiled kernel serves every launch whose arguments Triton would
        # specialize the same way (`_specialization`): its launcher directly,
        # without the JIT's binding and cache lookup on every call
        key = _specialization(values)
        run = st.runners.get(key)
        if run is not None:
            run(*values, *st.constexpr_values)
            return
        kw = dict(zip(tk.constexprs, st.constexpr_values))
        wait_for_warm_up()  # (one build of Triton's driver utilities, not two at once)
        ck = fn.warmup(*values, grid=(st.grid,), **kw, num_warps=st.num_warps, **tk.options)
        if not _compiled_kernel(ck):  # (another Triton: its JIT launches)
            fn[(st.grid,)](*values, **kw, num_warps=st.num_warps, **tk.options)
            return
        self._runner(st, key, ck, dev)(*values, *st.constexpr_values)

    @staticmethod
    def _runner(st: Launch, key: tuple, ck, dev: gpu.Device):
        """The runner of a launch's compiled kernel for one specialization,
        kept in `st.runners`: Triton's launcher (`launcher`), or, while
        Triton builds that launcher for a new signature, the driver's
        launch (`cuda_launch.early_runner`), which hands over to it."""
        def later():
            run = st.runners[key] = launcher(ck, st.grid, dev)
            return run
        run = early_runner(ck, st.grid, dev.current_stream, later) if _plain_runner() else None
        if run is None:
            return later()
        st.runners[key] = run
        return run

    # ---- graphs (mode="reduce-overhead") ----
    def graph_why(self) -> str:
        """Why the program cannot be captured into a graph ("" where it can):
        a numpy routine on host copies copies device memory to the host in
        the middle of the program, which a capture cannot hold. (A constant
        made once, at the first call, is made before the capture.)"""
        host = [st.op.fn.data for st in self.steps
                if isinstance(st, Extern) and st.matmul is None and not st.once]
        if host:
            return ("it runs numpy routines on host copies (" + ", ".join(dict.fromkeys(host))
                    + ")")
        if self.checks_indices:
            return "its gathers' index checks are read back after each run"
        return ""

    def capture(self, arrays: list, dev: gpu.Device, graph: gpu.DeviceGraph,
                alloc=None) -> list:
        """Capture the program on the device arrays `arrays` (its inputs, as
        the graph will read them) into `graph`, and return every slot's
        buffer, which must outlive the graph. Before the capture, outside
        it: the intermediates are allocated (the graph's own: CuPy's pool
        cannot be trusted to allocate under capture), constants are made,
        and each launch's compiled kernel is loaded for these very buffers,
        so that the capture holds launches and library calls only, each on
        the capturing stream. Nothing runs: the caller replays the graph.
        `alloc(shape, dtype)` makes the intermediates (default `dev.empty`;
        called in the same order at every capture of the program)."""
        vals, work = self.capture_work(arrays, dev, alloc)
        graph.capture(work)
        return vals

    def capture_work(self, arrays: list, dev: gpu.Device, alloc=None) -> tuple[list, list]:
        """`capture`'s preparation: every slot's buffer and the baked steps
        (launches, matmuls) a graph captures, in order, nothing run (a
        training step captures its forward's and backward's in one graph)."""
        why = self.graph_why()
        if why:
            raise gpu.NotCapturable(why)
        alloc = alloc or dev.empty
        with self._lock:
            vals = list(arrays) + [None] * (self.n_slots - len(arrays))
            work = []
            for st in self.steps:
                if isinstance(st, Alloc):
                    vals[st.slot] = alloc(st.shape, st.dtype)
                elif isinstance(st, Launch):
                    if st.grid:
                        work.append(self._baked_launch(st, [vals[s] for s in st.bufs], dev))
                elif st.matmul is not None:
                    work.append(self._baked_matmul(st, vals, dev))
                else:  # a constant made once (graph_why: nothing else is left)
                    self._run_extern(st, vals, dev)
        return vals, work

    def _baked_launch(self, st: Launch, bufs: list, dev: gpu.Device):
        """One launch with every argument fixed, as a graph records it: on a
        device, through the compiled kernel's launcher with the stream it is
        given (compiled and loaded here, not under capture); in the
        interpreter, the launch itself."""
        tk = st.kernel
        fn = self._kernel_fn(st, dev)
        values = self._launch_values(st, bufs, dev)
        if dev.interpreted:
            grid = st.grid

            def interpreted(stream):
                with np.errstate(all="ignore"):
                    fn[(grid,)](*values, **tk.constexprs)
            return interpreted
        key = _specialization(values)
        run = st.runners.get(key)
        if run is None:
            names = tuple(tk.constexprs)
            ck = fn.warmup(*values, grid=(st.grid,), **dict(zip(names, st.constexpr_values)),
                           num_warps=st.num_warps, **tk.options)
            if not _compiled_kernel(ck):
                # (the JIT's own launch would take torch's stream, not the capture's)
                raise gpu.NotCapturable(f"no launcher of its own for kernel {tk.name}")
            run = self._runner(st, key, ck, dev)
        # (an early runner's driver launch: no hand-over inside a capture)
        run = getattr(run, "driver", run)
        consts = st.constexpr_values

        def launch(stream):
            run(*values, *consts, stream=stream)
        return launch

    @staticmethod
    def _baked_matmul(st: Extern, vals: list, dev: gpu.Device):
        """The device library's matmul on fixed buffers (on the current
        stream: the capture's)."""
        a, b = (_swap(vals[s]) if t == "t" else vals[s] for s, t in zip(st.ins, st.matmul))
        out = vals[st.outs[0]]

        def matmul(stream):
            dev.matmul(a, b, out)
        return matmul

    def _tune(self, st: Launch, fn, values, bufs, dev: gpu.Device) -> None:
        """Time each candidate configuration (`candidates`) of one launch on
        copies of its buffers (a kernel that updates a buffer in place runs
        many times), keep the fastest: its block sizes, warps and grid. The
        winner is kept in the on-disk cache (`tune_key`): a later process
        (or program) launching the same kernel the same way on the same
        device model reads it and times nothing."""
        tk = st.kernel
        st.tuned = []
        key = tune_key(st, values, dev)
        cache = tune_cache()
        hit = cache.get(key) if cache is not None else None
        if hit is not None:
            try:
                results = [((dict(c), int(w), int(g)), float(ms))
                           for c, w, g, ms in hit.meta["timings"]]
            except (KeyError, TypeError, ValueError):
                results = []
            if results and list(results[0][0][0]) == list(tk.constexprs):
                self._choose(st, results, from_disk=True)
                return
        try:
            from triton.testing import do_bench
        except ImportError:
            return
        copies = [dev.launch_arg(dev.copy(bufs[a.index])) if a.kind == "buffer" else v
                  for a, v in zip(tk.args, values)]
        names = tuple(tk.constexprs)
        results = []
        for consts, warps in candidates(tk):
            # (a rows kernel keeps its block: one program per row, whatever the warps)
            grid = -(-tk.block_points(st.fixed) // consts[0]) if tk.strategy == "pointwise" \
                else tk.programs(st.fixed)

            def launch(consts=consts, warps=warps, grid=grid):
                fn[(grid,)](*copies, **dict(zip(names, consts)), num_warps=warps, **tk.options)
            try:
                ms = do_bench(launch, warmup=5, rep=25, return_mode="median")
            except Exception:  # (a configuration that does not compile: out of resources)
                continue
            results.append(((dict(zip(names, consts)), warps, grid), ms))
        if not results:
            return
        results.sort(key=lambda r: r[1])
        self._choose(st, results)
        if cache is not None:
            cache.put(key, {"kind": "triton-tune", "kernel": tk.name, "timings": [
                [sorted(c.items()), w, g, ms] for (c, w, g), ms in results]}, b"")

    @staticmethod
    def _choose(st: Launch, results: list, from_disk: bool = False) -> None:
        (consts, warps, grid), _ = results[0]
        st.constexpr_values, st.num_warps, st.grid = tuple(consts.values()), warps, grid
        st.runners.clear()
        st.tuned = results
        st.tuned_from_disk = from_disk

    def _run_extern(self, st: Extern, vals: list, dev: gpu.Device) -> None:
        if st.once:
            made = st.made.get(dev.where())
            if made is not None:
                vals[st.outs[0]] = made
                return
        if st.matmul is not None:
            a, b = (_swap(vals[s]) if t == "t" else vals[s] for s, t in zip(st.ins, st.matmul))
            dev.matmul(a, b, vals[st.outs[0]])
            return
        # numpy's routine on host copies (interpreter.extern: the reference's rules)
        host = {s: dev.to_host(vals[s]) for s in st.ins + st.outs}
        try:
            interpreter.run_extern(st.op, {b: host[s] for b, s in zip(st.op.buffers,
                                                                      st.ins + st.outs)})
        except Exception as err:  # the numpy routine's own error (an index out of range)
            raise as_numpy(err)
        if st.once:
            st.made[dev.where()] = vals[st.outs[0]]
        for s in st.outs:
            back = dev.from_host(host[s])
            out = vals[s]
            if isinstance(out, np.ndarray):
                out[...] = back
            else:
                out.copy_(back) if hasattr(out, "copy_") else out.set(host[s])


def tune_cache():
    """The on-disk cache max-autotune keeps its winners in (None: off)."""
    from runtime import disk_cache

    c = disk_cache.current()
    return c if c.usable() else None


def tune_key(st: Launch, values: list, dev: gpu.Device) -> str:
    """What a launch's timings depend on: the kernel's source and blocks,
    its fixed arguments (sizes, parameters), how Triton specializes the
    others (`_specialization`), the device's model and Triton's version."""
    from runtime import disk_cache

    try:
        import triton

        version = triton.__version__
    except ImportError:
        version = ""
    tk = st.kernel
    return disk_cache.digest({"kind": "triton-tune", "source": tk.source, "fn": tk.fn_name,
                              "blocks": sorted(tk.constexprs.items()),
                              "fixed": sorted((k, repr(v)) for k, v in st.fixed.items()),
                              "specialization": repr(_specialization(values)),
                              "device": dev.model(), "triton": version})


def candidates(tk: TritonKernel) -> list[tuple[tuple, int]]:
    """max-autotune's launch configurations of a kernel: (block sizes, warps).
    A pointwise kernel: points per program 256-4096 (up to the domain's
    size) by 2-8 warps; a rows kernel keeps its row block (the row must fit)
    and tries 2-32 warps."""
    consts = tuple(tk.constexprs.values())
    if tk.strategy == "pointwise":
        top = consts[0]
        blocks = sorted({b for b in (256, 512, 1024, 2048, 4096) if b <= max(top, 256)} | {top})
        return [((b,), w) for b in blocks for w in (2, 4, 8) if b // (32 * w) >= 1]
    widest = max(consts, default=1)
    return [(consts, w) for w in (2, 4, 8, 16, 32) if widest // (32 * w) >= 1 or w == 2]


def _nbytes(t) -> int:
    """Bytes of a memref of static shape (0 where a size is dynamic)."""
    if not isinstance(t, MemRefType) or any(n < 0 for n in t.get_shape()):
        return 0
    n = 1
    for d in t.get_shape():
        n *= d
    return n * dtype_of(t.element_type).itemsize


def launcher(ck, grid: int, dev: gpu.Device):
    """`run(*args, stream=None)` launching compiled kernel `ck` on `grid`
    programs: its C launcher called with the grid, the function handle and
    the packed metadata fixed, the stream (when not given) read with the
    device's own call. Triton's `ck[grid]` runner does the same per launch
    through its driver's device and stream queries and its hook settings;
    where launch hooks are set (a profiler) or Triton's runner calls its
    launcher otherwise than this code knows, that runner is used."""
    runner = ck[(grid, 1, 1)]
    if not _plain_runner():
        return runner
    c_launch, function, meta, stream_of = ck.run, ck.function, ck.packed_metadata, \
        dev.current_stream

    def run(*args, stream=None):
        c_launch(grid, 1, 1, stream_of() if stream is None else stream, function, meta,
                 None, None, None, *args)
    return run


def _compiled_kernel(ck) -> bool:
    """Whether the JIT's compile gave a CompiledKernel with a launcher and a
    function handle (asked of its class: the instance's `run` builds the
    launcher)."""
    return hasattr(type(ck), "run") and hasattr(ck, "function")


def _plain_runner() -> bool:
    """Whether a launch may skip Triton's `CompiledKernel[grid]` runner: no
    launch hooks set (a profiler's) and a runner that calls its launcher as
    `launcher` does."""
    try:
        from triton import knobs

        hooks = any(_hooked(h) for h in (knobs.runtime.launch_enter_hook,
                                         knobs.runtime.launch_exit_hook))
    except Exception:  # (another Triton: its own runner)
        return False
    return not hooks and _known_runner()


@lru_cache(maxsize=None)
def _known_runner() -> bool:
    """Whether Triton's `CompiledKernel[grid]` runner calls its launcher as
    `launcher` does (read once: the installed Triton's source)."""
    try:
        import inspect

        from triton.compiler.compiler import CompiledKernel

        return "self.run(grid[0], grid[1], grid[2], stream, self.function, " \
            "self.packed_metadata, launch_metadata," in inspect.getsource(CompiledKernel.__getitem__)
    except Exception:  # (another Triton)
        return False


def _hooked(hook) -> bool:
    """Whether a Triton launch hook setting calls anything (a plain hook, or
    a chain of them holding one: Triton 3.5 on)."""
    return hook is not None and bool(getattr(hook, "calls", True))


def _specialization(values) -> tuple:
    """What Triton's JIT specializes a kernel on, per argument: a pointer's
    16-byte alignment; an integer's being 1, its divisibility by 16 and
    whether it fits in 32 bits (floats and bools are not specialized)."""
    key = []
    for v in values:
        t = type(v)  # (the common type first: this runs at every launch)
        if t is int or (isinstance(v, int) and not isinstance(v, bool)):
            key.append((v == 1, v % 16 == 0, -(1 << 31) <= v < (1 << 31)))
        elif isinstance(v, (bool, float)):
            key.append(None)
        else:
            key.append(v.data_ptr() % 16 == 0)
    return tuple(key)


def _swap(x):
    return x.swapaxes(-1, -2) if hasattr(x, "swapaxes") else x.transpose(-1, -2)


def build(module: ModuleOp, report, stage) -> GpuProgram:
    """The program of a kernel-level module (stage: the pipeline's timer of
    the emitter's stages, `pipeline.EMITTERS["gpu"]`; report: the lowering's,
    which `explain` shows)."""
    from .cpu_backend import merged_report

    with stage("triton-emit"):
        prog = GpuProgram(module)
    prog.report = merged_report(report, module) if report is not None else None
    return prog
