"""The LLVM IR of a native entry: a cached call of a compiled program as one
C function with CPython's METH_FASTCALL signature,

    PyObject *entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs)

It checks the guards on the arguments' array objects (exact ndarray type,
the canonical descr, shape, layout, writeable), allocates the outputs
(numpy's `PyArray_NewFromDescr`, or a Python allocator for pooled buffers),
calls the kernels directly (`i32 k(i64 start, i64 stop, i8** objs, i64*)`,
with a stack array of the buffers' objects; each returns the IEEE exception
flags it raised, and where any did, a Python check of `np.errstate` may raise
instead of returning) and returns the output or a tuple of them. On any
guard mismatch it tail-calls the fallback with the same arguments
(`PyObject_Vectorcall`), so it can only miss, never be wrong.

The entry is pure data in (an `EntrySpec` of addresses and shapes), text
out; `runtime/native.py` supplies the array ABI, registers the C-API
symbols declared here and turns the compiled address into a builtin."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from runtime.guards import ArrayCheck, Check, ContentsCheck, OverlapCheck, TypeCheck, ValueCheck
from runtime.native import (
    NPY_ARRAY_C_CONTIGUOUS,
    NPY_ARRAY_F_CONTIGUOUS,
    NPY_ARRAY_WRITEABLE,
    TUPLE_ITEMS,
    TUPLE_SIZE,
    ArrayAbi,
)

I32, I64 = ir.IntType(32), ir.IntType(64)
OBJ = ir.IntType(8).as_pointer()  # PyObject*
# a kernel returns the IEEE exception flags it raised (MXCSR bits)
KERNEL = ir.FunctionType(I32, [I64, I64, OBJ.as_pointer(), I64.as_pointer()])
FLAG_VALUES = 32  # kernels' flags are MXCSR bits 0-4


@dataclass(frozen=True)
class ArgCheck:
    """args[arg] must be an exact ndarray with this descr (an address: a
    different but equal descr misses), shape and layout ("C", "F" or a
    tuple of byte strides): the native form of an `ArrayCheck`, made by
    `of` from its fields. (A dim a size symbol binds would be left out of
    `shape`, its relations compared as loads of the dims.)"""

    arg: int
    descr: int
    shape: tuple[int, ...]
    layout: str | tuple[int, ...]
    writeable: bool

    @classmethod
    def of(cls, check: ArrayCheck, descr: np.dtype) -> ArgCheck:
        """The guard `check` on argument `check.index`, its dtype compared as
        the descr object `descr` (which the caller keeps alive)."""
        layout = check.layout if isinstance(check.layout, str) else tuple(check.layout[1])
        return cls(check.index, id(descr), tuple(check.shape), layout, check.writeable)


@dataclass(frozen=True)
class ValueArg:
    """args[arg] is the int, bool or None the program was specialized on
    (`ValueCheck`): the very object for None, a bool and the ints CPython
    keeps one object of; else an exact int of that value."""

    arg: int
    value: int | None

    @property
    def singleton(self) -> bool:
        return self.value is None or type(self.value) is bool or -5 <= self.value <= 256


@dataclass(frozen=True)
class FloatArg:
    """args[arg] is an exact Python float: a 0-d float64 input of the
    program (`TypeCheck` of role "float"), made by the entry (`EntrySpec.f64`);
    with `bits`, the float the program was specialized on (`ContentsCheck`),
    compared bit for bit."""

    arg: int
    bits: int | None = None


@dataclass(frozen=True)
class ContentsArg:
    """args[arg], a C-contiguous array (its `ArrayCheck` first), holds the
    `nbytes` bytes at `data` (a buffer the caller keeps alive): the
    elements the program was specialized on (`ContentsCheck`)."""

    arg: int
    data: int
    nbytes: int


INT64 = (-(1 << 63), (1 << 63) - 1)


def arg_checks(checks: list[Check]) -> tuple[tuple[ArgCheck | ValueArg, ...],
                                              list[np.dtype]] | None:
    """The native forms of an entry's guards and the descrs they compare
    against, or None where one has none: a check that is neither an array
    guard nor a specialized int, bool or None on an argument, or a dtype that
    is not its type's canonical descr (byte-swapped, structured, flexible)."""
    out: list = []
    descrs: list = []  # (and the buffers ContentsArg compares against)
    layouts = {c.index: c.layout for c in checks if isinstance(c, ArrayCheck) and c.where == "L"}
    for c in checks:
        if isinstance(c, TypeCheck) and c.where == "L" and c.role == "float":
            out.append(FloatArg(c.index))
            continue
        if isinstance(c, ContentsCheck) and c.where == "L":
            if c.what == "float":
                out.append(FloatArg(c.index, int.from_bytes(c.data, "little", signed=True)))
                continue
            if layouts.get(c.index) != "C":
                return None
            buf = (ctypes.c_char * max(len(c.data), 1)).from_buffer_copy(c.data or b"\0")
            descrs.append(buf)
            out.append(ContentsArg(c.index, ctypes.addressof(buf), len(c.data)))
            continue
        if (isinstance(c, ValueCheck) and c.where == "L" and (
                c.value is None or type(c.value) is bool
                or (type(c.value) is int and INT64[0] <= c.value <= INT64[1]))):
            out.append(ValueArg(c.index, c.value))
            continue
        if isinstance(c, OverlapCheck):  # (the caller's: `EntrySpec.apart`)
            continue
        if not isinstance(c, ArrayCheck) or c.where != "L":
            return None
        if not all(type(d) is int for d in c.shape):  # (a size symbol: any size of 2 or more)
            return None
        canon = np.dtype(c.dtype.type)
        if canon != c.dtype:
            return None
        descrs.append(canon)
        out.append(ArgCheck.of(c, canon))
    return tuple(out), descrs


@dataclass(frozen=True)
class Alloc:
    """A fresh C-contiguous array for `slot`: `PyArray_NewFromDescr`, or,
    when `call` is set, `call[0](*call[1:])` (a Python allocator and its
    arguments, all addresses of live objects), or the program's own array
    at `static`."""

    slot: int
    shape: tuple[int, ...]
    descr: int
    call: tuple[int, ...] | None = None
    static: int = 0  # the address of the program's own array for it (a new reference to it)


@dataclass(frozen=True)
class Launch:
    fn: int  # the kernel's address
    slots: tuple[int, ...]  # its buffers, in the kernel's order
    work: int
    scalars: int = 0  # the address of its launch's scalars (parameters), 0 for none
    # it checks indices: its first scalar is a status word, zero when every
    # index was in range (else the call goes to the fallback, which raises)
    checked: bool = False


@dataclass(frozen=True)
class Call:
    """A Python routine on the buffers in `slots` (`fn(*arrays)`, an
    address): it returns the IEEE exception flags it saw as an int (a numpy
    extern, its flags collected as numpy detects them); its exception
    returns NULL. An entry with calls holds its program's lock (`lock`):
    the GIL may pass to another thread inside one."""

    fn: int
    slots: tuple[int, ...]


TABLE_MIN = 8  # a run of this many kernel launches or more is a loop over a table


def launch_runs(launches) -> list[tuple[int, int]]:
    """[start, stop) of each run of TABLE_MIN or more consecutive kernel
    launches (with work to do, on buffers)."""
    runs, start = [], None
    for i, k in enumerate([*launches, None]):
        if isinstance(k, Launch) and k.work > 0 and k.slots and not k.checked:
            start = i if start is None else start
            continue
        if start is not None and i - start >= TABLE_MIN:
            runs.append((start, i))
        start = None
    return runs


@dataclass(frozen=True)
class EntrySpec:
    name: str
    nargs: int
    checks: tuple[ArgCheck, ...]
    inputs: tuple[int, ...]  # slot i is args[inputs[i]]
    allocs: tuple[Alloc, ...]
    launches: tuple[Launch | Call, ...]  # in order
    # what each result is, in order: ("slot", s) a buffer the program made,
    # ("arg", a) the argument args[a] itself (`x *= y; return x`), ("none",
    # 0) None
    sources: tuple[tuple[str, int], ...]
    as_tuple: bool  # return a tuple (even of one) rather than the one output
    fallback: int  # the callable a miss goes to
    # where kernels raised IEEE exceptions: `check(flags[bits])` (a Python
    # callable and the addresses of the ints 0..FLAG_VALUES-1) raises, or
    # returns None when the errstate ignores them all
    check: int = 0
    flags: tuple[int, ...] = ()
    # (acquire, release) bound methods of the program's lock, taken where the
    # entry makes Python calls (`Call`); () for none
    lock: tuple[int, int] | tuple[()] = ()
    # keyword arguments by name (addresses of interned str objects, in call
    # order: their values follow the positional ones in `args`); where set,
    # the entry has METH_FASTCALL | METH_KEYWORDS's signature and a call
    # naming other objects (or none) misses
    kwnames: tuple[int, ...] = ()
    # per output, a callable converting the 0-d array to what the function
    # returns (`a[()]`: a numpy scalar, or a Python float), or 0 to return it
    converts: tuple[int, ...] = ()
    f64: int = 0  # float64's descr, for the 0-d inputs of float arguments (`FloatArg`)
    # after the program ran and its flags passed: each (arg, slot, nbytes)
    # copies the buffer at `slot` into args[arg]'s memory, both C-contiguous
    # of nbytes (`x *= y`: the caller's array gets the result)
    writebacks: tuple[tuple[int, int, int], ...] = ()
    # (a, na, b, nb): the arrays args[a] (na bytes from its data pointer) and args[b]
    # (nb bytes) are distinct objects whose memory does not overlap, else a
    # miss (the entry writes into one of them: the guard's `OverlapCheck`)
    apart: tuple[tuple[int, int, int, int], ...] = ()
    # (slot, undo slot, nbytes, restore): an argument (at `slot`) its
    # kernels write in place, its old values kept in the undo buffer; where
    # the flags' check raises, each gets them back (the last write undone
    # first) before the entry returns NULL: the eager re-run sees the
    # caller's arrays as they came (`CpuProgram._undo`). nbytes > 0: a
    # memcpy (the undo buffer holds the argument's bytes); else `restore`
    # (an address) is called as restore(argument, undo buffer), the pending
    # exception set aside (a strided argument). An entry with undo buffers
    # calls no numpy routine and checks no index (no other failure after a
    # kernel ran)
    undo: tuple[tuple[int, int, int, int], ...] = ()


def const(ty: ir.Type, v: int) -> ir.Constant:
    return ir.Constant(ty, v)


def address(v: int) -> ir.Value:
    """A live object's address, as a constant PyObject*."""
    return const(I64, v).inttoptr(OBJ)


class EntryCodegen:
    def __init__(self, spec: EntrySpec, abi: ArrayAbi):
        self.spec, self.abi = spec, abi
        self.module = ir.Module(name=spec.name)
        m = self.module

        def declare(name: str, ret: ir.Type, *args: ir.Type) -> ir.Function:
            return ir.Function(m, ir.FunctionType(ret, list(args)), name)

        self.incref = declare("Py_IncRef", ir.VoidType(), OBJ)
        self.decref = declare("Py_DecRef", ir.VoidType(), OBJ)
        self.vectorcall = declare("PyObject_Vectorcall", OBJ, OBJ, OBJ.as_pointer(), I64, OBJ)
        self.tuple_new = declare("PyTuple_New", OBJ, I64)
        self.tuple_set = declare("PyTuple_SetItem", I32, OBJ, I64, OBJ)
        self.new_array = declare("PyArray_NewFromDescr", OBJ, OBJ, OBJ, I32, I64.as_pointer(),
                                 I64.as_pointer(), OBJ, I32, OBJ)
        self.as_long = declare("PyLong_AsLong", I64, OBJ)
        self.as_double = declare("PyFloat_AsDouble", ir.DoubleType(), OBJ)
        self.memcmp = declare("memcmp", I32, OBJ, OBJ, I64)
        self.memcpy = declare("memcpy", OBJ, OBJ, OBJ, I64)
        self.as_long_overflow = declare("PyLong_AsLongLongAndOverflow", I64, OBJ,
                                        I32.as_pointer())
        self.err_fetch = declare("PyErr_Fetch", ir.VoidType(), *[OBJ.as_pointer()] * 3)
        self.err_restore = declare("PyErr_Restore", ir.VoidType(), OBJ, OBJ, OBJ)
        params = [OBJ, OBJ.as_pointer(), I64] + ([OBJ] if spec.kwnames else [])
        self.fn = ir.Function(m, ir.FunctionType(OBJ, params), spec.name)
        self._globals = 0
        self.locked = False  # between the lock's acquire and its release

    # ---- helpers -----------------------------------------------------------
    def field(self, obj: ir.Value, offset: int, ty: ir.Type) -> ir.Value:
        b = self.b
        return b.load(b.bitcast(b.gep(obj, [const(I64, offset)]), ty.as_pointer()))

    def require(self, cond: ir.Value, what: str) -> None:
        """Continue in a fresh block when cond holds; else go to the miss."""
        ok = self.fn.append_basic_block(what)
        self.b.cbranch(cond, ok, self.miss)
        self.b.position_at_end(ok)

    def table(self, ty: ir.Type, values: list[ir.Constant], what: str) -> ir.Value:
        """A private constant array; a pointer to its first element."""
        arr = ir.ArrayType(ty, len(values))
        g = ir.GlobalVariable(self.module, arr, f"{what}{self._globals}")
        self._globals += 1
        g.linkage, g.global_constant = "private", True
        g.initializer = ir.Constant(arr, values)
        return self.b.gep(g, [const(I64, 0), const(I64, 0)])

    def or_fail(self, v: ir.Value, owned: list[ir.Value]) -> None:
        """Continue when v (a new reference) is not NULL; else drop the
        references made so far and return NULL (the failed call already set
        the exception)."""
        b = self.b
        if owned is self.owned:  # the allocations so far: one shared exit drops them
            ok = self.fn.append_basic_block("ok")
            fail, count = self.shared_fail()
            count.add_incoming(const(I64, len(owned)), b.block)
            b.cbranch(b.icmp_unsigned("==", v, ir.Constant(OBJ, None)), fail, ok)
            b.position_at_end(ok)
            return
        fail = self.fn.append_basic_block("fail")
        ok = self.fn.append_basic_block("ok")
        b.cbranch(b.icmp_unsigned("==", v, ir.Constant(OBJ, None)), fail, ok)
        b.position_at_end(fail)
        for o in owned:
            b.call(self.decref, [o])
        if self.locked:
            self.release_saving_error()
        b.ret(ir.Constant(OBJ, None))
        b.position_at_end(ok)

    def shared_fail(self) -> tuple[ir.Block, ir.PhiInstr]:
        """The exit on a failure while the first n allocations are owned (n
        its phi: each failing site adds itself): they are dropped in a loop
        (linear code however many steps fail), the lock released if held."""
        key = self.locked
        if key in self._fails:
            return self._fails[key]
        keep = self.b
        fail = self.fn.append_basic_block("fail.shared")
        loop = self.fn.append_basic_block("fail.drop")
        done = self.fn.append_basic_block("fail.done")
        b = self.b = ir.IRBuilder(fail)
        count = b.phi(I64)
        b.cbranch(b.icmp_signed(">", count, const(I64, 0)), loop, done)
        b.position_at_end(loop)
        i = b.phi(I64)
        i.add_incoming(const(I64, 0), fail)
        b.call(self.decref, [b.load(b.gep(self.owned_arr, [const(I64, 0), i]))])
        nxt = b.add(i, const(I64, 1))
        i.add_incoming(nxt, loop)
        b.cbranch(b.icmp_signed("<", nxt, count), loop, done)
        b.position_at_end(done)
        if self.locked:
            self.release_saving_error()
        b.ret(ir.Constant(OBJ, None))
        self.b = keep
        self._fails[key] = (fail, count)
        return fail, count

    def call_lock(self, which: int) -> None:
        """lock.acquire() (0) or lock.release() (1). An acquire can fail (a
        signal handler raising while it waits): the entry returns NULL then,
        holding nothing. A release cannot (the lock is the program's own,
        released only by its holder)."""
        b = self.b
        r = b.call(self.vectorcall, [address(self.spec.lock[which]), ir.Constant(OBJ.as_pointer(), None),
                                     const(I64, 0), ir.Constant(OBJ, None)])
        if which == 0:
            self.or_fail(r, self.owned)  # (nothing owned yet, not locked)
        b.call(self.decref, [r])

    def release_saving_error(self) -> None:
        """Release the lock with the pending exception set aside."""
        b = self.b
        saved = [b.alloca(OBJ) for _ in range(3)]
        b.call(self.err_fetch, saved)
        self.call_lock(1)
        b.call(self.err_restore, [b.load(p) for p in saved])

    # ---- the entry ---------------------------------------------------------
    def emit(self) -> str:
        spec = self.spec
        _self, args, nargs = self.fn.args[:3]
        kwnames = self.fn.args[3] if spec.kwnames else ir.Constant(OBJ, None)
        entry = self.fn.append_basic_block("entry")
        self.miss = self.fn.append_basic_block("miss")
        b = self.b = ir.IRBuilder(self.miss)
        r = b.call(self.vectorcall, [address(spec.fallback), args, nargs, kwnames], tail=True)
        b.ret(r)

        b.position_at_end(entry)
        self.call_args = (args, nargs, kwnames)
        if spec.kwnames:  # the names, by identity (a call site's are interned)
            self.require(b.icmp_unsigned("!=", kwnames, ir.Constant(OBJ, None)), "kw")
            size = self.field(kwnames, TUPLE_SIZE, I64)
            conds = [b.icmp_signed("==", size, const(I64, len(spec.kwnames)))]
            self.require(self.all(conds), "kw.n")
            conds = [b.icmp_unsigned("==", self.field(kwnames, TUPLE_ITEMS + 8 * j, OBJ), address(a))
                     for j, a in enumerate(spec.kwnames)]
            self.require(self.all(conds), "kw.names")
        width = max([len(k.slots) for k in spec.launches] + [1])
        argv_width = max([len(k.slots) for k in spec.launches if isinstance(k, Call)] + [1])
        callargs = b.alloca(ir.ArrayType(OBJ, argv_width), name="callargs")
        objs = b.alloca(ir.ArrayType(OBJ, width), name="objs")
        self.require(b.icmp_signed("==", nargs, const(I64, spec.nargs)), "nargs")
        argv = {c.arg: b.load(b.gep(args, [const(I64, c.arg)])) for c in spec.checks}
        for c in spec.checks:
            self.check(c, argv[c.arg])
        for a, na, c, nc in spec.apart:
            self.check_apart(argv[a], na, argv[c], nc)

        vals: dict[int, ir.Value] = {i: argv[a] for i, a in enumerate(spec.inputs)}
        self.vals = vals
        owned: list[ir.Value] = []
        self.owned, self._fails = owned, {}
        floats = [(i, a) for i, a in enumerate(spec.inputs)
                  if any(isinstance(c, FloatArg) and c.arg == a for c in spec.checks)]
        self.owned_arr = b.alloca(ir.ArrayType(OBJ, max(len(spec.allocs) + len(floats), 1)),
                                  name="owned")
        if spec.lock:
            self.call_lock(0)
            self.locked = True
        made = []  # the 0-d inputs of float arguments
        for i, a in floats:
            v = self.alloc(Alloc(-1, (), spec.f64))
            self.or_fail(v, owned)
            data = b.bitcast(self.field(v, self.abi.data, OBJ), ir.DoubleType().as_pointer())
            b.store(b.call(self.as_double, [argv[a]]), data)  # (an exact float: cannot fail)
            vals[i] = v
            b.store(v, b.gep(self.owned_arr, [const(I64, 0), const(I64, len(owned))]))
            owned.append(v)
            made.append(v)
        for al in spec.allocs:
            v = self.alloc(al)
            self.or_fail(v, owned)
            vals[al.slot] = v
            b.store(v, b.gep(self.owned_arr, [const(I64, 0), const(I64, len(owned))]))
            owned.append(v)

        base = b.gep(objs, [const(I64, 0), const(I64, 0)])
        raised = const(I32, 0)
        cargs = b.gep(callargs, [const(I64, 0), const(I64, 0)])
        runs = launch_runs(spec.launches)
        slot_arr = None
        if runs:  # every buffer by slot, for the tables' loops
            n_slots = 1 + max([*vals, *(s for k in spec.launches for s in k.slots)])
            slot_arr = b.alloca(ir.ArrayType(OBJ, n_slots), name="slots")
            for s, v in vals.items():
                b.store(v, b.gep(slot_arr, [const(I64, 0), const(I64, s)]))
        at = 0
        for start, stop in runs + [(len(spec.launches), len(spec.launches))]:
            raised = self.launch_each(spec.launches[at:start], vals, base, cargs, raised, owned)
            if start < stop:
                raised = self.launch_table(spec.launches[start:stop], slot_arr, base, width, raised)
            at = stop
        if spec.launches:
            self.check_flags(raised, owned)
        if spec.lock:
            self.call_lock(1)
            self.locked = False
        for a, s, nbytes in spec.writebacks:  # (the program succeeded: its results go out)
            b.call(self.memcpy, [self.field(argv[a], self.abi.data, OBJ),
                                 self.field(vals[s], self.abi.data, OBJ), const(I64, nbytes)])

        returned = {s for k, s in spec.sources if k == "slot"}
        for al in spec.allocs:
            if al.slot not in returned:
                b.call(self.decref, [vals[al.slot]])
        for v in made:
            b.call(self.decref, [v])
        outs = []
        for kind, k in spec.sources:
            if kind == "slot":
                outs.append(vals[k])
                continue
            v = argv[k] if kind == "arg" else address(id(None))
            b.call(self.incref, [v])
            outs.append(v)
        for i, conv in enumerate(spec.converts):
            if conv:  # a 0-d result returned as a scalar: conv(array), the array dropped
                b.store(outs[i], cargs)
                r = b.call(self.vectorcall, [address(conv), cargs, const(I64, 1),
                                             ir.Constant(OBJ, None)])
                self.or_fail(r, outs)
                b.call(self.decref, [outs[i]])
                outs[i] = r
        if not spec.as_tuple:
            b.ret(outs[0])
            return str(self.module)
        t = b.call(self.tuple_new, [const(I64, len(outs))])
        self.or_fail(t, outs)
        for i, v in enumerate(outs):
            b.call(self.tuple_set, [t, const(I64, i), v])  # steals v; cannot fail here
        b.ret(t)
        return str(self.module)

    def launch_each(self, launches, vals, base, cargs, raised, owned) -> ir.Value:
        """Launches and calls, one call instruction each."""
        b = self.b
        for k in launches:
            if isinstance(k, Call):
                for j, s in enumerate(k.slots):
                    b.store(vals[s], b.gep(cargs, [const(I64, j)]))
                r = b.call(self.vectorcall, [address(k.fn), cargs, const(I64, len(k.slots)),
                                             ir.Constant(OBJ, None)])
                self.or_fail(r, owned)
                raised = b.or_(raised, b.trunc(b.call(self.as_long, [r]), I32))
                b.call(self.decref, [r])
                continue
            if k.work <= 0:
                continue
            for j, s in enumerate(k.slots):
                b.store(vals[s], b.gep(base, [const(I64, j)]))
            kernel = b.inttoptr(const(I64, k.fn), KERNEL.as_pointer(), name="kernel")
            scalars = (b.inttoptr(const(I64, k.scalars), I64.as_pointer()) if k.scalars
                       else ir.Constant(I64.as_pointer(), None))
            if k.checked:
                b.store(const(I64, 0), scalars)
            r = b.call(kernel, [const(I64, 0), const(I64, k.work), base, scalars])
            raised = b.or_(raised, r)
            if k.checked:
                self.to_fallback(b.icmp_unsigned("!=", b.load(scalars), const(I64, 0)), owned)
        return raised

    def to_fallback(self, cond: ir.Value, owned: list[ir.Value]) -> None:
        """Where cond holds (an index out of range): drop what the entry made,
        release the lock, and return what the fallback (the Python fast
        call) returns for the same arguments — it runs the call again and
        raises numpy's error. Nothing reached the caller's arrays yet."""
        b = self.b
        bad = self.fn.append_basic_block("to.fallback")
        ok = self.fn.append_basic_block("ok")
        b.cbranch(cond, bad, ok).set_weights([1, 1000])
        b.position_at_end(bad)
        for o in owned:
            b.call(self.decref, [o])
        if self.locked:
            self.call_lock(1)
        args, nargs, kwnames = self.call_args
        b.ret(b.call(self.vectorcall, [address(self.spec.fallback), args, nargs, kwnames]))
        b.position_at_end(ok)

    def launch_table(self, launches, slot_arr, base, width: int, raised) -> ir.Value:
        """A run of kernel launches as a loop over a constant table (each
        row: the kernel, its work, its scalars, its buffers' slots), so the
        entry's code does not grow with the number of launches."""
        b = self.b
        row = 3 + width
        cells = []
        for k in launches:
            slots = list(k.slots) + [k.slots[0]] * (width - len(k.slots))
            cells += [const(I64, v) for v in (k.fn, k.work, k.scalars, *slots)]
        table = self.table(I64, cells, "launches")
        pre = b.block
        loop = self.fn.append_basic_block("table")
        done = self.fn.append_basic_block("table.done")
        b.branch(loop)
        b.position_at_end(loop)
        i = b.phi(I64)
        acc = b.phi(I32)
        i.add_incoming(const(I64, 0), pre)
        acc.add_incoming(raised, pre)
        cell = b.gep(table, [b.mul(i, const(I64, row))])

        def word(j: int) -> ir.Value:
            return b.load(b.gep(cell, [const(I64, j)]))

        for j in range(width):
            obj = b.load(b.gep(slot_arr, [const(I64, 0), word(3 + j)]))
            b.store(obj, b.gep(base, [const(I64, j)]))
        kernel = b.inttoptr(word(0), KERNEL.as_pointer())
        r = b.call(kernel, [const(I64, 0), word(1), base, b.inttoptr(word(2), I64.as_pointer())])
        nacc = b.or_(acc, r)
        nxt = b.add(i, const(I64, 1))
        i.add_incoming(nxt, loop)
        acc.add_incoming(nacc, loop)
        b.cbranch(b.icmp_signed("<", nxt, const(I64, len(launches))), loop, done)
        b.position_at_end(done)
        return nacc

    def check_flags(self, raised: ir.Value, owned: list[ir.Value]) -> None:
        """Where a kernel raised IEEE exceptions: the Python check decides
        (the errstate); its exception drops the outputs and returns NULL."""
        b, spec = self.b, self.spec
        assert spec.check and len(spec.flags) == FLAG_VALUES
        fired = self.fn.append_basic_block("fpe")
        done = self.fn.append_basic_block("fpe.done")
        b.cbranch(b.icmp_unsigned("!=", raised, const(I32, 0)), fired, done).set_weights([1, 1000])
        b.position_at_end(fired)
        ints = self.table(OBJ, [address(a) for a in spec.flags], "flags")
        argv = b.gep(ints, [b.zext(b.and_(raised, const(I32, FLAG_VALUES - 1)), I64)])
        r = b.call(self.vectorcall,
                   [address(spec.check), argv, const(I64, 1), ir.Constant(OBJ, None)])
        if spec.undo:  # (the check raised: the arguments' old values back first)
            undo = self.fn.append_basic_block("fpe.undo")
            checked = self.fn.append_basic_block("fpe.checked")
            b.cbranch(b.icmp_unsigned("==", r, ir.Constant(OBJ, None)), undo, checked)
            b.position_at_end(undo)
            for a, u, nbytes, restore in reversed(spec.undo):
                if nbytes > 0:
                    b.call(self.memcpy, [self.field(self.vals[a], self.abi.data, OBJ),
                                         self.field(self.vals[u], self.abi.data, OBJ),
                                         const(I64, nbytes)])
                    continue
                saved = [b.alloca(OBJ) for _ in range(3)]
                b.call(self.err_fetch, saved)
                pair = b.alloca(ir.ArrayType(OBJ, 2))
                b.store(self.vals[a], b.gep(pair, [const(I64, 0), const(I64, 0)]))
                b.store(self.vals[u], b.gep(pair, [const(I64, 0), const(I64, 1)]))
                put = b.call(self.vectorcall, [address(restore),
                                               b.gep(pair, [const(I64, 0), const(I64, 0)]),
                                               const(I64, 2), ir.Constant(OBJ, None)])
                b.call(self.decref, [put])  # (Py_DecRef: NULL too)
                b.call(self.err_restore, [b.load(p) for p in saved])
            self.or_fail(r, owned)  # (NULL here: to the failure exit)
            b.unreachable()
            b.position_at_end(checked)
        self.or_fail(r, owned)
        b.call(self.decref, [r])
        b.branch(done)
        b.position_at_end(done)

    def check_value(self, c: ValueArg, obj: ir.Value) -> None:
        b = self.b
        if c.singleton:  # (None, True, False and small ints are one object each)
            self.require(b.icmp_unsigned("==", obj, address(id(c.value))), f"arg{c.arg}.is")
            return
        is_int = b.icmp_unsigned("==", self.field(obj, self.abi.ob_type, OBJ), address(id(int)))
        self.require(is_int, f"arg{c.arg}.int")
        overflow = b.alloca(I32)
        v = b.call(self.as_long_overflow, [obj, overflow])  # (no exception: overflow is set)
        self.require(self.all([b.icmp_signed("==", b.load(overflow), const(I32, 0)),
                               b.icmp_signed("==", v, const(I64, c.value))]), f"arg{c.arg}.value")

    def check(self, c: ArgCheck | ValueArg | FloatArg, obj: ir.Value) -> None:
        if isinstance(c, ValueArg):
            return self.check_value(c, obj)
        if isinstance(c, FloatArg):
            b = self.b
            is_float = b.icmp_unsigned("==", self.field(obj, self.abi.ob_type, OBJ),
                                       address(id(float)))
            self.require(is_float, f"arg{c.arg}.float")
            if c.bits is not None:  # (an exact float: cannot fail)
                bits = b.bitcast(b.call(self.as_double, [obj]), I64)
                self.require(b.icmp_signed("==", bits, const(I64, c.bits)), f"arg{c.arg}.bits")
            return None
        if isinstance(c, ContentsArg):  # (after the argument's array check)
            b = self.b
            data = self.field(obj, self.abi.data, OBJ)
            same = b.call(self.memcmp, [data, address(c.data), const(I64, c.nbytes)])
            return self.require(b.icmp_signed("==", same, const(I32, 0)), f"arg{c.arg}.contents")
        b, abi = self.b, self.abi
        is_array = b.icmp_unsigned("==", self.field(obj, abi.ob_type, OBJ), address(abi.array_type))
        self.require(is_array, f"arg{c.arg}.ndarray")
        # an exact ndarray: its descr, nd and flags can be read
        flags = self.field(obj, abi.flags, I32)
        conds = [b.icmp_unsigned("==", self.field(obj, abi.descr, OBJ), address(c.descr)),
                 b.icmp_signed("==", self.field(obj, abi.nd, I32), const(I32, len(c.shape)))]
        if c.layout == "C":
            conds.append(self.flag(flags, NPY_ARRAY_C_CONTIGUOUS, NPY_ARRAY_C_CONTIGUOUS))
        elif c.layout == "F":  # the Python guard's `f_contiguous and not c_contiguous`
            conds.append(self.flag(flags, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_F_CONTIGUOUS,
                                   NPY_ARRAY_F_CONTIGUOUS))
        if c.writeable:
            conds.append(self.flag(flags, NPY_ARRAY_WRITEABLE, NPY_ARRAY_WRITEABLE))
        self.require(self.all(conds), f"arg{c.arg}.descr")
        if not c.shape:
            return
        # nd matches: dimensions (and strides) hold nd entries each
        dims = self.field(obj, abi.dims, I64.as_pointer())
        conds = [b.icmp_signed("==", b.load(b.gep(dims, [const(I64, d)])), const(I64, n))
                 for d, n in enumerate(c.shape)]
        if not isinstance(c.layout, str):
            strides = self.field(obj, abi.strides, I64.as_pointer())
            conds += [b.icmp_signed("==", b.load(b.gep(strides, [const(I64, d)])), const(I64, s))
                      for d, s in enumerate(c.layout)]
        self.require(self.all(conds), f"arg{c.arg}.shape")

    def check_apart(self, x: ir.Value, nx: int, y: ir.Value, ny: int) -> None:
        """x and y (exact arrays, checked, whose bytes run from their data
        pointer: C- or F-contiguous, or strided with strides not negative)
        are distinct objects and their bytes [data, data + n) do not
        overlap (numpy's `may_share_memory`: bounds)."""
        b = self.b
        dx = b.ptrtoint(self.field(x, self.abi.data, OBJ), I64)
        dy = b.ptrtoint(self.field(y, self.abi.data, OBJ), I64)
        below = b.icmp_unsigned("<=", b.add(dx, const(I64, nx)), dy)
        above = b.icmp_unsigned("<=", b.add(dy, const(I64, ny)), dx)
        self.require(self.all([b.icmp_unsigned("!=", x, y), b.or_(below, above)]), "apart")

    def flag(self, flags: ir.Value, mask: int, want: int) -> ir.Value:
        b = self.b
        return b.icmp_unsigned("==", b.and_(flags, const(I32, mask)), const(I32, want))

    def all(self, conds: list[ir.Value]) -> ir.Value:
        acc = conds[0]
        for c in conds[1:]:
            acc = self.b.and_(acc, c)
        return acc

    def alloc(self, al: Alloc) -> ir.Value:
        b = self.b
        if al.static:
            b.call(self.incref, [address(al.static)])
            return address(al.static)
        if al.call is not None:
            fn, *call_args = al.call
            argv = self.table(OBJ, [address(a) for a in call_args], "callargs")
            return b.call(self.vectorcall, [address(fn), argv, const(I64, len(call_args)),
                                            ir.Constant(OBJ, None)])
        descr = address(al.descr)
        b.call(self.incref, [descr])  # PyArray_NewFromDescr steals it, even on failure
        dims = (self.table(I64, [const(I64, n) for n in al.shape], "shape") if al.shape
                else ir.Constant(I64.as_pointer(), None))
        null = ir.Constant(OBJ, None)
        # (subtype, descr, nd, dims, strides: C order, data: allocate, flags, obj)
        return b.call(self.new_array, [address(self.abi.array_type), descr,
                                       const(I32, len(al.shape)), dims,
                                       ir.Constant(I64.as_pointer(), None), null, const(I32, 0),
                                       null])


def entry_ir(spec: EntrySpec, abi: ArrayAbi) -> str:
    return EntryCodegen(spec, abi).emit()
