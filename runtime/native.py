"""Native entries: a JIT-compiled C function with CPython's METH_FASTCALL
signature, wrapped as a real builtin function, so a cached call of a tiny
compiled function costs one C call instead of a ctypes launch plus Python
guards.

This module is the plumbing around the entry's LLVM IR
(`lowering/codegen/entry.py`): where the fields of numpy's array object are,
numpy's C-API table (the `_ARRAY_API` capsule, the one `import_array()`
reads), the Python C-API symbols the IR calls (registered with LLVM by
address, so resolution does not depend on how Python was linked), and the
`PyMethodDef` + `PyCFunction_NewEx` that turn a function address into a
builtin. Everything the builtin's code points at (the method definition, the
fallback, descriptors, shape tuples) is kept alive by its `__self__`, a
`NativeEntry`.

`LOWERING_NATIVE_ENTRY=0` switches native entries off (read at compile time).
"""

from __future__ import annotations

import ctypes
import os
import sys
import sysconfig
from dataclasses import dataclass
from typing import Any

import llvmlite.binding as llvm
import numpy as np

from . import cpu

# numpy's ndarraytypes.h
NPY_ARRAY_C_CONTIGUOUS = 0x0001
NPY_ARRAY_F_CONTIGUOUS = 0x0002
NPY_ARRAY_WRITEABLE = 0x0400
# numpy's __multiarray_api.h: indices into the _ARRAY_API table
API_PyArray_Type = 2
API_PyArray_NewFromDescr = 94

METH_FASTCALL = 0x0080  # CPython's methodobject.h
METH_KEYWORDS = 0x0002
TUPLE_SIZE, TUPLE_ITEMS = 16, 24  # PyTupleObject: ob_size, ob_item (64-bit CPython)


@dataclass(frozen=True)
class ArrayAbi:
    """Byte offsets inside a PyArrayObject (after the object header: data,
    nd, dimensions, strides, base, descr, flags) and the addresses the entry
    compares against and calls."""

    ob_type: int
    data: int
    nd: int
    dims: int
    strides: int
    descr: int
    flags: int
    array_type: int  # &PyArray_Type


def _api_table() -> int:
    from numpy._core import _multiarray_umath

    capsule = _multiarray_umath._ARRAY_API
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = get(capsule, None)  # numpy creates the capsule without a name
    if not table:
        raise ImportError("lowering: numpy's _ARRAY_API capsule is empty")
    return table


def _entry(table: int, index: int) -> int:
    return ctypes.c_void_p.from_address(table + index * ctypes.sizeof(ctypes.c_void_p)).value or 0


def _abi() -> ArrayAbi:
    """The offsets, checked on a live strided array so a numpy whose object
    layout differs fails here, loudly, not as a wrong read in an entry."""
    word = ctypes.sizeof(ctypes.c_void_p)
    head = ctypes.sizeof(ctypes.c_ssize_t) + word  # refcount, type
    abi = ArrayAbi(ob_type=ctypes.sizeof(ctypes.c_ssize_t), data=head, nd=head + word,
                   dims=head + 2 * word, strides=head + 3 * word, descr=head + 5 * word,
                   flags=head + 6 * word, array_type=_entry(_api_table(), API_PyArray_Type))
    a = np.empty((3, 5), np.int32)[:, ::2]

    def ptr(off: int) -> int:
        return ctypes.c_void_p.from_address(id(a) + off).value or 0

    ok = (abi.array_type == id(np.ndarray) and ptr(abi.ob_type) == id(np.ndarray)
          and (abi.data, abi.strides) == cpu.ARRAY_OFFSETS
          and ctypes.c_int.from_address(id(a) + abi.nd).value == a.ndim
          and ptr(abi.descr) == id(a.dtype)
          and ctypes.c_int.from_address(id(a) + abi.flags).value == a.flags.num
          and tuple(ctypes.c_int64.from_address(ptr(abi.dims) + 8 * d).value for d in range(2))
          == a.shape)
    if not ok:
        raise ImportError("lowering: numpy's array object layout is not the one native "
                          "entries read (type, data, nd, dimensions, strides, base, descr, flags)")
    names = ("x", "y")  # a keyword names tuple: its size, then its items, after the header
    if not (ctypes.c_ssize_t.from_address(id(names) + TUPLE_SIZE).value == 2
            and ctypes.c_void_p.from_address(id(names) + TUPLE_ITEMS + word).value == id(names[1])):
        raise ImportError("lowering: a tuple's layout is not the one native entries read")
    return abi


def supported() -> tuple[bool, str]:
    """Whether this interpreter can run native entries, and why not."""
    if sys.maxsize != 2**63 - 1:
        return False, "not a 64-bit interpreter"
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return False, "free-threaded CPython (a different object header)"
    if sys.implementation.name != "cpython":
        return False, "not CPython"
    try:
        abi()
    except ImportError as e:
        return False, str(e)
    return True, ""


def enabled() -> bool:
    return os.environ.get("LOWERING_NATIVE_ENTRY", "1") != "0" and supported()[0]


_ABI: ArrayAbi | None = None


def abi() -> ArrayAbi:
    """The array ABI; the first call also registers the symbols the entry IR
    calls (`lowering/codegen/entry.py` declares them by these names)."""
    global _ABI
    if _ABI is None:
        abi = _abi()
        table = _api_table()

        def py(name: str) -> int:
            fn = getattr(ctypes.pythonapi, name, None)  # PyObject_Vectorcall: CPython >= 3.9
            return 0 if fn is None else ctypes.cast(fn, ctypes.c_void_p).value or 0

        symbols = {name: py(name) for name in ("Py_IncRef", "Py_DecRef", "PyObject_Vectorcall",
                                               "PyTuple_New", "PyTuple_SetItem", "PyLong_AsLong",
                                               "PyErr_Fetch", "PyErr_Restore")}
        symbols["PyArray_NewFromDescr"] = _entry(table, API_PyArray_NewFromDescr)
        for name, addr in symbols.items():
            if not addr:
                raise ImportError(f"lowering: no address for {name}")
            llvm.add_symbol(name, addr)
        _ABI = abi
    return _ABI


class PyMethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


_new_builtin = ctypes.pythonapi.PyCFunction_NewEx
_new_builtin.restype = ctypes.py_object
_new_builtin.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]


class NativeEntry:
    """Owner of a native entry: the builtin's `__self__`. Holds the method
    definition the builtin points at and every object whose address the
    entry's code embeds; `fallback` is the callable a guard miss goes to
    (its `.source` is the equivalent Python), `llvm_ir` the entry's IR and
    `spec` what it was generated from."""

    def __init__(self, name: str, fallback: Any, keep: list, llvm_ir: str, spec: Any = None):
        self.name = name
        self.spec = spec
        self.fallback = fallback
        self.source = getattr(fallback, "source", None)
        self.llvm_ir = llvm_ir
        self._keep = keep
        self._name = name.encode()
        keywords = bool(getattr(spec, "kwnames", ()))
        self._def = PyMethodDef(self._name, None,
                                METH_FASTCALL | (METH_KEYWORDS if keywords else 0), None)

    def builtin(self, address: int):
        """The builtin function calling the code at `address`; it keeps this
        owner (and so the method definition) alive as its `__self__`."""
        self._def.ml_meth = address
        return _new_builtin(ctypes.addressof(self._def), self, None)

    def __repr__(self) -> str:
        return f"<lowering native entry {self.name}>"


# (an entry is checks and calls: the optimizer's -O1 is enough)
ENTRY_SPEED = 1


def jit_entry(ir_text: str, name: str) -> int:
    return cpu.jit(ir_text, [name], "entry_modules", speed=ENTRY_SPEED)[name]
