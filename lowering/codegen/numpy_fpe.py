"""numpy's own IEEE flags where they depend on the CPU it runs on, probed
from numpy on that CPU (once per process, when a kernel first needs them).

Why: a compiled kernel raises the flags numpy raises for the same inputs
(`KernelCodegen.math_flags` works them out from the inputs and the result),
and at some inputs numpy's flags are not IEEE's but those of whichever loop
its SIMD dispatch picked. With AVX-512 (X86_V4), numpy runs SVML's loops
for many functions; with AVX2 only, glibc's libm or numpy's own SIMD code:
glibc's expm1, log1p, sinh, tan, arctan and arcsin flag underflow for a
subnormal x (their result, about x, is tiny and inexact) where SVML's do
not; numpy's float32 sin/cos square x (underflow below about 2^-62);
glibc's pow(+-0, -inf) raises no divide, its powf no underflow for an exact
tiny result (2^-149 ** 1). A table written down on one machine is wrong on
the other, so the table is measured on the running one:

- `tiny_input_underflows[(name, type)]`: numpy raises underflow for name(x)
  where 0 < |x| < bound (a binary search on the bit pattern below 1.0, then
  checked to be such an interval; no entry where numpy raises none);
- `pow_pole_divides[type]`: whether numpy raises divide for (+0.0, -0.0)
  ** -inf;
- `pow_inf_overflows[type]`: numpy raises overflow for x ** +inf where
  bound <= |x| < inf (glibc once squared x there); no entry where it
  raises none;
- `pow_exact_tiny_underflows[type]`: whether numpy raises underflow for an
  exactly representable tiny power (2^k ** y with an integer y k).

A type is LLVM's element type name ("half", "float", "double"), as
`math_flags` sees it. Every probe runs on arrays of both signs with a SIMD
body and a tail, so that the flag of either of numpy's code paths counts
(more flags than numpy only cost the caller an eager re-run; fewer would be
wrong). The tiny-input table has no "half" entries: float16 functions are
computed in float32 and rounded (`llvm_ops`), and the rounding raises what
numpy's own rounding raises.

`LOWERING_NUMPY_FPE=path` reads the table from a JSON file (`write` makes
one) instead: tests/process_replay.py pins it so that the recorded kernels
do not depend on the host. The compile cache's key holds `digest()`
(`cpu_cache.environment`), so that no kernel built for another table is
reused."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dialects.dtypes import finfo

TYPES = {"half": np.float16, "float": np.float32, "double": np.float64}
_UINT = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}
N = 37  # lanes of a probe: a SIMD body and a tail at any vector width


@dataclass(frozen=True)
class Table:
    tiny_input_underflows: dict[tuple[str, str], float]
    pow_pole_divides: dict[str, tuple[bool, bool]]
    pow_inf_overflows: dict[str, float]
    pow_exact_tiny_underflows: dict[str, bool]

    def to_json(self) -> dict:
        return {
            "tiny_input_underflows": {f"{n} {t}": v.hex()
                                      for (n, t), v in sorted(self.tiny_input_underflows.items())},
            "pow_pole_divides": {t: list(v) for t, v in sorted(self.pow_pole_divides.items())},
            "pow_inf_overflows": {t: v.hex() for t, v in sorted(self.pow_inf_overflows.items())},
            "pow_exact_tiny_underflows": dict(sorted(self.pow_exact_tiny_underflows.items())),
        }

    @classmethod
    def from_json(cls, d: dict) -> Table:
        tiny = {tuple(k.split()): float.fromhex(v) for k, v in d["tiny_input_underflows"].items()}
        if any(len(k) != 2 or k[1] not in TYPES for k in tiny):
            raise ValueError("tiny_input_underflows: keys are 'name type'")
        poles = {t: (bool(a), bool(b)) for t, (a, b) in d["pow_pole_divides"].items()}
        exact = {t: bool(v) for t, v in d["pow_exact_tiny_underflows"].items()}
        if set(poles) != set(TYPES) or set(exact) != set(TYPES):
            raise ValueError(f"pow_pole_divides and pow_exact_tiny_underflows name {sorted(TYPES)}")
        over = {t: float.fromhex(v) for t, v in d["pow_inf_overflows"].items()}
        return cls(tiny, poles, over, exact)  # type: ignore[arg-type]


def _raises(flag: str, fn, *args) -> bool:
    with np.errstate(all="ignore", **{flag: "raise"}):
        try:
            fn(*args)
        except FloatingPointError:
            return True
    return False


def _value(bits: int, dtype) -> float:
    return float(np.array(bits, _UINT[dtype]).view(dtype))


def _bits(v: float, dtype) -> int:
    return int(np.array(v, dtype).view(_UINT[dtype]))


def _lanes(bits, dtype) -> np.ndarray:
    """The values of bit pattern(s) `bits` and their negatives, repeated to N
    lanes at least."""
    v = np.atleast_1d(np.asarray(bits, _UINT[dtype])).view(dtype)
    a = np.concatenate([v, -v])
    return np.resize(a, max(N, a.size))


def _spread(lo: int, hi: int, n: int = 64) -> list[int]:
    """n bit patterns from lo to hi (both in): about evenly in log |x|."""
    return sorted({lo + (hi - lo) * i // (n - 1) for i in range(n)})


def _boundary(raises, raises_any, inner: int, outer: int, what: str) -> int:
    """The first bit pattern from `inner` (where numpy raises) towards `outer`
    (where it does not) at which numpy stops raising: a binary search, then
    checked on samples to be one interval. Where numpy raises past it too,
    the boundary moves past the farthest sample that raises; where it is
    quiet at a sample inside, the interval stays. Either way the kernels
    flag more than numpy, never less (with a warning: an eager re-run of
    those calls)."""
    step = 1 if outer > inner else -1
    a, b = inner, outer
    while abs(b - a) > 1:
        mid = (a + b) // 2
        a, b = (mid, b) if raises(mid) else (a, mid)
    past = _spread(b, outer)
    loud = [p for p in past if raises(p)] if raises_any(past) else []
    if loud:
        b = (max(loud) if step > 0 else min(loud)) + step
    if loud or not all(raises(p) for p in _spread(inner, a, 16)):
        warnings.warn(f"lowering: numpy raises {what} in more than one interval; compiled "
                      f"kernels flag it up to one bound (more flags than numpy)",
                      RuntimeWarning, stacklevel=3)
    return b


def _tiny_input_bound(fn, dtype) -> float | None:
    """|x| below which numpy raises underflow for fn(x) (x != 0), or None."""
    def raises(bits):
        return raises_any([bits])

    def raises_any(bits):
        return _raises("under", fn, _lanes(bits, dtype))

    one = _bits(1.0, dtype)
    if not raises(1):
        return None
    if raises(one):  # (not a tiny input's flag: math_flags' own rules)
        return None
    what = f"underflow for {fn.__name__} of tiny {np.dtype(dtype).name} inputs"
    return _value(_boundary(raises, raises_any, 1, one, what), dtype)


def _pow_inf_overflow_bound(dtype) -> float | None:
    """|x| from which numpy raises overflow for x ** +inf, or None."""
    def raises(bits):
        return raises_any([bits])

    def raises_any(bits):
        x = _lanes(bits, dtype)
        return _raises("over", np.power, x, np.full(x.size, np.inf, dtype))

    one, top = _bits(1.0, dtype), _bits(float(finfo(dtype).max), dtype)
    if not raises(top) or raises(one):
        return None
    what = f"overflow for {np.dtype(dtype).name} x ** inf"
    return _value(_boundary(raises, raises_any, top, one, what) + 1, dtype)


def _pow_exact_tiny_underflows(dtype) -> bool:
    """Whether numpy flags tiny powers that are exact (2^k ** y, y k an
    integer): the smallest subnormal ** 1, 2^-s ** 1, 0.5 ** s, 2^-j ** 2."""
    f = finfo(dtype)
    bias, mant = 1 - f.minexp, f.nmant  # (127, 23 for float32)
    s = bias - 1 + mant // 2  # 2^-s is subnormal, and so is 2^-2j
    j = (s + 1) // 2
    pts = [(2.0 ** (1 - bias - mant), 1.0), (2.0 ** -s, 1.0), (0.5, float(s)), (2.0 ** -j, 2.0)]
    x = np.resize(np.array([p[0] for p in pts], dtype), N)
    y = np.resize(np.array([p[1] for p in pts], dtype), N)
    return _raises("under", np.power, x, y)


def unary() -> list[str]:
    """The unary functions whose flags `math_flags` works out (`llvm_math`'s)."""
    from .llvm_types import llvm_math

    return [] if llvm_math is None else [n for n, k in llvm_math.SUPPORTED.items() if k == 1]


def probe() -> Table:
    """The table of the numpy this process runs, on this CPU."""
    tiny = {}
    for name in unary():
        fn = getattr(np, name)
        for t in ("float", "double"):
            bound = _tiny_input_bound(fn, TYPES[t])
            if bound is not None:
                tiny[(name, t)] = bound
    poles, over, exact = {}, {}, {}
    for t, dtype in TYPES.items():
        minf = np.full(N, -np.inf, dtype)
        poles[t] = tuple(_raises("divide", np.power, np.full(N, z, dtype), minf)
                         for z in (0.0, -0.0))
        bound = _pow_inf_overflow_bound(dtype)
        if bound is not None:
            over[t] = bound
        exact[t] = _pow_exact_tiny_underflows(dtype)
    return Table(tiny, poles, over, exact)  # type: ignore[arg-type]


_table: Table | None = None
_lock = threading.Lock()


def table() -> Table:
    """The process's table: `$LOWERING_NUMPY_FPE`'s, else probed (once)."""
    global _table
    with _lock:
        if _table is None:
            path = os.environ.get("LOWERING_NUMPY_FPE")
            _table = load(Path(path)) if path else probe()
        return _table


def load(path: Path) -> Table:
    return Table.from_json(json.loads(path.read_text()))


def write(path: Path, t: Table | None = None) -> None:
    path.write_text(json.dumps((t or table()).to_json(), indent=1) + "\n")


def digest() -> str:
    """sha256 of the process's table (in the compile cache's key)."""
    return hashlib.sha256(json.dumps(table().to_json(), sort_keys=True).encode()).hexdigest()

