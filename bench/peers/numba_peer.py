"""numba: `@njit(parallel=True, fastmath=True)` with a prange loop written
for each workload (W5's matmuls go through numba's BLAS binding, np.dot;
R1/R2's branch is an `if` on a prange sum, R3's row loop the prange loop).

Constants are float32 globals (numba freezes globals at compile time, with
their type), and accumulators float32, so every kernel computes in float32
like the numpy program; fastmath lets LLVM reassociate the row sums into
vector partial sums."""

from __future__ import annotations

import numpy as np

from .. import workloads as W
from .base import NotExpressible, Peer

f32 = np.float32
LN_EPS, RMS_EPS = f32(W.LN_EPS), f32(W.RMS_EPS)
HALF, ONE, TWO, THREE, ZERO = f32(0.5), f32(1.0), f32(2.0), f32(3.0), f32(0.0)
GELU_A, GELU_C = f32(0.044715), f32(W.SQRT_2_OVER_PI)
CND_P, RSQRT2PI = f32(0.2316419), f32(W.RSQRT2PI)
A1, A2, A3, A4, A5 = (f32(a) for a in (W.CND_A1, W.CND_A2, W.CND_A3, W.CND_A4, W.CND_A5))
BS_R, BS_V, BS_MU = f32(W.BS_R), f32(W.BS_V), f32(W.BS_R + 0.5 * W.BS_V * W.BS_V)
ROW_FILL_ROWS = W.ROW_FILL_ROWS

NOT_EXPRESSIBLE = {"W8": "numba has no automatic differentiation"}

_KERNELS: dict | None = None


def _kernels() -> dict:
    """Define (not compile: numba compiles at the first call) the kernels."""
    global _KERNELS
    if _KERNELS is not None:
        return _KERNELS
    from numba import njit, prange

    jit = njit(parallel=True, fastmath=True)

    @jit
    def layernorm(x, w, b):
        n, d = x.shape
        inv_d = ONE / f32(d)
        out = np.empty_like(x)
        for i in prange(n):
            row, o = x[i], out[i]
            s = ZERO
            for j in range(d):
                s += row[j]
            mean = s * inv_d
            v = ZERO
            for j in range(d):
                t = row[j] - mean
                v += t * t
            rstd = ONE / np.sqrt(v * inv_d + LN_EPS)
            for j in range(d):
                o[j] = (row[j] - mean) * rstd * w[j] + b[j]
        return out

    @jit
    def softmax(x):
        n, d = x.shape
        out = np.empty_like(x)
        for i in prange(n):
            row, o = x[i], out[i]
            m = row[0]
            for j in range(d):
                m = max(m, row[j])
            s = ZERO
            for j in range(d):
                e = np.exp(row[j] - m)
                o[j] = e
                s += e
            inv = ONE / s
            for j in range(d):
                o[j] *= inv
        return out

    @jit
    def bias_gelu(x, b):
        n, d = x.shape
        out = np.empty_like(x)
        for i in prange(n):
            for j in range(d):
                z = x[i, j] + b[j]
                out[i, j] = HALF * z * (ONE + np.tanh(GELU_C * (z + GELU_A * z**3)))
        return out

    @jit
    def rmsnorm(x, w):
        n, d = x.shape
        inv_d = ONE / f32(d)
        out = np.empty_like(x)
        for i in prange(n):
            row, o = x[i], out[i]
            s = ZERO
            for j in range(d):
                s += row[j] * row[j]
            rstd = ONE / np.sqrt(s * inv_d + RMS_EPS)
            for j in range(d):
                o[j] = row[j] * rstd * w[j]
        return out

    @jit
    def mlp_step(X, labels, W1, b1, W2, b2):
        n = X.shape[0]
        hidden, classes = W2.shape
        inv_n = ONE / f32(n)
        h_pre = np.dot(X, W1)
        h = np.empty_like(h_pre)
        for i in prange(n):
            for j in range(hidden):
                v = h_pre[i, j] + b1[j]
                h_pre[i, j] = v
                h[i, j] = max(v, ZERO)
        logits = np.dot(h, W2)
        dlogits = np.empty_like(logits)
        nll = np.empty(n, np.float32)
        for i in prange(n):
            m = logits[i, 0] + b2[0]
            for k in range(classes):
                logits[i, k] += b2[k]
                m = max(m, logits[i, k])
            s = ZERO
            for k in range(classes):
                e = np.exp(logits[i, k] - m)
                dlogits[i, k] = e
                s += e
            nll[i] = np.log(s) - (logits[i, labels[i]] - m)
            scale = inv_n / s
            for k in range(classes):
                dlogits[i, k] *= scale
            dlogits[i, labels[i]] -= inv_n
        loss = np.float32(nll.sum() * inv_n)
        dW2 = np.dot(h.T, dlogits)
        db2 = dlogits.sum(axis=0)
        dh = np.dot(dlogits, W2.T)
        for i in prange(n):
            for j in range(hidden):
                if h_pre[i, j] <= ZERO:
                    dh[i, j] = ZERO
        dW1 = np.dot(X.T, dh)
        db1 = dh.sum(axis=0)
        return loss, dW1, db1, dW2, db2

    @jit
    def axpb(x):
        out = np.empty_like(x)
        for i in prange(x.size):
            out[i] = x[i] * TWO + ONE
        return out

    @njit(inline="always", fastmath=True)
    def cnd(d):
        k = ONE / (ONE + CND_P * abs(d))
        ret = (
            RSQRT2PI * np.exp(-HALF * d * d) * (k * (A1 + k * (A2 + k * (A3 + k * (A4 + k * A5)))))
        )
        return ONE - ret if d > ZERO else ret

    @jit
    def black_scholes(S, K, T):
        n = S.size
        call = np.empty_like(S)
        put = np.empty_like(S)
        for i in prange(n):
            sqrt_t = np.sqrt(T[i])
            d1 = (np.log(S[i] / K[i]) + BS_MU * T[i]) / (BS_V * sqrt_t)
            d2 = d1 - BS_V * sqrt_t
            c1, c2 = cnd(d1), cnd(d2)
            k_exp = K[i] * np.exp(-BS_R * T[i])
            call[i] = S[i] * c1 - k_exp * c2
            put[i] = k_exp * (ONE - c2) - S[i] * (ONE - c1)
        return call, put

    @jit
    def branch(x):
        # R1/R2: y and its sum in one pass (a prange reduction), then the
        # branch in Python-level numba code, one more pass for either side
        n = x.size
        y = np.empty_like(x)
        s = ZERO
        for i in prange(n):
            v = x[i] * TWO + ONE
            y[i] = v
            s += v
        if s > ZERO:
            for i in prange(n):
                y[i] = np.tanh(y[i]) - ONE
        else:
            for i in prange(n):
                y[i] = y[i] * THREE
        return y

    @jit
    def row_fill(x, w):
        # R3: the row loop as the prange loop
        d = x.shape[1]
        out = np.zeros((ROW_FILL_ROWS, d), dtype=x.dtype)
        for i in prange(ROW_FILL_ROWS):
            fi = f32(i)
            for j in range(d):
                out[i, j] = np.tanh(x[i, j] * w[j]) + fi
        return out

    _KERNELS = {
        "W1": layernorm,
        "W2": softmax,
        "W3": bias_gelu,
        "W4": rmsnorm,
        "W5": mlp_step,
        "W6": axpb,
        "W7": black_scholes,
        "R1": branch,
        "R2": branch,
        "R3": row_fill,
    }
    return _KERNELS


class NumbaPeer(Peer):
    name = "numba"
    module = "numba"
    compiles = True

    def info(self):
        import numba

        out = {"version": numba.__version__, "threads": numba.get_num_threads()}
        try:
            out["threading_layer"] = numba.threading_layer()
        except ValueError:  # no parallel region has run yet
            out["threading_layer"] = numba.config.THREADING_LAYER
        return out

    def prepare(self, w, inputs):
        if w.key not in _kernels():
            raise NotExpressible(NOT_EXPRESSIBLE.get(w.key, f"no numba version of {w.key}"))
        kernel = _kernels()[w.key]
        return lambda: kernel(*inputs)

    def to_numpy(self, out):
        # numba boxes every float scalar it returns as a Python float, even a
        # float32 one (W5's loss): take it back as the float32 it was
        return tuple(
            np.float32(o) if isinstance(o, float) else np.asarray(o)
            for o in (out if isinstance(out, tuple) else (out,))
        )
