"""CPU benchmark: flashbuf's CPU backend against PyTorch's scaled_dot_product_attention on the
CPU, in one process, on the same tensors and the same thread count (torch.get_num_threads(),
which the flashbuf torch operators pass on). Writes the results schema of BENCH.md with a
`sdpa_cpu` column, times in ms.

    python bench/bench_cpu.py [--threads N] [--repeats 7] [--out bench/results/cpu-<commit>-<date>.json]

Each row is timed `--repeats` times, flashbuf and SDPA interleaved, and the best time of each
is reported (the median too): on a shared machine the best is the least disturbed run. SDPA gets
its preferred layout, (B, H, S, D) contiguous copies of the same values, and for GQA the faster
of enable_gqa=True and K/V expanded to every query head (the expansion is outside the timing).
Decode: flashbuf on a paged cache (pages shuffled in the pool) and on a contiguous one; SDPA on
the same keys stored contiguously (BENCH.md: the paged row's anchor is the contiguous time).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

import flashbuf

PREFILL_ROWS = [
    # (dtype, b, hq, hkv, s, d, causal)
    ("fp32", 1, 16, 4, 2048, 128, True),
    ("bf16", 1, 16, 4, 2048, 128, True),
    ("fp32", 1, 16, 4, 1024, 128, False),
    ("bf16", 1, 16, 4, 1024, 128, False),
    ("fp32", 2, 8, 8, 512, 64, True),
    ("bf16", 2, 8, 8, 512, 64, False),
]
DECODE_ROWS = [
    # (dtype, b, hq, hkv, kv_len, d, page)
    ("bf16", 8, 32, 8, 4096, 128, 0),
    ("bf16", 8, 32, 8, 4096, 128, 16),
    ("fp32", 8, 32, 8, 4096, 128, 0),
]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def best_and_median(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return min(times), statistics.median(times)


def interleaved(fns: dict, repeats: int):
    """Times each callable `repeats` times, round-robin, after one warm-up call each."""
    for fn in fns.values():
        fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1e3)
    return {name: (min(t), statistics.median(t)) for name, t in times.items()}


def sdpa_variants(q, k, v, causal, group):
    """The SDPA calls to try for (B, H, S, D) inputs: native GQA, and K/V expanded."""
    variants = {"gqa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=group > 1)}
    if group > 1:
        ke, ve = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        variants["expanded"] = lambda: F.scaled_dot_product_attention(q, ke, ve, is_causal=causal)
    return variants


def timed_against_sdpa(run, out, q, k, v, causal, repeats) -> dict:
    """Times flashbuf's call `run` (which returned `out`) against the faster SDPA form on the same
    (B, S, H, D) inputs; returns the row's timing fields and the largest difference from SDPA."""
    qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    fns = {"flashbuf": run}
    variants = sdpa_variants(qt, kt, vt, causal, q.shape[2] // k.shape[2])
    for name, fn in variants.items():
        fns["sdpa_" + name] = fn
    ref = variants["gqa"]().transpose(1, 2)
    err = (out.float() - ref.float()).abs().max().item()
    t = interleaved(fns, repeats)
    sdpa_name = min((n for n in t if n.startswith("sdpa_")), key=lambda n: t[n][0])
    return {"flashbuf": round(t["flashbuf"][0], 3), "sdpa_cpu": round(t[sdpa_name][0], 3),
            "speedup_vs_sdpa_cpu": round(t[sdpa_name][0] / t["flashbuf"][0], 3),
            "flashbuf_median": round(t["flashbuf"][1], 3), "sdpa_cpu_median": round(t[sdpa_name][1], 3),
            "sdpa_cpu_form": sdpa_name[5:], "max_abs_diff_vs_sdpa": err}


def prefill_row(dtype, b, hq, hkv, s, d, causal, repeats):
    torch.manual_seed(0)
    dt = DTYPES[dtype]
    q = torch.randn(b, s, hq, d, dtype=dt)
    k = torch.randn(b, s, hkv, d, dtype=dt)
    v = torch.randn(b, s, hkv, d, dtype=dt)
    out = flashbuf.attention(q, k, v, causal=causal)
    assert flashbuf.last_backend() == "cpu", flashbuf.last_backend()
    timing = timed_against_sdpa(lambda: flashbuf.attention(q, k, v, causal=causal), out, q, k, v, causal, repeats)
    return {"kind": "prefill", "dtype": dtype, "b": b, "hq": hq, "hkv": hkv, "sq": s, "sk": s, "d": d, "dv": d,
            "causal": causal, "page": 0, "kernel": "cpu", "unit": "ms", **timing}


def decode_row(dtype, b, hq, hkv, kv_len, d, page, repeats):
    torch.manual_seed(0)
    dt = DTYPES[dtype]
    q = torch.randn(b, 1, hq, d, dtype=dt)
    k = torch.randn(b, kv_len, hkv, d, dtype=dt)
    v = torch.randn(b, kv_len, hkv, d, dtype=dt)
    seqlens = torch.full((b,), kv_len, dtype=torch.int32)
    if page:
        pages_per_seq = kv_len // page
        num_pages = b * pages_per_seq
        order = torch.randperm(num_pages)  # page table entry n -> pool slot order[n]
        k_pool = torch.empty(num_pages, page, hkv, d, dtype=dt)
        v_pool = torch.empty_like(k_pool)
        k_pool[order] = k.reshape(num_pages, page, hkv, d)
        v_pool[order] = v.reshape(num_pages, page, hkv, d)
        table = order.reshape(b, pages_per_seq).to(torch.int32).contiguous()
        plan = flashbuf.DecodePlan(b, 1, hq, hkv, d, d, kv_len, page, dtype, "cpu")
        run = lambda: plan.run(q, k_pool, v_pool, seqlens, table)
    else:
        plan = flashbuf.DecodePlan(b, 1, hq, hkv, d, d, kv_len, 0, dtype, "cpu")
        run = lambda: plan.run(q, k, v, seqlens)
    timing = timed_against_sdpa(run, run(), q, k, v, False, repeats)
    return {"kind": "decode", "dtype": dtype, "b": b, "hq": hq, "hkv": hkv, "sq": 1, "sk": kv_len, "d": d, "dv": d,
            "causal": False, "page": page, "kernel": "cpu", "unit": "ms", **timing}


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def git_commit() -> str:
    try:
        return subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=os.path.dirname(__file__) or ".",
                                       text=True, stderr=subprocess.DEVNULL).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0 = torch's default)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default=None)
    parser.add_argument("--only", choices=("prefill", "decode"), default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    if args.only != "decode":
        for spec in PREFILL_ROWS:
            rows.append(prefill_row(*spec, args.repeats))
            print(json.dumps(rows[-1]), flush=True)
    if args.only != "prefill":
        for spec in DECODE_ROWS:
            rows.append(decode_row(*spec, args.repeats))
            print(json.dumps(rows[-1]), flush=True)
    today = datetime.date.today()
    commit = git_commit()
    meta = {"gpu": None, "cpu": cpu_name(), "threads": torch.get_num_threads(), "cores": os.cpu_count(),
            "commit": commit, "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
            "torch": torch.__version__, "date": today.isoformat(), "timing": f"best of {args.repeats} interleaved",
            "flashbuf_build": flashbuf.build_info()}
    out = args.out or os.path.join(os.path.dirname(__file__), "results",
                                   f"cpu-{commit[:7]}-{today.strftime('%Y%m%d')}.json")
    with open(out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    print(f"{'kind':8} {'dtype':5} {'shape':34} {'flashbuf ms':>12} {'sdpa_cpu ms':>12} {'speedup':>8}")
    for r in rows:
        shape = f"B{r['b']} H{r['hq']}/{r['hkv']} S{r['sq']}x{r['sk']} D{r['d']}" + (" causal" if r["causal"] else "")
        shape += f" page{r['page']}" if r["page"] else ""
        print(f"{r['kind']:8} {r['dtype']:5} {shape:34} {r['flashbuf']:12.2f} {r['sdpa_cpu']:12.2f} "
              f"{r['speedup_vs_sdpa_cpu']:8.2f}")
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
