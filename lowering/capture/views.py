"""View steps: how a traced view is derived from its storage and how a write
through the view is folded back into the storage (functionalization).

Each step knows three things: `apply` (emit the view's value from its base's),
`update` (emit the base's new value given the view's new value) and `np_apply`
(the same view on a concrete numpy array, used when values are materialized at
a graph break or when an output is a view of an input)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SliceStep:
    start: tuple[int, ...]
    step: tuple[int, ...]
    shape: tuple[int, ...]
    readonly = False

    def apply(self, p, base):
        return p.slice(base, self.start, self.step, self.shape)

    def update(self, p, base, new):
        return p.insert_slice(new, base, self.start, self.step)

    def np_index(self) -> tuple[slice, ...]:
        out = []
        for b, s, n in zip(self.start, self.step, self.shape):
            stop = b + n * s
            out.append(slice(b, None if stop < 0 else stop, s))
        return tuple(out)

    def np_apply(self, arr: np.ndarray) -> np.ndarray:
        return arr[self.np_index() + (Ellipsis,)]  # a view even of a 0-d array


@dataclass(frozen=True)
class TransposeStep:
    perm: tuple[int, ...]
    readonly = False

    def apply(self, p, base):
        return p.transpose(base, self.perm)

    def update(self, p, base, new):
        inv = tuple(int(i) for i in np.argsort(self.perm))
        return p.transpose(new, inv)

    def np_apply(self, arr: np.ndarray) -> np.ndarray:
        return arr.transpose(self.perm)


@dataclass(frozen=True)
class ReshapeStep:
    shape: tuple[int, ...]
    from_shape: tuple[int, ...]
    readonly = False

    def apply(self, p, base):
        return p.reshape(base, self.shape)

    def update(self, p, base, new):
        return p.reshape(new, self.from_shape)

    def np_apply(self, arr: np.ndarray) -> np.ndarray:
        out = arr.view()
        out.shape = self.shape  # raises rather than copies: a view must stay a view
        return out


@dataclass(frozen=True)
class BroadcastStep:
    shape: tuple[int, ...]
    readonly = True

    def apply(self, p, base):
        return p.broadcast(base, self.shape)

    def update(self, p, base, new):  # pragma: no cover - writes are refused earlier
        raise ValueError("assignment destination is read-only")

    def np_apply(self, arr: np.ndarray) -> np.ndarray:
        return np.broadcast_to(arr, self.shape)


def np_apply_all(steps, arr: np.ndarray) -> np.ndarray:
    for s in steps:
        arr = s.np_apply(arr)
    return arr


def strided_dummy(shape, strides, dtype) -> np.ndarray:
    """An array with the given layout and no memory behind it. Only numpy's view
    functions (which read no data) may touch it: it answers "would numpy return
    a view here, and with which strides?" without allocating."""
    return np.lib.stride_tricks.as_strided(
        np.empty(1, dtype=dtype), shape=shape, strides=strides
    )
