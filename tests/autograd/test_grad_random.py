"""Random differentiable programs (`programs.grad_programs`): lowering's
gradients against central finite differences and against HIPS autograd
running the same op list on `autograd.numpy`."""

from __future__ import annotations

import warnings

import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given

import lowering
from lowering.testing import examples

from .programs import (
    GradProgram,
    assert_grads_close,
    grad_programs,
    kink_signature,
    run,
    same_piece,
)

# Finite differences: the 4-point central stencil (truncation error O(h^4))
# with h = 1e-4 leaves about eps * |f| / h ~ 1e-12 |f| of rounding noise and
# h^4 ~ 1e-16 of truncation for the bounded ops of grad_programs; observed
# errors stay below 1e-10 relative, so 1e-7 leaves room without hiding a
# wrong rule (those are off by O(1)).
FD_STEP = 1e-4
FD_RTOL = 1e-7  # relative to the gradient's largest component
FD_ATOL = 1e-10  # times 1 + |f|: the noise of f's own rounding
STENCIL = ((-2, 1.0), (-1, -8.0), (1, 8.0), (2, -1.0))  # (offset in steps, weight / 12h)


def finite_differences(prog: GradProgram) -> list[np.ndarray] | None:
    """The gradient of prog by finite differences on numpy; None when a step
    changes the branch of a kink op (abs, maximum, max, where), i.e. the
    stencil straddles a kink."""
    base = kink_signature(prog, prog.args)
    out = []
    for k, a in enumerate(prog.args):
        g = np.empty(a.shape)
        for idx in np.ndindex(a.shape):
            total = 0.0
            for s, w in STENCIL:
                xs = [np.array(x) for x in prog.args]
                xs[k][idx] += s * FD_STEP
                kinks: list = []
                with np.errstate(all="ignore"):
                    total += w * float(run(prog, np, xs, kinks))
                if not same_piece(kinks, base):
                    return None
            g[idx] = total / (12 * FD_STEP)
        out.append(g)
    return out


def lowering_grads(prog: GradProgram, backend: str | None = None) -> tuple:
    argnums = tuple(range(prog.n_inputs))
    g = lowering.grad(prog.fn(np), argnums=argnums)
    if backend is not None:
        g = lowering.compile(g, backend=backend)
    return g(*prog.args)


def hips_grads(prog: GradProgram) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Output seems independent of input."
        return autograd.grad(lambda xs: run(prog, anp, xs))([np.array(a) for a in prog.args])


def test_grad_matches_finite_differences():
    """Eager `lowering.grad` (the default backend) against finite differences
    on programs drawn away from kinks (inputs jittered; examples whose stencil
    still crosses a kink are discarded, and most must be kept)."""
    tried, checked = [], []

    @examples(2)
    @given(grad_programs(ties=False))
    def check(prog):
        tried.append(prog)
        want = finite_differences(prog)
        if want is None:
            return
        got = lowering_grads(prog)
        f = abs(float(run(prog, np, prog.args)))
        for k, (g, w) in enumerate(zip(got, want)):
            assert g.shape == w.shape and g.dtype == np.float64, (g.shape, g.dtype, prog)
            err = float(np.max(np.abs(g - w)))
            tol = FD_RTOL * float(np.max(np.abs(w))) + FD_ATOL * (1 + f)
            assert err <= tol, (f"gradient {k}: max error {err:.3e} > {tol:.3e} vs finite "
                                f"differences\n got={g!r}\nwant={w!r}\n{prog!r}")
        checked.append(prog)

    check()
    assert len(checked) >= max(1, len(tried) * 3 // 4), \
        f"only {len(checked)} of {len(tried)} programs were away from kinks"


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@examples(4)
@given(prog=grad_programs(ties=True))
def test_grad_matches_hips_autograd(backend, prog):
    """Same op list, HIPS autograd on autograd.numpy vs compile(grad(f)):
    equal to the "gradient" tolerance, ties and kinks included (both take
    the same subgradients: maximum/minimum split ties, abs'(0) = 0, max
    reductions share among ties)."""
    want = hips_grads(prog)
    got = lowering_grads(prog, backend)
    assert isinstance(got, tuple) and len(got) == prog.n_inputs
    assert_grads_close(got, want, prog.rtol(), f"gradient ({backend})", repr(prog))
