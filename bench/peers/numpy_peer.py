"""numpy eager: the workload functions as written."""

from __future__ import annotations

import numpy as np

from .base import Peer


class NumpyPeer(Peer):
    name = "numpy"
    module = "numpy"

    def info(self):
        return {"version": np.__version__}

    def prepare(self, w, inputs):
        fn = w.fn
        return lambda: fn(*inputs)
