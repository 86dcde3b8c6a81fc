"""Train a 2-hidden-layer MLP (softmax cross-entropy, Adam, all plain numpy)
with a compiled training step: `lowering.compile` of a step that takes the
gradient with `lowering.value_and_grad` and applies the Adam update.

The same step runs eagerly with HIPS autograd computing the gradient; the two
loss curves must match, and both step rates are printed. The data is
scikit-learn's digits when scikit-learn is installed, else a synthetic
10-class problem of the same shape.

Run: python examples/mlp_train.py    (or `make demo` for all examples)"""

from __future__ import annotations

import sys
import time

import numpy as np

import lowering

HIDDEN = 128
STEPS = 150
BATCH = 128
LR, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-8


def load_data():
    try:
        from sklearn.datasets import load_digits

        d = load_digits()
        X, y, name = d.data / 16.0, d.target, "scikit-learn digits"
    except ImportError:
        rng = np.random.default_rng(0)
        centers = rng.standard_normal((10, 64)) * 0.35
        y = rng.integers(0, 10, 1797)
        X, name = centers[y] + rng.standard_normal((1797, 64)), "synthetic 10-class blobs"
    return X.astype(np.float32), y.astype(np.int64), name


def init(d_in: int, classes: int) -> dict:
    rng = np.random.default_rng(1)
    f = np.float32

    def lin(i, o):
        return (rng.standard_normal((i, o)) * np.sqrt(2.0 / i)).astype(f), np.zeros(o, f)

    p = {}
    p["W1"], p["b1"] = lin(d_in, HIDDEN)
    p["W2"], p["b2"] = lin(HIDDEN, HIDDEN)
    p["W3"], p["b3"] = lin(HIDDEN, classes)
    return p


def make_loss(np_):
    """The model and loss, for a numpy module (numpy, or autograd.numpy)."""
    def loss(p, X, y):
        h = np_.maximum(np_.dot(X, p["W1"]) + p["b1"], 0.0)
        h = np_.maximum(np_.dot(h, p["W2"]) + p["b2"], 0.0)
        z = np_.dot(h, p["W3"]) + p["b3"]
        z = z - np_.max(z, axis=1, keepdims=True)
        logp = z - np_.log(np_.sum(np_.exp(z), axis=1, keepdims=True))
        return -np_.mean(logp[np_.arange(X.shape[0]), y])
    return loss


def adam(p, g, m, v, t):
    """One Adam update of every parameter (t: the step number, from 1)."""
    new_p, new_m, new_v = {}, {}, {}
    c1, c2 = 1.0 - B1 ** t, 1.0 - B2 ** t
    for k in p:
        new_m[k] = B1 * m[k] + (1.0 - B1) * g[k]
        new_v[k] = B2 * v[k] + (1.0 - B2) * g[k] * g[k]
        new_p[k] = p[k] - LR * (new_m[k] / c1) / (np.sqrt(new_v[k] / c2) + EPS)
    return new_p, new_m, new_v


loss_np = make_loss(np)


def train_step(p, m, v, t, X, y):
    loss, g = lowering.value_and_grad(loss_np)(p, X, y)
    p, m, v = adam(p, g, m, v, t)
    return loss, p, m, v


def eager_step(p, m, v, t, X, y):
    import autograd
    import autograd.numpy as anp

    loss, g = autograd.value_and_grad(make_loss(anp))(p, X, y)
    p, m, v = adam(p, g, m, v, t)
    return loss, p, m, v


def train(step, X, y, batches):
    p = init(X.shape[1], 10)
    m = {k: np.zeros_like(a) for k, a in p.items()}
    v = {k: np.zeros_like(a) for k, a in p.items()}
    losses = []
    step(p, m, v, 1.0, X[batches[0]], y[batches[0]])  # warm-up (compiles)
    t0 = time.perf_counter()
    for t, idx in enumerate(batches, 1):
        loss, p, m, v = step(p, m, v, float(t), X[idx], y[idx])
        losses.append(float(loss))
    return np.array(losses), len(batches) / (time.perf_counter() - t0), p


def main() -> bool:
    X, y, name = load_data()
    rng = np.random.default_rng(2)
    batches = [rng.choice(len(X), BATCH, replace=False) for _ in range(STEPS)]
    print(f"=== mlp_train: {name}, {X.shape[0]} samples, MLP {X.shape[1]}-{HIDDEN}-{HIDDEN}-10, "
          f"Adam, batch {BATCH}, {STEPS} steps " + "=" * 8)
    step = lowering.compile(train_step)
    got, rate, p = train(step, X, y, batches)
    want, eager_rate, _ = train(eager_step, X, y, batches)
    e = lowering.explain(lowering.compile(lowering.value_and_grad(loss_np)))(p, X[batches[0]],
                                                                             y[batches[0]])
    for t in (0, STEPS // 4, STEPS // 2, STEPS - 1):
        print(f"  step {t + 1:4d}: loss {got[t]:.5f} (eager numpy + HIPS autograd {want[t]:.5f})")
    acc = float((np.argmax(np.maximum(np.maximum(X @ p['W1'] + p['b1'], 0) @ p['W2'] + p['b2'], 0)
                           @ p['W3'] + p['b3'], axis=1) == y).mean())
    print(f"  training accuracy after {STEPS} steps: {acc:.3f}")
    print(f"  steps/s: compiled {rate:.0f}, eager {eager_rate:.0f} ({rate / eager_rate:.1f}x)")
    print(f"  saved for the backward: {e.saved_bytes} bytes (save-all would keep "
          f"{e.saved_bytes_save_all}); {e.kernel_count} kernels per gradient call")
    err = float(np.max(np.abs(got - want) / np.abs(want)))
    ok = bool(err < 1e-3 and got[-1] < 0.5 * got[0])
    print(f"  loss curves: max relative difference {err:.1e} "
          f"-> {'match' if ok else 'MISMATCH'}")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
