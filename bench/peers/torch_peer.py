"""torch.compile of the numpy function itself (BENCH.md's "numpy fn"):
dynamo traces the numpy calls into torch ops and Inductor compiles them;
the compiled function takes and returns numpy arrays, like lowering.

Inductor's on-disk cache goes to a fresh folder per bench run (set by
bench.env before torch is imported), so a first call is a real compile."""

from __future__ import annotations

from .base import Peer


class TorchPeer(Peer):
    name = "torch"
    module = "torch"
    compiles = True

    def info(self):
        import torch

        return {
            "version": torch.__version__,
            "threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
            "parallel_info": torch.__config__.parallel_info().strip().splitlines()[:8],
        }

    def prepare(self, w, inputs):
        import torch

        if w.key == "W8":  # torch's own autodiff of the same forward, compiled
            from ..models import torch_models

            loss = torch_models()["mlp_loss"]
            step = torch.compile(torch.func.grad_and_value(loss, argnums=(2, 3, 4, 5)))
            ts = [torch.from_numpy(a) for a in inputs]

            def run():
                grads, value = step(*ts)
                return (value.numpy(), *[g.numpy() for g in grads])

            return run
        fn = torch.compile(w.fn)
        return lambda: fn(*inputs)
