"""lowering, one peer per backend. A backend is detected by trying it on
each workload: `lowering.compile(fn, backend=...)` and a first call. A
backend that fails records the error string for that workload instead of
stopping the run. The compiled function's `stats` (compiles, cache hits,
recompiles, graph breaks, eager fallbacks) go into the JSON per workload."""

from __future__ import annotations

from .base import Peer

# Backends tried even when lowering does not list them yet (the fast CPU
# backend is being written); lowering.api.BACKENDS adds any others.
KNOWN_BACKENDS = ("cpu", "numpy")


class LoweringPeer(Peer):
    module = "lowering"
    compiles = True

    def __init__(self, backend: str):
        self.backend = backend
        self.name = f"lowering[{backend}]"

    def info(self):
        import lowering
        from lowering.config import config

        listed = _listed_backends()
        return {
            "version": lowering.__version__,
            "backend": self.backend,
            "listed_by_lowering": self.backend in listed,
            "default_backend": config.backend,
        }

    def prepare(self, w, inputs):
        import lowering

        if w.key == "W8":  # the gradient of W5's forward, by lowering.value_and_grad
            from ..models import mlp_loss

            vg = lowering.compile(lowering.value_and_grad(mlp_loss, argnums=(2, 3, 4, 5)),
                                  backend=self.backend)

            def step():
                value, grads = vg(*inputs)
                return (value, *grads)

            step.compiled = vg
            return step
        fn = lowering.compile(w.fn, backend=self.backend)

        def run():
            return fn(*inputs)

        run.compiled = fn
        return run

    def stats(self, run):
        counters = getattr(getattr(run, "compiled", None), "stats", None)
        return dict(counters) if counters is not None else None


def _listed_backends() -> tuple[str, ...]:
    try:
        from lowering.api import BACKENDS
    except Exception:  # noqa: BLE001 - an older or broken lowering lists none
        return ()
    return tuple(BACKENDS)


def lowering_peers() -> list[Peer]:
    names = dict.fromkeys([*KNOWN_BACKENDS, *_listed_backends()])
    return [LoweringPeer(b) for b in names]
