"""Random draws of a device entry, made on the device.

A compiled function that draws random numbers (`rng.standard_normal(n)`,
`np.random.rand(k)`, ...) feeds each draw to its graph as an input
(lowering/capture/random.py). On the host the values are numpy's own. On
a device entry (backend="gpu", device arrays) they are made on the device
by a counter-based generator, Philox4x32-10 (the generator of Triton's
`tl.randint4x`, which Inductor uses), so no draw is copied from the host:

- Not numpy's stream. Each draw takes one 64-bit seed from the caller's
  generator (numpy's `bytes(8)` of it, so the generator advances by that
  one draw instead of the values' worth) and makes element i from Philox
  at (seed, i). The same generator state gives the same values: seeding
  numpy reproduces a run, and two calls draw different values. (The
  first call of a function on device arrays runs on host copies, with
  numpy's values: it is the call that traces and compiles.)
- Distributions: uniform (`random`, `random_sample`, `ranf`, `sample`,
  `rand`, `uniform(low, high)`) and normal (`standard_normal`, `randn`,
  `normal(loc, scale)`), with scalar parameters, in float32 or float64.
  float64 uniforms have 53 random bits (numpy's construction from two
  32-bit words); normals are Box-Muller pairs. Any other draw keeps the
  entry on host copies (`explain` says why).
"""

from __future__ import annotations

import numpy as np

from runtime import gpu

UNIFORM = frozenset(["random", "random_sample", "ranf", "sample", "rand", "uniform"])
NORMAL = frozenset(["standard_normal", "randn", "normal"])
# each distribution's parameters, as numpy names and orders them, and defaults
_PARAMS = {"uniform": (("low", 0.0), ("high", 1.0)), "normal": (("loc", 0.0), ("scale", 1.0))}

BLOCK = 1024
SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def philox(seed, c0):
    # Philox4x32-10 of counter (c0, 0, 0, 0) under the 64-bit key `seed`
    # (the generator of Triton's tl.randint4x, written out here: the same
    # source then runs compiled and in Triton's interpreter)
    seed = seed.to(tl.uint64)
    k0 = (seed & 0xFFFFFFFF).to(tl.uint32)
    k1 = ((seed >> 32) & 0xFFFFFFFF).to(tl.uint32)
    c0 = c0.to(tl.uint32)
    c1 = c0 * 0
    c2 = c0 * 0
    c3 = c0 * 0
    for _ in tl.static_range(10):
        a0 = c0
        a2 = c2
        c0 = tl.umulhi(0xCD9E8D57, a2) ^ c1 ^ k0
        c2 = tl.umulhi(0xD2511F53, a0) ^ c3 ^ k1
        c1 = a2 * 0xCD9E8D57
        c3 = a0 * 0xD2511F53
        k0 = k0 + 0x9E3779B9
        k1 = k1 + 0xBB67AE85
    return c0, c1, c2, c3


@triton.jit
def philox_fill(out, n, seed, ab, NORMAL: tl.constexpr, F64: tl.constexpr,
                BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(ab)  # (float64 parameters: a Python float argument would be float32)
    b = tl.load(ab + 1)
    r0, r1, r2, r3 = philox(seed, offs)
    if F64:
        # 53 random bits per uniform, as numpy makes a double of two words
        u = ((r0 >> 5).to(tl.float64) * 67108864.0 + (r1 >> 6).to(tl.float64)) \\
            * 1.1102230246251565e-16
        if NORMAL:
            v = ((r2 >> 5).to(tl.float64) * 67108864.0 + (r3 >> 6).to(tl.float64)) \\
                * 1.1102230246251565e-16
            x = tl.sqrt(-2.0 * tl.log(1.0 - u)) * tl.cos(6.283185307179586 * v)
        else:
            x = u
    else:
        u = (r0 >> 8).to(tl.float32) * 5.9604644775390625e-08  # 24 bits: [0, 1)
        if NORMAL:
            v = (r1 >> 8).to(tl.float32) * 5.9604644775390625e-08
            x = tl.sqrt(-2.0 * tl.log(1.0 - u)) * tl.cos(6.2831854820251465 * v)
        else:
            x = u
    tl.store(out + offs, (a + b * x.to(tl.float64)).to(out.dtype.element_ty), mask=mask)
'''


class _Kernel:  # what triton_launch.load reads of a kernel
    source = SOURCE
    fn_name = "philox_fill"


def why_not(draw, dtype) -> str:
    """Why `draw` cannot be made on the device ("" where it can)."""
    if draw.method not in UNIFORM and draw.method not in NORMAL:
        return f"it draws random numbers with {draw.method}, which has no device generator"
    if np.dtype(dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        return f"it draws random numbers of dtype {dtype} (float32 and float64 only)"
    try:
        a, b = _affine(draw)
    except (TypeError, ValueError):
        return f"{draw.method} takes array parameters here (scalars only on the device)"
    return ""


def _affine(draw) -> tuple[float, float]:
    """(a, b) of the draw's values a + b * x, x the standard distribution's."""
    kind = "uniform" if draw.method == "uniform" else "normal" if draw.method == "normal" else None
    if kind is None:
        return 0.0, 1.0
    (n0, d0), (n1, d1) = _PARAMS[kind]
    args = list(draw.args[:2])
    p0 = args[0] if len(args) > 0 else draw.kwargs.get(n0, d0)
    p1 = args[1] if len(args) > 1 else draw.kwargs.get(n1, d1)
    if np.ndim(p0) or np.ndim(p1):
        raise ValueError("array parameters")
    p0, p1 = float(p0), float(p1)
    return (p0, p1 - p0) if kind == "uniform" else (p0, p1)


class DeviceDraw:
    """One draw of a device entry: `seed(sources)` takes its seed from the
    caller's generator, `fill(dev, out, seed)` writes its values into the
    device array `out` (contiguous, the draw's shape and dtype)."""

    def __init__(self, draw, shape: tuple[int, ...], dtype):
        self.draw = draw
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.size = int(np.prod(shape, dtype=np.int64))
        if self.size >= 2**31:
            raise ValueError("a device draw of 2**31 or more values")
        self.a, self.b = _affine(draw)
        self.normal = draw.method in NORMAL
        self._params: dict = {}  # device -> its float64 array [a, b]

    def seed(self, sources: list) -> int:
        return int.from_bytes(self.draw.generator(sources).bytes(8), "little") >> 1

    def make(self, dev: gpu.Device, sources: list):
        out = dev.empty(self.shape, self.dtype)
        self.fill(dev, out, self.seed(sources))
        return out

    def fill(self, dev: gpu.Device, out, seed: int) -> None:
        if self.size == 0:
            return
        from .backends.triton_launch import load

        fn = load(_Kernel, interpret=dev.interpreted)
        grid = ((self.size + BLOCK - 1) // BLOCK,)
        where = dev.where()
        ab = self._params.get(where)
        if ab is None:
            ab = self._params[where] = dev.from_host(np.array([self.a, self.b]))
        args = (dev.launch_arg(out), self.size, seed, dev.launch_arg(ab))
        consts = {"NORMAL": self.normal, "F64": self.dtype == np.float64, "BLOCK": BLOCK}
        if dev.interpreted:
            with np.errstate(all="ignore"):
                fn[grid](*args, **consts)
        else:
            fn[grid](*args, **consts)


def draws_of(prog, bindings) -> list:
    """(program input, its DeviceDraw) for each random draw a device
    entry's program takes (a binding that is not an argument's index)."""
    return [(i, DeviceDraw(b, *prog.input_types[i]))
            for i, b in enumerate(bindings) if type(b) is not int]


def generator_states(draws: list, sources: list) -> list:
    """The generators' states before a call's seeds are taken (restored
    where the call does not complete on the device)."""
    out = []
    for d in draws:
        g = d.draw.generator(sources)
        bg = getattr(g, "bit_generator", None)
        out.append((g, bg.state if bg is not None else g.get_state()))
    return out


def restore(states: list) -> None:
    for g, st in reversed(states):
        bg = getattr(g, "bit_generator", None)
        if bg is not None:
            bg.state = st
        else:
            g.set_state(st)
