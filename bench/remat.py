"""Saved bytes between forward and backward: lowering's partitions next to
torch's AOTAutograd partitioners on the same models (bench/models.py).

    python -m bench.remat            # writes bench/results/<host>-remat.{json,md}

For lowering: `lowering.explain(compile(value_and_grad(model, argnums=params),
partition=..., memory_budget=...))` gives the bytes each partition saves
(values the forward computes; the inputs and weights the backward reads are
the caller's and cost nothing). For torch (when installed): `aot_function`
with `default_partition` (save every forward value the backward uses) and
`min_cut_rematerialization_partition` at activation memory budgets 1.0, 0.5
and 0.1; a forward compiler reads the saved tensors off the forward graph's
outputs and counts their bytes, all of them and the activations alone
(outputs that are not graph inputs)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

import numpy as np

from .models import MODELS, torch_models

BUDGETS = (None, 0.5, 0.1)


def ours(name: str) -> dict:
    import lowering

    fn, build = MODELS[name]
    inputs, n_params = build()
    out = {}
    for label, kw in [("save_all", {"partition": "save_all"}),
                      *[(f"min_cut@{b}" if b is not None else "min_cut", {"memory_budget": b})
                        for b in BUDGETS]]:
        vg = lowering.value_and_grad(fn, argnums=tuple(range(n_params)))
        e = lowering.explain(lowering.compile(vg, **kw))(*inputs)
        out[label] = {"saved_bytes": e.saved_bytes, "strategy": e.partitions[0].strategy,
                      "recomputed": len(e.recomputed), "note": e.partitions[0].note}
    return out


def theirs(name: str) -> dict | None:
    try:
        import torch
        from functorch.compile import (aot_function, default_partition, make_boxed_func,
                                       min_cut_rematerialization_partition)
        from torch._functorch import config as fconfig
    except Exception:  # noqa: BLE001 - torch is an optional peer
        return None
    fn = torch_models()[name]
    inputs, n_params = MODELS[name][1]()
    out = {}

    def measure(partition_fn, budget):
        got = {}

        def fw(gm, example_inputs):
            places = {n for n in gm.graph.nodes if n.op == "placeholder"}
            (outs,) = [n.args[0] for n in gm.graph.nodes if n.op == "output"]
            total = acts = 0
            for node in list(outs)[1:]:  # the first output is the loss
                val = getattr(node, "meta", {}).get("val")
                if not isinstance(val, torch.Tensor):
                    continue
                b = val.numel() * val.element_size()
                total += b
                if node not in places:
                    acts += b
            got.update(saved_bytes=total, activation_bytes=acts)
            return make_boxed_func(gm)

        def bw(gm, example_inputs):
            return make_boxed_func(gm)

        old = fconfig.activation_memory_budget
        fconfig.activation_memory_budget = budget
        try:
            f = aot_function(fn, fw_compiler=fw, bw_compiler=bw, partition_fn=partition_fn)
            ts = [torch.from_numpy(a.copy()).requires_grad_(i < n_params)
                  for i, a in enumerate(inputs)]
            f(*ts).backward()
        finally:
            fconfig.activation_memory_budget = old
        return got

    out["default"] = measure(default_partition, 1.0)
    for b in (1.0, 0.5, 0.1):
        out[f"min_cut@{b}"] = measure(min_cut_rematerialization_partition, b)
    return out


def table(results: dict) -> str:
    lines = ["| model | lowering save_all | lowering min_cut | min_cut budget 0.5 | "
             "min_cut budget 0.1 | torch default (activations) | torch min-cut 1.0 | "
             "torch 0.5 | torch 0.1 |", "|---|" + "---|" * 8]
    for name, r in results.items():
        o, t = r["lowering"], r.get("torch")
        sa = o["save_all"]["saved_bytes"]

        def rel(v):
            return f"{v / 1024:.0f} KiB ({v / sa:.2f})" if sa else f"{v} B"

        row = [name, rel(sa), rel(o["min_cut"]["saved_bytes"]),
               rel(o["min_cut@0.5"]["saved_bytes"]), rel(o["min_cut@0.1"]["saved_bytes"])]
        if t:
            d = t["default"]
            row.append(f"{d['saved_bytes'] / 1024:.0f} KiB ({d['activation_bytes'] / 1024:.0f})")
            for b in ("1.0", "0.5", "0.1"):
                m = t[f"min_cut@{b}"]
                row.append(f"{m['saved_bytes'] / 1024:.0f} KiB (act. "
                           f"{m['activation_bytes'] / 1024:.0f})")
        else:
            row += ["–"] * 4
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.remat", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ns = p.parse_args(argv)
    results = {}
    for name in MODELS:
        results[name] = {"lowering": ours(name), "torch": theirs(name)}
    md = table(results)
    print(md)
    os.makedirs(ns.out, exist_ok=True)
    host = platform.node().split(".")[0] or "host"
    with open(os.path.join(ns.out, f"{host}-remat.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(os.path.join(ns.out, f"{host}-remat.md"), "w") as f:
        f.write("Saved bytes between forward and backward (`python -m bench.remat`); in "
                "parentheses for lowering: the fraction of its save_all; for torch: the "
                "activations alone (saved tensors that are not inputs or weights).\n\n" + md)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
