"""numexpr: the workloads as string expressions.

numexpr evaluates every elementwise part, and the fused reductions
(`sum((x-m)*(x-m), 1)`); a plain row sum or max of an input goes through
numpy, since numexpr's own reductions are single-threaded and 3-12x slower
there (measured on 4096²). Float constants are passed as float32 variables:
a float literal in a numexpr string is a double and would turn the whole
expression into float64. W5 and W8 (matmuls, fancy indexing, autodiff) and
R1–R3 (Python control flow) are not expressible: see NOT_EXPRESSIBLE."""

from __future__ import annotations

import numpy as np

from .. import workloads as W
from .base import NotExpressible, Peer

f32 = np.float32
CONSTS = {
    "half": f32(0.5),
    "one": f32(1.0),
    "gelu_a": f32(0.044715),
    "gelu_c": f32(W.SQRT_2_OVER_PI),
    "p": f32(0.2316419),
    "a1": f32(W.CND_A1),
    "a2": f32(W.CND_A2),
    "a3": f32(W.CND_A3),
    "a4": f32(W.CND_A4),
    "a5": f32(W.CND_A5),
    "rsqrt2pi": f32(W.RSQRT2PI),
    "r": f32(W.BS_R),
    "v": f32(W.BS_V),
    "mu": f32(W.BS_R + 0.5 * W.BS_V * W.BS_V),
}


def _cnd(d: str) -> str:
    k = f"(one / (one + p * abs({d})))"
    ret = (
        f"(rsqrt2pi * exp(-half * {d} * {d}) * "
        f"({k} * (a1 + {k} * (a2 + {k} * (a3 + {k} * (a4 + {k} * a5))))))"
    )
    return f"where({d} > 0, one - {ret}, {ret})"


CND_D1, CND_D2 = _cnd("d1"), _cnd("d2")

# why a workload has no numexpr version: an expression has no matmul, no
# fancy indexing, no derivatives, and no control flow (no `if`, no loop, no
# indexed store), so R1–R3 would be Python around several evaluate calls
_CONTROL_FLOW = (
    "numexpr evaluates one expression with no control flow: the data-dependent "
    "`if y.sum() > 0` needs Python between evaluate calls (a reduction can only be "
    "an expression's last operation), or a where() that computes both sides"
)
NOT_EXPRESSIBLE = {
    "W5": "numexpr has no matmul and no fancy-index gather/scatter",
    "W8": "numexpr has no matmul, no fancy-index gather and no automatic differentiation",
    "R1": _CONTROL_FLOW,
    "R2": _CONTROL_FLOW,
    "R3": (
        "numexpr has no loops and no indexed stores: the 200-iteration row loop would be "
        "Python around 200 evaluate calls (or rewritten as one broadcast expression)"
    ),
}


class NumexprPeer(Peer):
    name = "numexpr"
    module = "numexpr"

    def info(self):
        import numexpr as ne

        return {
            "version": ne.__version__,
            "threads": ne.get_num_threads(),
            "vml": bool(getattr(ne, "use_vml", False)),
        }

    def prepare(self, w, inputs):
        import numexpr as ne

        def ev(expr, **names):
            return ne.evaluate(expr, local_dict={**CONSTS, **names})

        def layernorm(x, w_, b):
            inv_d = f32(1.0 / x.shape[-1])
            mean = x.sum(axis=1, keepdims=True) * inv_d
            var = ev("sum((x - mean) * (x - mean), 1)", x=x, mean=mean)
            rstd = (f32(1.0) / np.sqrt(var * inv_d + f32(W.LN_EPS)))[:, None]
            return ev("(x - mean) * rstd * w + b", x=x, mean=mean, rstd=rstd, w=w_, b=b)

        def softmax(x):
            m = x.max(axis=1, keepdims=True)
            e = ev("exp(x - m)", x=x, m=m)
            s = e.sum(axis=1, keepdims=True)
            return ne.evaluate("e / s", local_dict={"e": e, "s": s}, out=e)

        def bias_gelu(x, b):
            return ev(
                "half * (x + b) * (one + tanh(gelu_c * ((x + b) + gelu_a * (x + b)**3)))", x=x, b=b
            )

        def rmsnorm(x, w_):
            ms = ev("sum(x * x, 1)", x=x) * f32(1.0 / x.shape[-1])
            rstd = (f32(1.0) / np.sqrt(ms + f32(W.RMS_EPS)))[:, None]
            return ev("x * rstd * w", x=x, rstd=rstd, w=w_)

        def axpb(x):
            return ne.evaluate("x * 2 + 1", local_dict={"x": x})

        def black_scholes(S, K, T):
            sqrt_t = ev("sqrt(T)", T=T)
            d1 = ev("(log(S / K) + mu * T) / (v * sqrt_t)", S=S, K=K, T=T, sqrt_t=sqrt_t)
            d2 = ev("d1 - v * sqrt_t", d1=d1, sqrt_t=sqrt_t)
            c1, c2 = ev(CND_D1, d1=d1), ev(CND_D2, d2=d2)
            k_exp = ev("K * exp(-r * T)", K=K, T=T)
            call = ev("S * c1 - k_exp * c2", S=S, c1=c1, k_exp=k_exp, c2=c2)
            put = ev("k_exp * (one - c2) - S * (one - c1)", S=S, c1=c1, k_exp=k_exp, c2=c2)
            return call, put

        impl = {
            "W1": layernorm,
            "W2": softmax,
            "W3": bias_gelu,
            "W4": rmsnorm,
            "W6": axpb,
            "W7": black_scholes,
        }.get(w.key)
        if impl is None:
            raise NotExpressible(NOT_EXPRESSIBLE.get(w.key, f"no numexpr version of {w.key}"))
        return lambda: impl(*inputs)
