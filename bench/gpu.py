"""`python -m bench --gpu`: the GPU workloads of shared/BENCH.md on one CUDA
device, in one process: lowering (`backend="gpu"`, called on torch CUDA
tensors) against torch eager and torch.compile running the same formulas
written in torch, each time as % of the device's measured copy bandwidth
(bytes = inputs read once + outputs written once). Writes
bench/results/<host>-gpu.{json,md}.

Times are medians of `triton.testing.do_bench` (CUDA events, the L2 not
flushed between calls unless --flush), each checked against a float64
numpy reference (‖out − ref‖ / ‖ref‖ ≤ 1e-4). "first call" is the call
that compiles (lowering: capture, passes, Triton source, Triton's compile
of each kernel; torch.compile: Dynamo and Inductor), in this process."""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from dialects.dtypes import BFLOAT16 as BF16

# the workloads: the CPU benchmark's numpy programs (lowering compiles these)
from lowering.examples import gelu, layernorm, rmsnorm, softmax

from .workloads import BS_R, BS_V, black_scholes

RESULTS = Path(__file__).resolve().parent / "results"


def parse(argv):
    ap = argparse.ArgumentParser(prog="python -m bench --gpu", description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="workload names, comma-separated (default all)")
    ap.add_argument("--peers", default="lowering-max,torch,torch.compile",
                    help="peers besides lowering (lowering-max: mode=\"max-autotune\"; torch, "
                    "torch.compile, torch.compile-max)")
    ap.add_argument("--quick", action="store_true", help="small sizes, a smoke run")
    ap.add_argument("--flush", action="store_true", help="flush the L2 between timed calls")
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    ap.add_argument("--host", default=None, help="the results' file name (default: the GPU's)")
    return ap.parse_args(argv)


# ---- the same formulas in torch (the peers) --------------------------------------------

def torch_fns(torch):
    def t_layernorm(x, w, b, eps=1e-5):
        xc = x - x.mean(dim=-1, keepdim=True)
        var = (xc * xc).mean(dim=-1, keepdim=True)
        return xc / torch.sqrt(var + eps) * w + b

    def t_softmax(x):
        e = torch.exp(x - x.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True)

    def t_gelu(x, b):
        z = x + b
        return 0.5 * z * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3)))

    def t_rmsnorm(x, w, eps=1e-6):
        return x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps) * w

    def t_cnd(d):
        k = 1.0 / (1.0 + 0.2316419 * torch.abs(d))
        poly = k * (0.31938153 + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978
                                                                           + k * 1.330274429))))
        ret = 0.3989422804014327 * torch.exp(-0.5 * d * d) * poly
        return torch.where(d > 0, 1.0 - ret, ret)

    def t_black_scholes(S, K, T):
        sqrt_t = torch.sqrt(T)
        d1 = (torch.log(S / K) + (BS_R + 0.5 * BS_V * BS_V) * T) / (BS_V * sqrt_t)
        d2 = d1 - BS_V * sqrt_t
        c1, c2 = t_cnd(d1), t_cnd(d2)
        k_exp = K * torch.exp(-BS_R * T)
        return S * c1 - k_exp * c2, k_exp * (1.0 - c2) - S * (1.0 - c1)

    return {"layernorm": t_layernorm, "softmax": t_softmax, "gelu": t_gelu,
            "rmsnorm": t_rmsnorm, "black_scholes": t_black_scholes}


def workloads(quick: bool):
    """(name, numpy function, its torch twin's key, input shapes, kind)."""
    big, small = ((1024, 1024), (512, 512)) if quick else ((16384, 4096), (4096, 4096))
    n_bs = 1 << 20 if quick else 1 << 26
    return [
        (f"LayerNorm {small[0]}x{small[1]}", layernorm, "layernorm", [small, small[1:], small[1:]], "norm"),
        (f"LayerNorm {big[0]}x{big[1]}", layernorm, "layernorm", [big, big[1:], big[1:]], "norm"),
        (f"Softmax {small[0]}x{small[1]}", softmax, "softmax", [small], "x"),
        (f"Softmax {big[0]}x{big[1]}", softmax, "softmax", [big], "x"),
        (f"bias+GELU {big[0]}x{big[1]}", gelu, "gelu", [big, big[1:]], "x"),
        (f"RMSNorm {big[0]}x{big[1]}", rmsnorm, "rmsnorm", [big, big[1:]], "norm"),
        (f"Black-Scholes {n_bs >> 20}M", black_scholes, "black_scholes", [(n_bs,)] * 3, "bs"),
    ]


def make_inputs(shapes, kind, rng):
    if kind == "bs":
        n = shapes[0][0]
        return [rng.uniform(5, 30, n).astype(np.float32), rng.uniform(1, 100, n).astype(np.float32),
                rng.uniform(0.25, 10, n).astype(np.float32)]
    out = [rng.standard_normal(shapes[0]).astype(np.float32)]
    for s in shapes[1:]:
        v = rng.standard_normal(s).astype(np.float32)
        out.append((1 + 0.1 * v).astype(np.float32) if kind == "norm" and len(out) == 1
                   else (0.1 * v).astype(np.float32))
    return out


def rel_err(got, ref) -> float:
    got = np.asarray(got, np.float64)
    if not np.all(np.isfinite(got)):
        return math.inf
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300))


def main(argv: list[str]) -> int:
    args = parse(argv)
    import torch
    import triton.testing as tt

    import lowering

    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(0)
    host = args.host or name.replace(" ", "-").lower()
    # the copy roofline: a large device-to-device copy, bytes read + written
    n = 1 << 28  # 1 GiB of float32
    a, b = torch.empty(n, device=dev), torch.empty(n, device=dev)
    a.normal_()
    t_copy = tt.do_bench(lambda: b.copy_(a), warmup=50, rep=300, return_mode="median")
    copy_gbs = 2 * n * 4 / (t_copy * 1e-3) / 1e9
    del a, b
    print(f"{name}: copy {copy_gbs:.0f} GB/s", flush=True)
    flush = None
    if args.flush:
        cache = torch.empty(64 << 20, dtype=torch.int8, device=dev)
        flush = cache.zero_

    def bench(fn):
        if flush is None:
            return tt.do_bench(fn, warmup=25, rep=200, return_mode="median")
        return tt.do_bench(lambda: (flush(), fn()), warmup=25, rep=200, return_mode="median") - \
            tt.do_bench(flush, warmup=25, rep=200, return_mode="median")

    peers = [p for p in args.peers.split(",") if p]
    tfns = torch_fns(torch)
    only = {s.strip().lower() for s in args.only.split(",") if s.strip()}
    rng = np.random.default_rng(0)
    rows = []
    for wname, fn, tkey, shapes, kind in workloads(args.quick):
        if only and not any(o in wname.lower() for o in only):
            continue
        host_in = make_inputs(shapes, kind, rng)
        with np.errstate(all="ignore"):
            ref = fn(*[x.astype(np.float64) for x in host_in])
        refs = ref if isinstance(ref, tuple) else (ref,)
        dev_in = [torch.from_numpy(x).to(dev) for x in host_in]
        nbytes = sum(x.nbytes for x in host_in) + sum(r.size * 4 for r in refs)
        row = {"workload": wname, "bytes": nbytes, "roofline_ms": nbytes / copy_gbs / 1e6}
        runs = {"lowering": lowering.compile(fn, backend="gpu")}
        if "lowering-max" in peers:
            runs["lowering-max"] = lowering.compile(fn, mode="max-autotune", backend="gpu")
        if "torch" in peers:
            runs["torch"] = tfns[tkey]
        if "torch.compile" in peers:
            runs["torch.compile"] = torch.compile(tfns[tkey])
        if "torch.compile-max" in peers:
            runs["torch.compile-max"] = torch.compile(tfns[tkey], mode="max-autotune-no-cudagraphs")
        for peer, f in runs.items():
            entry = {}
            try:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                out = f(*dev_in)
                torch.cuda.synchronize()
                entry["first_call_ms"] = (time.perf_counter() - t0) * 1e3
                outs = out if isinstance(out, tuple) else (out,)
                entry["rel_err"] = max(rel_err(o.cpu().numpy(), r) for o, r in zip(outs, refs))
                entry["ok"] = entry["rel_err"] <= 1e-4
                entry["ms"] = bench(lambda: f(*dev_in))
                entry["pct_roofline"] = 100 * row["roofline_ms"] / entry["ms"]
                if peer == "lowering-max":
                    prog = getattr(f, "_last_prog", None)
                    entry["configs"] = [
                        [{"config": [c, w, g], "ms": ms} for (c, w, g), ms in (s.tuned or [])]
                        for s in getattr(prog, "steps", []) if hasattr(s, "tuned")]
                if peer == "lowering":
                    entry["stats"] = dict(f.stats)
                    prog = getattr(f, "_last_prog", None)
                    if prog is not None and hasattr(prog, "run_device"):
                        entry["kernels"] = len(prog.kernels)
                        entry["kernels_ms"] = bench(lambda: prog.run_device(dev_in))
                        entry["kernels_pct_roofline"] = 100 * row["roofline_ms"] / entry["kernels_ms"]
            except Exception as e:  # a peer's failure is a row, not the end of the run
                entry["error"] = f"{type(e).__name__}: {e}"[:300]
            row[peer] = entry
            print(wname, peer, {k: v for k, v in entry.items() if k not in ("stats", "configs")},
                  flush=True)
            for c in entry.get("configs", []):
                print("   configs (fastest first):", ", ".join(
                    f"{x['config'][0]} w{x['config'][1]}: {x['ms']:.3f}" for x in c[:6]), flush=True)
        rows.append(row)
    w5 = {} if only and "w5" not in only else w5_step(torch, lowering, bench, dev, args.quick)
    bf16 = {} if only and "bf16" not in only else \
        bf16_rows(torch, lowering, bench, dev, args.quick, copy_gbs, peers)
    # W6: the per-call cost of x*2+1 on 16 float32 elements, device-resident
    x16 = torch.randn(16, device=dev)

    def w6(x):
        return x * 2 + 1
    def per_call_us(f, n=2000):
        """Host time per call of f(x16), the device drained after."""
        f(x16)
        f(x16)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            f(x16)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / n * 1e6

    w6_us = {"lowering": per_call_us(lowering.compile(w6, backend="gpu")),
             "lowering-reduce-overhead": per_call_us(
                 lowering.compile(w6, backend="gpu", mode="reduce-overhead")),
             "torch": per_call_us(w6)}
    try:
        w6_us["torch.compile-reduce-overhead"] = per_call_us(
            torch.compile(w6, mode="reduce-overhead"))
    except Exception as e:  # a peer's failure is a note, not the end of the run
        print("torch.compile reduce-overhead:", type(e).__name__, e, flush=True)
    print("W6 us per call:", w6_us, flush=True)
    result = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "device": name,
              "copy_GBps": copy_gbs, "torch": torch.__version__,
              "triton": __import__("triton").__version__, "python": platform.python_version(),
              "flush_l2": bool(args.flush), "rows": rows,
              "w6_us": w6_us, "w5": w5, "bf16": bf16}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{host}-gpu.json").write_text(json.dumps(result, indent=1))
    md = report(result, peers)
    (args.out_dir / f"{host}-gpu.md").write_text(md)
    print(md)
    return 0


def mlp_loss(X, W1, b1, W2, b2, Y):
    """W5's GPU variant: X -> 4096 (GELU, tanh form) -> 1024, mean squared error."""
    h = X @ W1 + b1
    g = 0.5 * h * (1.0 + np.tanh(0.7978845608028654 * (h + 0.044715 * h ** 3)))
    out = g @ W2 + b2
    return ((out - Y) ** 2).mean()


def w5_step(torch, lowering, bench, dev, quick: bool) -> dict:
    """W5 fp32 on the device: value and gradients of the four parameters,
    lowering's `compile(value_and_grad(...), backend="gpu")` on torch tensors
    against torch eager and torch.compile of `torch.func.grad_and_value`;
    each checked against the float64 numpy gradient."""
    n, d, hdim = (512, 256, 1024) if quick else (4096, 1024, 4096)
    rng = np.random.default_rng(5)
    host = [rng.standard_normal((n, d)), rng.standard_normal((d, hdim)) / np.sqrt(d),
            0.1 * rng.standard_normal(hdim), rng.standard_normal((hdim, d)) / np.sqrt(hdim),
            0.1 * rng.standard_normal(d), rng.standard_normal((n, d))]
    ref_v, ref_g = lowering.compile(lowering.value_and_grad(mlp_loss, argnums=(1, 2, 3, 4)),
                                    backend="numpy")(*host)
    host = [x.astype(np.float32) for x in host]
    t_in = [torch.from_numpy(x).to(dev) for x in host]

    def t_loss(X, W1, b1, W2, b2, Y):
        h = X @ W1 + b1
        g = 0.5 * h * (1.0 + torch.tanh(0.7978845608028654 * (h + 0.044715 * h ** 3)))
        return ((g @ W2 + b2 - Y) ** 2).mean()

    t_step = torch.func.grad_and_value(t_loss, argnums=(1, 2, 3, 4))
    runs = {"lowering": lowering.compile(lowering.value_and_grad(mlp_loss, argnums=(1, 2, 3, 4)),
                                         backend="gpu"),
            "lowering-reduce-overhead": lowering.compile(
                lowering.value_and_grad(mlp_loss, argnums=(1, 2, 3, 4)), backend="gpu",
                mode="reduce-overhead"),
            "torch": lambda *a: tuple(reversed(t_step(*a))),
            "torch.compile": (lambda f: lambda *a: tuple(reversed(f(*a))))(torch.compile(t_step))}
    out = {"shapes": [n, d, hdim]}
    for peer, f in runs.items():
        entry = {}
        try:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            v, g = f(*t_in)
            torch.cuda.synchronize()
            entry["first_call_ms"] = (time.perf_counter() - t0) * 1e3
            errs = [rel_err(np.asarray(v.cpu()) if hasattr(v, "cpu") else np.asarray(v),
                            np.asarray(ref_v))]
            errs += [rel_err(gi.cpu().numpy(), ri) for gi, ri in zip(g, ref_g)]
            entry["rel_err"] = max(errs)
            entry["ok"] = entry["rel_err"] <= 1e-3
            entry["ms"] = bench(lambda: f(*t_in))
            if peer.startswith("lowering"):
                f(*t_in)  # (reduce-overhead: the device entry's first call captures)
                entry["ms"] = bench(lambda: f(*t_in))
                entry["stats"] = dict(f.stats)
        except Exception as e:  # a peer's failure is a row, not the end of the run
            entry["error"] = f"{type(e).__name__}: {e}"[:300]
        out[peer] = entry
        print("W5 fp32", peer, {k: v for k, v in entry.items() if k != "stats"}, flush=True)
    return out


def _bf(v: float):
    """A bfloat16 scalar: with it, a bfloat16 array's ops stay bfloat16 under
    every numpy and ml_dtypes (ml_dtypes 0.6 promotes a bfloat16 array with
    a Python float to float32, 0.7 keeps bfloat16)."""
    return BF16.type(v)


def mlp_loss_bf16(X, W1, b1, W2, b2, Y):
    """W5's GPU variant in bfloat16: numpy's bf16 @ bf16 is float32 (no bf16
    loop), rounded to bfloat16 as torch's bf16 matmul rounds its output, and
    bfloat16 constants, so the program computes what torch's does in
    bfloat16 (with Python floats, numpy with ml_dtypes 0.6 computes the GELU
    and the second matmul in float32)."""
    h = (X @ W1).astype(BF16) + b1
    g = _bf(0.5) * h * (_bf(1.0) + np.tanh(_bf(0.7978845608028654) *
                                           (h + _bf(0.044715) * h ** _bf(3.0))))
    out = (g @ W2).astype(BF16) + b2
    return np.square(out - Y).mean()


def layernorm_bf16(x, w, b):
    """W1 LayerNorm with a bfloat16 epsilon (see `_bf`): bfloat16 throughout,
    as torch's LayerNorm on bfloat16 tensors."""
    xc = x - x.mean(axis=-1, keepdims=True)
    return xc / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + _bf(1e-5)) * w + b


def _t_bf16(torch, dev, a):
    """A torch.bfloat16 device tensor of an ml_dtypes bfloat16 array (its bits)."""
    return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).to(dev).view(torch.bfloat16)


def bf16_rows(torch, lowering, bench, dev, quick: bool, copy_gbs: float, peers) -> dict:
    """The bfloat16 anchors of BENCH.md: LayerNorm bf16 16384x4096 and the W5
    bf16 MLP step (value and 4 gradients) on torch.bfloat16 tensors, against
    torch eager and torch.compile in bfloat16; each checked against float64
    (relative error <= 2e-2: bfloat16 roundings along the way)."""
    out: dict = {}
    rng = np.random.default_rng(7)
    rows, cols = (1024, 4096) if quick else (16384, 4096)
    x = rng.standard_normal((rows, cols)).astype(BF16)
    w = (1 + 0.1 * rng.standard_normal(cols)).astype(BF16)
    b = (0.1 * rng.standard_normal(cols)).astype(BF16)
    ref = layernorm(*[a.astype(np.float64) for a in (x, w, b)])
    t_in = [_t_bf16(torch, dev, a) for a in (x, w, b)]
    nbytes = 2 * (x.size * 2 + w.size + b.size)
    roof = nbytes / copy_gbs / 1e6
    tln = torch_fns(torch)["layernorm"]
    runs = {"lowering": lowering.compile(layernorm_bf16, backend="gpu")}
    if "torch" in peers:
        runs["torch"] = tln
    if "torch.compile" in peers:
        runs["torch.compile"] = torch.compile(tln)
    if "torch.compile-max" in peers:
        runs["torch.compile-max"] = torch.compile(tln, mode="max-autotune-no-cudagraphs")
    ln = {"shape": [rows, cols], "roofline_ms": roof}
    for peer, f in runs.items():
        entry: dict = {}
        try:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            got = f(*t_in)
            torch.cuda.synchronize()
            entry["first_call_ms"] = (time.perf_counter() - t0) * 1e3
            entry["rel_err"] = rel_err(got.float().cpu().numpy(), ref)
            entry["ok"] = entry["rel_err"] <= 2e-2
            entry["ms"] = bench(lambda: f(*t_in))
            entry["pct_roofline"] = 100 * roof / entry["ms"]
        except Exception as e:  # a peer's failure is a row, not the end of the run
            entry["error"] = f"{type(e).__name__}: {e}"[:300]
        ln[peer] = entry
        print("LayerNorm bf16", peer, entry, flush=True)
    out["layernorm"] = ln

    n, d, hdim = (512, 256, 1024) if quick else (4096, 1024, 4096)
    host = [rng.standard_normal((n, d)), rng.standard_normal((d, hdim)) / np.sqrt(d),
            0.1 * rng.standard_normal(hdim), rng.standard_normal((hdim, d)) / np.sqrt(hdim),
            0.1 * rng.standard_normal(d), rng.standard_normal((n, d))]
    hb = [a.astype(BF16) for a in host]
    ref_v, ref_g = lowering.compile(lowering.value_and_grad(mlp_loss, argnums=(1, 2, 3, 4)),
                                    backend="numpy")(*[a.astype(np.float64) for a in hb])
    t_in = [_t_bf16(torch, dev, a) for a in hb]

    def t_loss(X, W1, b1, W2, b2, Y):
        h = X @ W1 + b1
        g = 0.5 * h * (1.0 + torch.tanh(0.7978845608028654 * (h + 0.044715 * h ** 3)))
        return ((g @ W2 + b2 - Y) ** 2).mean()

    t_step = torch.func.grad_and_value(t_loss, argnums=(1, 2, 3, 4))
    step = lowering.value_and_grad(mlp_loss_bf16, argnums=(1, 2, 3, 4))
    runs = {"lowering": lowering.compile(step, backend="gpu"),
            "lowering-reduce-overhead": lowering.compile(step, backend="gpu",
                                                         mode="reduce-overhead"),
            "torch": lambda *a: tuple(reversed(t_step(*a))),
            "torch.compile": (lambda f: lambda *a: tuple(reversed(f(*a))))(torch.compile(t_step))}
    w5 = {"shapes": [n, d, hdim]}
    for peer, f in runs.items():
        entry = {}
        try:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            v, g = f(*t_in)
            torch.cuda.synchronize()
            entry["first_call_ms"] = (time.perf_counter() - t0) * 1e3
            fv = v.float().cpu().numpy() if hasattr(v, "cpu") else np.float64(v)
            errs = [rel_err(fv, np.asarray(ref_v))]
            errs += [rel_err(gi.float().cpu().numpy(), ri) for gi, ri in zip(g, ref_g)]
            entry["rel_err"] = max(errs)
            entry["ok"] = entry["rel_err"] <= 2e-2
            f(*t_in)  # (reduce-overhead: the device entry's first call captures)
            entry["ms"] = bench(lambda: f(*t_in))
            if peer.startswith("lowering"):
                entry["stats"] = dict(f.stats)
        except Exception as e:  # a peer's failure is a row, not the end of the run
            entry["error"] = f"{type(e).__name__}: {e}"[:300]
        w5[peer] = entry
        print("W5 bf16", peer, {k: v for k, v in entry.items() if k != "stats"}, flush=True)
    out["w5"] = w5
    out["matmul"] = matmul_bf16_row(torch, lowering, bench, dev, quick)
    return out


def matmul_bf16(a, b):
    """numpy's `a @ b` of two bfloat16 arrays is float32; rounded to
    bfloat16, it is torch's bf16 matmul."""
    return (a @ b).astype(BF16)


def matmul_bf16_row(torch, lowering, bench, dev, quick: bool) -> dict:
    """bf16 matmul n^3 against cuBLAS through torch (TFLOP/s, and the ratio
    to torch.mm's time), checked against float64 on a sample of rows."""
    n = 1024 if quick else 8192
    rng = np.random.default_rng(11)
    ha, hb = (rng.standard_normal((n, n)).astype(BF16) for _ in range(2))
    a, b = _t_bf16(torch, dev, ha), _t_bf16(torch, dev, hb)
    ref = ha[:64].astype(np.float64) @ hb.astype(np.float64)
    runs = {"lowering": lowering.compile(matmul_bf16, backend="gpu"), "torch": torch.mm}
    row: dict = {"n": n}
    for peer, f in runs.items():
        entry: dict = {}
        try:
            got = f(a, b)
            entry["rel_err"] = rel_err(got[:64].float().cpu().numpy(), ref)
            entry["ok"] = entry["rel_err"] <= 2e-2
            entry["ms"] = bench(lambda: f(a, b))
            entry["tflops"] = 2 * n ** 3 / entry["ms"] / 1e9
        except Exception as e:  # a peer's failure is a row, not the end of the run
            entry["error"] = f"{type(e).__name__}: {e}"[:300]
        row[peer] = entry
        print("matmul bf16", peer, entry, flush=True)
    return row


def report(result, peers) -> str:
    lines = [f"# GPU workloads — {result['device']}", "",
             f"`python -m bench --gpu` — {result['date']}; torch {result['torch']}, "
             f"triton {result['triton']}, Python {result['python']}; copy bandwidth "
             f"{result['copy_GBps']:.0f} GB/s (the roofline); L2 "
             f"{'flushed' if result['flush_l2'] else 'not flushed'} between calls; median ms "
             "(% of roofline); ✗ = wrong result (rel. error > 1e-4)", "",
             "| workload | roofline ms | lowering (call) | lowering (kernels only) | " +
             " | ".join(peers) + " | lowering first call ms |",
             "|---|---|---|---|" + "---|" * len(peers) + "---|"]

    def cell(e):
        if not e:
            return "–"
        if "error" in e:
            return "error: " + e["error"].split(":")[0]
        mark = "" if e.get("ok") else " ✗"
        return f"{e['ms']:.3f} ({e['pct_roofline']:.0f}%){mark}"

    for r in result["rows"]:
        lo = r.get("lowering", {})
        kern = f"{lo['kernels_ms']:.3f} ({lo['kernels_pct_roofline']:.0f}%), {lo['kernels']} kernels" \
            if "kernels_ms" in lo else "–"
        first = f"{lo['first_call_ms']:.0f}" if "first_call_ms" in lo else "–"
        lines.append(f"| {r['workload']} | {r['roofline_ms']:.3f} | {cell(lo)} | {kern} | " +
                     " | ".join(cell(r.get(p)) for p in peers) + f" | {first} |")
    w5 = result.get("w5") or {}
    if w5:
        def w5cell(e):
            if not e or "ms" not in e:
                return (e or {}).get("error", "–")[:60]
            return f"{e['ms']:.3f}" + ("" if e.get("ok") else " ✗")
        lines += ["", f"W5 fp32 MLP step ({w5['shapes']}: value and 4 gradients), median ms: "
                  + ", ".join(f"{p} {w5cell(w5.get(p))}" for p in (
                      "lowering", "lowering-reduce-overhead", "torch", "torch.compile"))]
    bf = result.get("bf16") or {}
    if bf:
        def bcell(e):
            if not e or "ms" not in e:
                return (e or {}).get("error", "–")[:60]
            pct = f" ({e['pct_roofline']:.0f}%)" if "pct_roofline" in e else ""
            return f"{e['ms']:.3f}{pct}" + ("" if e.get("ok") else " ✗")
        ln, w5b = bf.get("layernorm") or {}, bf.get("w5") or {}
        if ln:
            lines += ["", f"LayerNorm bf16 {ln['shape']}, median ms (% of roofline): "
                      + ", ".join(f"{p} {bcell(ln.get(p))}" for p in
                                  ("lowering", "torch", "torch.compile", "torch.compile-max")
                                  if p in ln)]
        if w5b:
            lines += ["", f"W5 bf16 MLP step ({w5b['shapes']}: value and 4 gradients), "
                      "median ms: " + ", ".join(f"{p} {bcell(w5b.get(p))}" for p in (
                          "lowering", "lowering-reduce-overhead", "torch", "torch.compile"))]
        mm = bf.get("matmul") or {}
        lo, tm = mm.get("lowering") or {}, mm.get("torch") or {}
        if "ms" in lo and "ms" in tm:
            lines += ["", f"matmul bf16 {mm['n']}^3, median ms (TFLOP/s): lowering "
                      f"{bcell(lo)} ({lo['tflops']:.0f}), torch.mm (cuBLAS) {bcell(tm)} "
                      f"({tm['tflops']:.0f}): {100 * tm['ms'] / lo['ms']:.0f}% of cuBLAS"]
    w6 = result["w6_us"]
    lines += ["", "W6 (x*2+1 on 16 elements, host time per call, device-resident): "
              + ", ".join(f"{k} {v:.1f} µs" for k, v in w6.items()), ""]
    return "\n".join(lines)
