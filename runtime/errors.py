"""Floating-point exceptions of a program call, in numpy's terms.

Kernels return the sticky IEEE exception flags they raised (x86 MXCSR bits;
`lowering/codegen/llvm.py: fp_flags_wrapper`), numpy externs report theirs
through numpy's own error handling (`Collector`), and the numpy
reference backend collects them per op the same way. After a call, a fired
category that the calling thread's `np.errstate` does not ignore makes the
program raise `FloatingPointFlags` instead of returning: the caller re-runs
the function eagerly so that numpy itself warns or raises, exactly.

Reading the error state is on the hot path only when a flag fired; it is one
context-variable read (`numpy._core.umath._extobj_contextvar`: numpy 2 keeps
the errstate there, one capsule per `errstate` block) and an identity check
against the last capsule seen, whose mask is kept."""

from __future__ import annotations

import errno

from numpy._core import umath as _umath

# x86 MXCSR exception flags (the four numpy acts on; DE and PE it ignores)
MXCSR_IE, MXCSR_ZE, MXCSR_OE, MXCSR_UE = 0x01, 0x04, 0x08, 0x10
# numpy's ufunc error bits (the `flag` argument of an errstate `call`)
NPY_DIVIDE, NPY_OVER, NPY_UNDER, NPY_INVALID = 1, 2, 4, 8

# category (np.errstate's keyword) -> MXCSR bit, in numpy's order
CATEGORIES = (("divide", MXCSR_ZE), ("over", MXCSR_OE), ("under", MXCSR_UE),
              ("invalid", MXCSR_IE))
_FROM_NPY = ((NPY_DIVIDE, MXCSR_ZE), (NPY_OVER, MXCSR_OE), (NPY_UNDER, MXCSR_UE),
             (NPY_INVALID, MXCSR_IE))


class FloatingPointFlags(Exception):
    """A program call raised IEEE exceptions that the current `np.errstate`
    does not ignore. `categories`: the fired ones, named as `np.errstate`'s
    keywords ("divide", "over", "under", "invalid"), in that order: those
    whose mode is not 'ignore' ('warn', 'raise', 'call', 'print', 'log').
    No result of the call reached the caller's arrays."""

    def __init__(self, categories: tuple[str, ...]):
        super().__init__(f"floating-point exceptions: {', '.join(categories)}")
        self.categories = categories


def categories(bits: int) -> tuple[str, ...]:
    """The category names of MXCSR-encoded flags."""
    return tuple(name for name, bit in CATEGORIES if bits & bit)


def from_numpy(flag: int) -> int:
    """numpy's error bits (UFUNC_FPE_*) as MXCSR bits."""
    return sum(bit for npy, bit in _FROM_NPY if flag & npy)


_var = _umath._extobj_contextvar
_last: tuple[object, int] = (None, 0)  # (the last errstate capsule, its mask of MXCSR bits)


def reported_mask() -> int:
    """MXCSR bits of the categories the calling thread's errstate does not
    ignore."""
    global _last
    cap = _var.get()
    last = _last
    if last[0] is not cap:  # a new errstate (holding `cap` keeps its identity unique)
        state = _umath._get_extobj_dict()
        last = (cap, sum(bit for name, bit in CATEGORIES if state[name] != "ignore"))
        _last = last
    return last[1]


def reported_categories() -> tuple[str, ...]:
    """The categories (np.errstate's keywords, in numpy's order) the calling
    thread's errstate does not ignore: what a program compiled now keeps
    unused ops for (`passes/keep_flags.py`)."""
    return categories(reported_mask())


def mask_of(names) -> int:
    """MXCSR bits of category names."""
    return sum(bit for name, bit in CATEGORIES if name in names)


def check(bits: int) -> None:
    """Raise FloatingPointFlags for the fired flags the errstate acts on."""
    bits &= reported_mask()
    if bits:
        raise FloatingPointFlags(categories(bits))


class Collector:
    """The errstate that sends every category to a handler keeping the
    flags numpy reports (as MXCSR bits): numpy externs run under it, so that
    numpy's own detection (cleared before each ufunc loop, read after it) is
    what counts. One per program (its calls are serialized by its lock) or
    per call. (The handler holds only the flags: an errstate capsule is not
    garbage-collected, so it must not hold its collector.)"""

    def __init__(self) -> None:
        seen = self._seen = [0]

        def handler(kind: str, flag: int) -> None:
            seen[0] |= from_numpy(flag)

        self.extobj = _umath._make_extobj(all="call", call=handler)

    @property
    def bits(self) -> int:
        """The flags reported since `enter`."""
        return self._seen[0]

    def enter(self):
        """Switch the calling thread to this errstate; the token for `exit`."""
        self._seen[0] = 0
        return _var.set(self.extobj)

    def exit(self, token) -> None:
        _var.reset(token)


def as_numpy(e: BaseException) -> BaseException:
    """Mark `e` as the error numpy raises here (a numpy routine's own, or an
    index check's IndexError made as numpy's): the call re-runs eagerly and
    numpy raises it. Any other error out of a program is a failure of the
    compiled program itself."""
    e._lowering_numpy = True  # type: ignore[attr-defined]
    return e


def raised_as_numpy(e: BaseException) -> bool:
    """Whether a program's error is numpy's (`as_numpy`, the IEEE flags numpy
    acts on, memory running out), not a failure of the program itself."""
    return (isinstance(e, (FloatingPointFlags, MemoryError))
            or (isinstance(e, OSError) and e.errno == errno.ENOMEM)  # (the pool's mmap)
            or getattr(e, "_lowering_numpy", False))
