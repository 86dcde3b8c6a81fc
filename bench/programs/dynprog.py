"""Dynamic programming and graphs: Floyd–Warshall (a loop over the pivot),
edit distance (a loop over rows, the insertions of a row by a running
minimum), 0/1 knapsack (a loop over items) and Viterbi decoding (a loop over
time, then the backtrack through the argmax pointers)."""

from __future__ import annotations

import numpy as np

from .base import Program, rng


def floyd_warshall(d):
    """All-pairs shortest paths."""
    for k in range(d.shape[0]):
        d = np.minimum(d, d[:, k : k + 1] + d[k : k + 1, :])
    return d


def edit_distance(a, b):
    """The last row of the Levenshtein table of code sequences a and b."""
    n = b.shape[0]
    j = np.arange(n + 1)
    prev = j.copy()
    for i in range(1, a.shape[0] + 1):
        cur = np.empty(n + 1, dtype=np.int64)
        cur[0] = i
        cur[1:] = np.minimum(prev[:-1] + (a[i - 1] != b), prev[1:] + 1)
        # insertions: cur[j] = min(cur[j], cur[j-1] + 1) along the row
        prev = np.minimum.accumulate(cur - j) + j
    return prev


def knapsack(weights, values, capacity):
    """0/1 knapsack: the best value for every capacity up to `capacity`."""
    best = np.zeros(capacity + 1)
    for w, v in zip(weights, values):
        best[w:] = np.maximum(best[w:], best[:-w] + v)
    return best


def viterbi(log_pi, log_A, log_B, obs):
    """The most likely hidden-state path of an HMM and its log-probability."""
    T = obs.shape[0]
    delta = log_pi + log_B[:, obs[0]]
    back = np.zeros((T, log_pi.shape[0]), dtype=np.int64)
    for t in range(1, T):
        scores = delta[:, None] + log_A
        back[t] = scores.argmax(axis=0)
        delta = scores.max(axis=0) + log_B[:, obs[t]]
    path = np.empty(T, dtype=np.int64)
    path[-1] = delta.argmax()
    for t in range(T - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    return delta.max(), path


def _graph(n: int) -> tuple:
    g = rng(60)
    d = g.uniform(1.0, 100.0, (n, n))
    d[g.random((n, n)) < 0.7] = np.inf  # a sparse graph: most pairs need paths
    np.fill_diagonal(d, 0.0)
    return (d,)


def _sequences(m: int, n: int) -> tuple:
    g = rng(61)
    return g.integers(0, 4, m), g.integers(0, 4, n)


def _items(items: int, capacity: int) -> tuple:
    g = rng(62)
    return g.integers(1, capacity // 4, items), g.uniform(1.0, 10.0, items), capacity


def _hmm(states: int, T: int) -> tuple:
    g = rng(63)
    A = g.random((states, states)) + 0.1
    B = g.random((states, 16)) + 0.1
    pi = g.random(states) + 0.1
    return (np.log(pi / pi.sum()), np.log(A / A.sum(1, keepdims=True)),
            np.log(B / B.sum(1, keepdims=True)), g.integers(0, 16, T))


def numba_variants() -> dict:
    """Scalar loops: numba has no ufunc.accumulate (edit distance: the
    textbook recurrence) and no max/argmax with an axis (Viterbi)."""
    from numba import njit

    @njit
    def edit_distance_nb(a, b):
        n = b.shape[0]
        prev = np.arange(n + 1)
        cur = np.empty(n + 1, dtype=np.int64)
        for i in range(1, a.shape[0] + 1):
            cur[0] = i
            for j in range(1, n + 1):
                cur[j] = min(prev[j - 1] + (a[i - 1] != b[j - 1]), prev[j] + 1, cur[j - 1] + 1)
            prev, cur = cur, prev
        return prev

    @njit
    def viterbi_nb(log_pi, log_A, log_B, obs):
        T, n = obs.shape[0], log_pi.shape[0]
        delta = log_pi + log_B[:, obs[0]]
        new = np.empty(n)
        back = np.zeros((T, n), dtype=np.int64)
        for t in range(1, T):
            for j in range(n):
                best, arg = delta[0] + log_A[0, j], 0
                for i in range(1, n):
                    s = delta[i] + log_A[i, j]
                    if s > best:
                        best, arg = s, i
                back[t, j] = arg
                new[j] = best + log_B[j, obs[t]]
            delta, new = new, delta
        path = np.empty(T, dtype=np.int64)
        path[-1] = delta.argmax()
        for t in range(T - 1, 0, -1):
            path[t - 1] = back[t, path[t]]
        return delta.max(), path

    return {"edit_distance": edit_distance_nb, "viterbi": viterbi_nb}


def jax_variants() -> dict:
    import jax.numpy as jnp
    from jax import lax

    def floyd_warshall_j(d):
        def body(k, d):
            col = lax.dynamic_slice_in_dim(d, k, 1, axis=1)
            row = lax.dynamic_slice_in_dim(d, k, 1, axis=0)
            return jnp.minimum(d, col + row)

        return lax.fori_loop(0, d.shape[0], body, d)

    def edit_distance_j(a, b):
        n = b.shape[0]
        j = jnp.arange(n + 1)

        def body(i, prev):
            cur = jnp.concatenate([i[None], jnp.minimum(prev[:-1] + (a[i - 1] != b),
                                                        prev[1:] + 1)])
            return lax.cummin(cur - j) + j

        return lax.fori_loop(1, a.shape[0] + 1, body, j)

    def knapsack_j(weights, values, capacity):
        c = jnp.arange(capacity + 1)

        def body(i, best):
            w = weights[i]
            shifted = jnp.where(c >= w, jnp.roll(best, w) + values[i], -jnp.inf)
            return jnp.maximum(best, shifted)

        return lax.fori_loop(0, weights.shape[0], body, jnp.zeros(capacity + 1))

    def viterbi_j(log_pi, log_A, log_B, obs):
        def forward(delta, o):
            scores = delta[:, None] + log_A
            return scores.max(axis=0) + log_B[:, o], scores.argmax(axis=0)

        delta, back = lax.scan(forward, log_pi + log_B[:, obs[0]], obs[1:])

        def backward(state, ptr):
            prev = ptr[state]
            return prev, prev

        last = delta.argmax()
        _, earlier = lax.scan(backward, last, back, reverse=True)
        return delta.max(), jnp.concatenate([earlier, last[None]])

    return {
        "floyd_warshall": floyd_warshall_j,
        "edit_distance": edit_distance_j,
        "knapsack": knapsack_j,
        "viterbi": viterbi_j,
    }


PROGRAMS = [
    Program("floyd_warshall", "all-pairs shortest paths, loop over k", floyd_warshall, _graph,
            {"T": (6,), "S": (48,), "M": (200,)}),
    Program("edit_distance", "Levenshtein rows, minimum.accumulate", edit_distance,
            _sequences, {"T": (5, 7), "S": (40, 200), "M": (150, 10_000)}, numba="loops"),
    Program("knapsack", "0/1 knapsack, loop over items", knapsack, _items,
            {"T": (4, 20), "S": (80, 2000), "M": (150, 100_000)}),
    Program("viterbi", "HMM Viterbi, time loop and backtrack", viterbi, _hmm,
            {"T": (3, 5), "S": (32, 20), "M": (256, 50)}, numba="loops"),
]
