#!/usr/bin/env python3
"""flashbuf against PyTorch SDPA's FlashAttention-2 and cuDNN backends, in one process, on
identical tensors: the prefill and decode grids of docs/BENCH.md.

    python3 bench/bench.py                      # both grids, the full BENCH.md grid
    python3 bench/bench.py --prefill --d 128 --s 4096,16384 --causal yes
    python3 bench/bench.py --decode --heads 32/8 --b 1,8 --kv 512,8192 --pages 0,16
    python3 bench/bench.py --quick              # a small subset, for smoke tests
    python3 bench/bench.py --prefill --rounds 3  # each point timed 3x, alternating the order
    python3 bench/bench.py --prefill --prefill-page 16 --anchors none   # paged KV, flashbuf alone
    python3 bench/bench.py --prefill --prefill-varlen                    # packed varlen batches
    python3 bench/bench.py --prefill --prefill-cache --anchors none      # a K/V cache with seqlens_k
    python3 bench/bench.py --sinks --anchors none      # flashbuf with random attention sinks
    python3 bench/bench.py --sinks ab --anchors none   # flashbuf without and with sinks, interleaved
    python3 bench/bench.py --serving --rounds 3        # the serving grid: GQA, varlen, paged chunked prefill
    python3 bench/bench.py --serve ...                 # one point per request: bench/ab_interleaved.py's server

Needs an NVIDIA GPU, PyTorch and the installed flashbuf package (pip install . from the
repository); it builds nothing. FlashAttention-4 (`flash_attn.cute`, shared/anchors/fa4/) is the
`fa4` anchor when it imports; without it the fa4 cells are null. For each row it first checks
every implementation's output
(against a float32 reference on a subset of query rows), then times CUDA-graph replays of many
calls (median of >= 7 replays) with the inputs larger than L2 or rotated among several sets.
An implementation that fails or disagrees writes null and the run goes on.

Writes the results schema of BENCH.md (default $OUT/ or bench/results/, named
<gpu>-<what>-<yyyymmdd>.json), a PNG plot next to it, and prints a table of ratios last.
Environment: FLASHBUF_COMMIT overrides `git rev-parse HEAD` (the GPU machine may lack .git).
"""
from __future__ import annotations

import argparse
import datetime
import functools
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import traceback

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

try:  # FlashAttention-4 (CuTe DSL): an anchor when present
    from flash_attn.cute import flash_attn_func as fa4_func, flash_attn_varlen_func as fa4_varlen_func
    FA4_IMPORT_ERROR = None
except Exception as e:
    fa4_func = fa4_varlen_func = None
    FA4_IMPORT_ERROR = repr(e)

try:
    import flashbuf
    FLASHBUF_IMPORT_ERROR = None
except Exception as e:  # the anchors still run; every flashbuf cell is null
    flashbuf = None
    FLASHBUF_IMPORT_ERROR = repr(e)

# The library's tuning overrides (tools/tuning_env.hpp) for A/B and tuning runs: this script reads
# them from its environment and passes them on; flashbuf itself reads no environment.
TUNING_VARIABLES = ("FLASHBUF_DECODE_SPLITS", "FLASHBUF_DECODE_MERGE", "FLASHBUF_DECODE_RING", "FLASHBUF_PREFILL_GRID")
TUNING_GIVEN: dict[str, str] = {}  # what apply_tuning_environment passed on, for the results' meta


def apply_tuning_environment():
    given = {name: os.environ[name] for name in TUNING_VARIABLES if os.environ.get(name)}
    if flashbuf is None or not given:
        return
    TUNING_GIVEN.update(given)
    if hasattr(flashbuf._C, "set_tuning_overrides"):  # builds before it read the variables themselves
        flashbuf._C.set_tuning_overrides(given)

# ---- constants from docs/BENCH.md -----------------------------------------------------------------
GEMM_BF16_TFLOPS = 766.0   # H200, torch.matmul 8192^3
READ_TBS = 4.58            # H200, device-memory read (row sum over 4 GiB, graph replay)
PREFILL_TOKENS = 16384     # tokens per batch: B = 16384 / S
PREFILL_HIDDEN = 2048      # H = 2048 / D
PREFILL_S = (512, 1024, 2048, 4096, 8192, 16384)
PREFILL_D = (64, 128, 256)
CACHE_SLACK = 256          # --prefill-cache: rows of the cache past every sequence's length
DECODE_HEADS = ((32, 8), (64, 8), (32, 32))
DECODE_B = (1, 8, 32, 128)
DECODE_KV = (512, 2048, 8192, 32768, 131072)
DECODE_MAX_B_KV_HKV = 128 * 16384 * 8   # B * KV * Hkv <= 16M
DECODE_PAGES = (0, 16, 64)
DECODE_D = 128
ANCHORS = {"fa2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}  # PyTorch SDPA backends
ANCHOR_NAMES = tuple(ANCHORS) + ("fa4",)
# The serving grid (BENCH.md): Hq/Hkv 32/8, D 128; equal-length batches of 16k tokens, varlen
# batches, and chunked prefill of (batch, cached keys, new queries) over shuffled pages.
SERVING_HEADS = (32, 8)
SERVING_D = 128
SERVING_S = (1024, 4096, 16384)
SERVING_VARLEN = ((4096, 512, 2048, 37, 8000, 1500), (100,) * 64 + (8192,), (16384,), (513,) * 31)
SERVING_CHUNKS = ((4, 8192, 2048), (16, 2048, 512), (1, 30000, 4096))
SERVING_PAGES = (16, 64, 128)
REFERENCE_ROWS = 96        # query rows per sequence checked against the float32 reference
ANCHOR_MAX_ERR = 2e-2      # an anchor beyond this is reported as failing its own check

DEV = torch.device("cuda")
failures: list[str] = []


def note_failure(what: str, err) -> None:
    msg = f"{what}: {err if isinstance(err, str) else repr(err)[:300]}"
    failures.append(msg)
    print("  !", msg, flush=True)


# ---- timing -------------------------------------------------------------------------------------

def l2_bytes() -> int:
    return int(getattr(torch.cuda.get_device_properties(DEV), "L2_cache_size", 60 * 1024 * 1024))


def rotation_sets(bytes_per_set: int, max_sets: int = 32) -> int:
    """Input sets to cycle through so that one pass reads at least 3x L2 from memory."""
    return max(1, min(max_sets, math.ceil(3 * l2_bytes() / max(bytes_per_set, 1))))


# The measured graph's own untimed replays before the timed ones (--warm-ms; WARM_S seconds): what
# runs right after another implementation's graph inherits the clocks that one's power draw left,
# so without them each time would depend on what the rotation put before it. After them each runs
# at its own sustained clocks (bench/NOTES-prefill.md, "The harness's order bias, fixed").
WARM_MS_DEFAULT = 300.0
WARM_S = WARM_MS_DEFAULT / 1e3


def captured_graph(calls, target_ms: float):
    """A CUDA graph of `reps` calls cycling through `calls` (one callable per rotated input set),
    about target_ms long, after two untimed passes outside capture (lazy initialisation,
    autotuning); returns (graph, reps)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            for fn in calls:
                fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for fn in calls:
        fn()
    stop.record()
    stop.synchronize()
    est_us = max(start.elapsed_time(stop) * 1e3 / len(calls), 1.0)
    reps = int(min(2000, max(len(calls), math.ceil(target_ms * 1e3 / est_us))))
    reps = math.ceil(reps / len(calls)) * len(calls)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(reps):
            calls[i % len(calls)]()
    return graph, reps


def graph_time_us(calls, iters: int, target_ms: float) -> float:
    """Median time of one call in µs, from replays of captured_graph(calls, target_ms), after
    WARM_S of untimed replays."""
    graph, reps = captured_graph(calls, target_ms)
    for _ in range(1 + math.ceil(WARM_S * 1e3 / target_ms)):
        graph.replay()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(max(iters, 7)):
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3 / reps)
    del graph
    times.sort()
    return times[len(times) // 2]


def bound_calls(fn, arg_sets) -> list:
    """fn bound to each argument tuple: the calls graph_time_us cycles through."""
    return [functools.partial(fn, *args) for args in arg_sets]


def prefill_flops(b: int, h: int, s: int, d: int, dv: int, causal: bool) -> float:
    """FLOPs of a prefill grid point (Q K^T and P V; causal counts half the square)."""
    return 2.0 * b * h * s * s * (d + dv) / (2 if causal else 1)


# ---- references -----------------------------------------------------------------------------------

def sample_rows(s: int, n: int = REFERENCE_ROWS) -> torch.Tensor:
    """Query rows to check: the first, the last, and an even spread between."""
    if s <= n:
        return torch.arange(s, device=DEV)
    return torch.unique(torch.cat([torch.linspace(0, s - 1, n - 2, device=DEV).round().long(),
                                   torch.tensor([1, s - 2], device=DEV)]))


def sinks_kw(sinks):
    """flashbuf's sinks argument, left out when there are none, so the harness also measures
    builds from before sinks existed (A/B against an earlier commit)."""
    return {} if sinks is None else {"sinks": sinks}


def reference_rows(q, k, v, rows, causal, chunk_bytes=1 << 30, sinks=None):
    """float32 softmax attention for the query rows `rows` of (B, Sq, Hq, D) q over (B, Sk, Hkv, D)
    k and (B, Sk, Hkv, Dv) v, bottom-right causal; `sinks` (Hq,) float32, if given, joins each
    row's softmax as one more logit that adds no value. Returns (B, len(rows), Hq, Dv)."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    group, r = hq // hkv, len(rows)
    key = torch.arange(sk, device=DEV)
    visible = None
    if causal:
        visible = key[None, :] <= rows[:, None] + (sk - sq)                        # (r, Sk)
    per_seq = sk * hkv * (d + v.shape[-1]) * 4 + hq * r * sk * 4
    step = max(1, chunk_bytes // max(per_seq, 1))
    outs = []
    for lo in range(0, b, step):
        hi = min(b, lo + step)
        # query head h reads kv head h // group: fold the group into the rows
        qs = q[lo:hi, rows].float().permute(0, 2, 1, 3).reshape(hi - lo, hkv, group * r, d)
        ks = k[lo:hi].float().transpose(1, 2)                                      # (b, Hkv, Sk, D)
        vs = v[lo:hi].float().transpose(1, 2)
        scores = (qs @ ks.transpose(-1, -2)) / math.sqrt(d)                        # (b, Hkv, group*r, Sk)
        if visible is not None:
            scores = scores.view(hi - lo, hkv, group, r, sk).masked_fill(~visible, float("-inf"))
            scores = scores.view(hi - lo, hkv, group * r, sk)
        if sinks is not None:  # one more column per row: its head's sink; dropped after the softmax
            sink_col = sinks.float().view(1, hkv, group, 1, 1).expand(hi - lo, hkv, group, r, 1)
            scores = torch.cat([scores, sink_col.reshape(hi - lo, hkv, group * r, 1)], dim=-1)
            o = scores.softmax(dim=-1)[..., :sk].nan_to_num(0.0) @ vs
        else:
            o = scores.softmax(dim=-1).nan_to_num(0.0) @ vs                        # (b, Hkv, group*r, Dv)
        outs.append(o.view(hi - lo, hq, r, -1).transpose(1, 2))
        del qs, ks, vs, scores, o
    return torch.cat(outs)


def max_abs_err(out_rows, ref) -> float:
    return float((out_rows.float() - ref).abs().max())


def flashbuf_tolerance(anchor_errs) -> float:
    """flashbuf's error bound: twice the worst passing anchor's, plus 1e-3; without a passing
    anchor, the most that rule could allow (anchors pass up to ANCHOR_MAX_ERR)."""
    return 2 * (max(anchor_errs) if anchor_errs else ANCHOR_MAX_ERR) + 1e-3


def random_sinks(hq: int) -> torch.Tensor:
    """Sink logits of the size a trained model's have (gpt-oss: a few units around 0)."""
    return torch.empty(hq, device=DEV, dtype=torch.float32).uniform_(-2.0, 4.0)


def flashbuf_variants(args, hq: int) -> dict:
    """flashbuf's implementations to run: {column: sinks tensor or None}. --sinks on gives the
    flashbuf column sinks; --sinks ab adds a flashbuf_sinks column, timed in the same rounds."""
    if args.sinks == "off":
        return {"flashbuf": None}
    sinks = random_sinks(hq)
    return {"flashbuf": sinks} if args.sinks == "on" else {"flashbuf": None, "flashbuf_sinks": sinks}


def sdpa(q, k, v, causal, backend):
    """SDPA on flashbuf's (B, S, H, D) tensors: transposed views of the same storage."""
    with sdpa_kernel(backend):
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=causal, enable_gqa=q.shape[2] != k.shape[2])
    return o.transpose(1, 2)


def fa4_output(result):
    """FA4's functions return o or (o, lse) by version: the o."""
    return result[0] if isinstance(result, (tuple, list)) else result


def anchor_fn(name: str, causal: bool):
    """Anchor `name` on (B, S, H, D) q, k, v, bottom-right causal (SDPA's is_causal is only
    that for Sq == Sk, which is every shape it is asked here)."""
    if name == "fa4":
        if fa4_func is None:
            raise RuntimeError(f"flash_attn.cute does not import: {FA4_IMPORT_ERROR}")
        return lambda q, k, v: fa4_output(fa4_func(q, k, v, causal=causal))
    return (lambda be: lambda q, k, v: sdpa(q, k, v, causal, be))(ANCHORS[name])


# ---- prefill --------------------------------------------------------------------------------------

def bench_prefill(d: int, s: int, causal: bool, args) -> dict:
    b, h = PREFILL_TOKENS // s, PREFILL_HIDDEN // d
    dv = args.dv or d
    page = args.prefill_page
    row = {"kind": "prefill", "dtype": "bf16", "b": b, "hq": h, "hkv": h, "sq": s, "sk": s, "d": d, "dv": dv,
           "causal": causal, "page": page, "kernel": None, "unit": "TFLOP/s", "flashbuf": None, "fa2": None,
           "cudnn": None, "fa4": None, "max_abs_err": None}
    if args.prefill_varlen:
        row["varlen"] = True
    if args.prefill_cache:
        row["cache"] = True
    variants = flashbuf_variants(args, h) if flashbuf is not None else {}
    if args.sinks == "on":
        row["sinks"] = True
    elif args.sinks == "ab":
        row["flashbuf_sinks"] = None
    flops = prefill_flops(b, h, s, d, dv, causal)
    set_bytes = b * s * h * (2 * d + dv) * 2
    sets = [tuple(torch.randn(b, s, h, width, device=DEV, dtype=torch.bfloat16) for width in (d, d, dv))
            for _ in range(rotation_sets(set_bytes, max_sets=8))]
    rows = sample_rows(s)
    q0, k0, v0 = sets[0]
    ref = reference_rows(q0, k0, v0, rows, causal)
    refs = {name: ref if sinks is None else reference_rows(q0, k0, v0, rows, causal, sinks=sinks)
            for name, sinks in variants.items()}
    tag = f"prefill d={d} dv={dv} s={s} causal={causal}"

    impls = {}
    if flashbuf is not None and page:  # the same keys in shuffled pages; the anchors read them contiguous
        seqlens = torch.full((b,), s, dtype=torch.int32, device=DEV)
        paged = {id(k): paged_copy(k, v, page) for _, k, v in sets}

        def flashbuf_paged(sinks):
            def run(q, k, v):
                kp, vp, table = paged[id(k)]
                return flashbuf.attention(q, kp, vp, causal=causal, seqlens_k=seqlens, page_table=table,
                                          max_seqlen_k=s, backend=args.backend, **sinks_kw(sinks))
            return run
        for name, sinks in variants.items():
            impls[name] = flashbuf_paged(sinks)
    elif flashbuf is not None and args.prefill_cache:  # the same keys in a longer cache; the anchors read them alone
        seqlens = torch.full((b,), s, dtype=torch.int32, device=DEV)

        def longer(x):  # CACHE_SLACK rows of noise after each sequence's keys
            noise = torch.randn((x.shape[0], CACHE_SLACK, *x.shape[2:]), dtype=x.dtype, device=x.device)
            return torch.cat([x, noise], dim=1)
        caches = {id(k): (longer(k), longer(v)) for _, k, v in sets}

        def flashbuf_cache(sinks):
            def run(q, k, v):
                kc, vc = caches[id(k)]
                return flashbuf.attention(q, kc, vc, causal=causal, seqlens_k=seqlens, backend=args.backend,
                                          **sinks_kw(sinks))
            return run
        for name, sinks in variants.items():
            impls[name] = flashbuf_cache(sinks)
    elif flashbuf is not None and args.prefill_varlen:  # the same tensors as one packed batch
        cu = torch.arange(0, b * s + 1, s, dtype=torch.int32, device=DEV)

        def flashbuf_varlen(sinks):
            def run(q, k, v):
                o = flashbuf.attention(q.view(b * s, h, d), k.view(b * s, h, d), v.view(b * s, h, dv),
                                       causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=s,
                                       max_seqlen_k=s, backend=args.backend, **sinks_kw(sinks))
                return o.view(b, s, h, dv)
            return run
        for name, sinks in variants.items():
            impls[name] = flashbuf_varlen(sinks)
    elif flashbuf is not None:
        for name, sinks in variants.items():
            impls[name] = (lambda sk_: lambda q, k, v: flashbuf.attention(q, k, v, causal=causal, backend=args.backend,
                                                                           **sinks_kw(sk_)))(sinks)
    for name in args.anchors:
        try:
            impls[name] = anchor_fn(name, causal)
        except Exception as e:  # FA4 asked for but absent: its cell stays null
            note_failure(f"{tag} {name}", e)

    us = time_rounds(tag, row, impls, sets, lambda name, out: max_abs_err(out[:, rows], refs.get(name, ref)),
                     variants, args)
    for name, median_us in us.items():
        row[name] = flops / (median_us * 1e-6) / 1e12
    del sets, ref, refs
    return row


# ---- decode ---------------------------------------------------------------------------------------

def paged_copy(k, v, page):
    """The same cache in a pool of pages in shuffled order, and its page table."""
    b, s, hkv, d = k.shape
    per_seq = s // page
    perm = torch.randperm(b * per_seq, device=DEV)
    kp = torch.empty(b * per_seq, page, hkv, d, device=DEV, dtype=k.dtype)
    vp = torch.empty(b * per_seq, page, hkv, v.shape[-1], device=DEV, dtype=v.dtype)
    kp[perm] = k.reshape(b * per_seq, page, hkv, d)
    vp[perm] = v.reshape(b * per_seq, page, hkv, v.shape[-1])
    return kp, vp, perm.view(b, per_seq).to(torch.int32)


def bench_decode_shape(hq: int, hkv: int, b: int, skv: int, pages, args) -> list[dict]:
    d = dv = DECODE_D
    kv_bytes = b * skv * hkv * (d + dv) * 2
    floor_us = kv_bytes / (READ_TBS * 1e12) * 1e6
    tag = f"decode {hq}/{hkv} b={b} kv={skv}"
    n_sets = rotation_sets(kv_bytes)
    sets = [(torch.randn(b, 1, hq, d, device=DEV, dtype=torch.bfloat16),
             torch.randn(b, skv, hkv, d, device=DEV, dtype=torch.bfloat16),
             torch.randn(b, skv, hkv, dv, device=DEV, dtype=torch.bfloat16)) for _ in range(n_sets)]
    seqlens = torch.full((b,), skv, dtype=torch.int32, device=DEV)
    q0, k0, v0 = sets[0]
    ref = reference_rows(q0, k0, v0, torch.arange(1, device=DEV), causal=False)
    variants = flashbuf_variants(args, hq) if flashbuf is not None else {}
    refs = {name: ref if sinks is None else reference_rows(q0, k0, v0, torch.arange(1, device=DEV), causal=False,
                                                           **sinks_kw(sinks))
            for name, sinks in variants.items()}

    # the anchors, on the contiguous cache; paged rows repeat them (BENCH.md)
    anchors, anchor_errs = {}, []
    for name in args.anchors:
        try:
            fn = anchor_fn(name, False)
            err = max_abs_err(fn(q0, k0, v0), ref)
            if not err <= ANCHOR_MAX_ERR:
                note_failure(f"{tag} {name}", f"max abs error {err:.3g}; not timed")
                continue
            anchor_errs.append(err)
            anchors[name] = bound_calls(fn, sets)
        except Exception as e:
            note_failure(f"{tag} {name}", e)
        torch.cuda.empty_cache()

    out_rows, flashbuf_calls = [], {}  # flashbuf_calls: (page, variant) -> the calls to time
    for page in pages:
        row = {"kind": "decode", "dtype": "bf16", "b": b, "hq": hq, "hkv": hkv, "sq": 1, "sk": skv, "d": d,
               "dv": dv, "causal": False, "page": page, "kernel": None, "unit": "us", "flashbuf": None,
               "fa2": None, "cudnn": None, "fa4": None, "floor_us": floor_us, "max_abs_err": None}
        if args.sinks == "on":
            row["sinks"] = True
        elif args.sinks == "ab":
            row["flashbuf_sinks"] = None
        out_rows.append(row)
        if flashbuf is None:
            continue
        try:
            if page:
                caches = [(q,) + paged_copy(k, v, page) for q, k, v in sets]
            else:
                caches = [(q, k, v, None) for q, k, v in sets]
            plan = flashbuf.DecodePlan(b, 1, hq, hkv, d, dv, skv, page, dtype=torch.bfloat16, device=DEV)
            # The plan the row times (a forced FLASHBUF_DECODE_SPLITS or _MERGE shows here too).
            row["splits"] = plan.num_splits
            row["merge"] = "none" if plan.num_splits == 1 else "workspace" if plan.workspace_bytes else "cluster"
            for name, sinks in variants.items():
                def run(q, k, v, table, plan=plan, kw=sinks_kw(sinks)):
                    return plan.run(q, k, v, seqlens, table, **kw)
                out = run(*caches[0])
                torch.cuda.synchronize()
                row["kernel"] = "decode"
                err = max_abs_err(out, refs[name])
                row["max_abs_err"] = err if row["max_abs_err"] is None else max(row["max_abs_err"], err)
                limit = flashbuf_tolerance(anchor_errs)
                if not err <= limit:
                    note_failure(f"{tag} page={page} {name}", f"max abs error {err:.3g} exceeds {limit:.3g}; not timed")
                else:
                    flashbuf_calls[(page, name)] = bound_calls(run, caches)
                del out
        except Exception as e:
            note_failure(f"{tag} page={page} flashbuf", e)
    # Every implementation on every page timed --rounds times, each round from a different one
    # (so every page's cache stays allocated until the rounds end: about 26 GB at the grid's
    # largest shape, B * KV * Hkv = 16M, against 17 GB when each page was timed and freed alone).
    calls = {("anchor", name): fns for name, fns in anchors.items()} | flashbuf_calls
    times = timed_rounds(tag, calls, args)
    for row in out_rows:
        for name in anchors:
            row[name] = times.get(("anchor", name))
        for name in variants:
            if (row["page"], name) in flashbuf_calls:
                row[name] = times.get((row["page"], name))
    del sets, ref, calls, flashbuf_calls, anchors
    torch.cuda.empty_cache()
    return out_rows


# ---- serving grid ---------------------------------------------------------------------------------

def visible_pairs(lq: int, lk: int, causal: bool) -> int:
    """(query, key) pairs the mask leaves, bottom-right causal: the FLOPs the serving grid counts."""
    if not causal:
        return lq * lk
    return sum(min(lk, max(0, lk - lq + i + 1)) for i in range(lq)) if lk < lq else lq * (lk - lq) + lq * (lq + 1) // 2


def padded_paged_copy(k, v, page):
    """paged_copy of (B, Sk, H, D) caches whose Sk need not be a multiple of the page: the last
    page of each sequence is padded with noise that seqlens_k leaves unread."""
    pad = -k.shape[1] % page
    if pad:
        k = torch.cat([k, torch.randn_like(k[:, :pad])], dim=1)
        v = torch.cat([v, torch.randn_like(v[:, :pad])], dim=1)
    return paged_copy(k, v, page)


def packed_reference(q, k, v, cu_q, cu_k, causal, sinks=None):
    """reference_rows per sequence of packed (T, H, D) tensors: [(token indices, reference)]."""
    out = []
    for i in range(len(cu_q) - 1):
        qa, qb, ka, kb = cu_q[i], cu_q[i + 1], cu_k[i], cu_k[i + 1]
        rows = sample_rows(qb - qa, 32 if len(cu_q) > 8 else REFERENCE_ROWS)
        ref = reference_rows(q[None, qa:qb], k[None, ka:kb], v[None, ka:kb], rows, causal, sinks=sinks)[0]
        out.append((rows + qa, ref))
    return out


def time_rounds(tag: str, row: dict, impls: dict, sets, check, tolerance_names, args) -> dict:
    """Checks each implementation on set 0 (check(name, out) -> max abs error), then times the
    ones that pass over the rotated sets, --rounds times in rotated order; returns {name: µs}."""
    errors = {}
    for name, fn in impls.items():
        try:
            out = fn(*sets[0])
            torch.cuda.synchronize()
            errors[name] = check(name, out)
            if name == "flashbuf":
                row["kernel"] = flashbuf.last_backend()
            del out
        except Exception as e:
            note_failure(f"{tag} {name}", e)
    anchor_errs = [errors[n] for n in ANCHOR_NAMES if n in errors and errors[n] <= ANCHOR_MAX_ERR]
    tolerance = flashbuf_tolerance(anchor_errs)
    if "flashbuf" in errors:
        row["max_abs_err"] = errors["flashbuf"]
    timed = []
    for name, err in errors.items():
        limit = tolerance if name in tolerance_names else ANCHOR_MAX_ERR
        if not err <= limit:  # also catches NaN
            note_failure(f"{tag} {name}", f"max abs error {err:.3g} exceeds {limit:.3g}; not timed")
        else:
            timed.append(name)
    return timed_rounds(tag, {name: bound_calls(impls[name], sets) for name in timed}, args)


def timed_rounds(tag: str, calls: dict, args) -> dict:
    """Times each entry's calls (one per rotated input set) --rounds times; each round starts at
    a different entry, as clocks drift within a run. Returns {key: median µs}; an entry whose
    timing fails is left out."""
    keys = list(calls)
    times = {key: [] for key in keys}
    for r in range(args.rounds):
        shift = r % max(len(keys), 1)
        for key in keys[shift:] + keys[:shift]:
            if times[key] is None:
                continue
            try:
                times[key].append(graph_time_us(calls[key], args.iters, args.target_ms))
            except Exception as e:
                note_failure(f"{tag} {key if isinstance(key, str) else key[-1]} timing", e)
                times[key] = None
    return {key: statistics.median(us) for key, us in times.items() if us}


def references_by_sinks(variants: dict, reference) -> dict:
    """reference(sinks) without sinks (key None) and for each variant's sinks tensor (key its id):
    what each implementation's output on set 0 is checked against."""
    refs = {None: reference(None)}
    for sinks in variants.values():
        if sinks is not None:
            refs[id(sinks)] = reference(sinks)
    return refs


def serving_row(case: str, b: int, sq: int, sk: int, causal: bool, page: int) -> dict:
    hq, hkv = SERVING_HEADS
    return {"kind": "serving", "case": case, "dtype": "bf16", "b": b, "hq": hq, "hkv": hkv, "sq": sq, "sk": sk,
            "d": SERVING_D, "dv": SERVING_D, "causal": causal, "page": page, "kernel": None, "unit": "TFLOP/s",
            "flashbuf": None, "fa4": None, "cudnn": None, "max_abs_err": None}


def bench_serving_gqa(s: int, causal: bool, args) -> dict:
    """An equal-length GQA batch of 16k tokens: flashbuf, FA4 and cuDNN on the same tensors."""
    (hq, hkv), d, b = SERVING_HEADS, SERVING_D, PREFILL_TOKENS // s
    row = serving_row("gqa", b, s, s, causal, 0)
    variants = flashbuf_variants(args, hq) if flashbuf is not None else {}
    row.update({name: None for name in variants})
    set_bytes = b * s * (hq + 2 * hkv) * d * 2
    sets = [(torch.randn(b, s, hq, d, device=DEV, dtype=torch.bfloat16),
             torch.randn(b, s, hkv, d, device=DEV, dtype=torch.bfloat16),
             torch.randn(b, s, hkv, d, device=DEV, dtype=torch.bfloat16)) for _ in range(rotation_sets(set_bytes, 8))]
    rows = sample_rows(s)
    q0, k0, v0 = sets[0]
    refs = references_by_sinks(variants, lambda sinks: reference_rows(q0, k0, v0, rows, causal, sinks=sinks))
    impls = {name: (lambda sk_: lambda q, k, v: flashbuf.attention(q, k, v, causal=causal, backend=args.backend,
                                                                   **sinks_kw(sk_)))(sinks)
             for name, sinks in variants.items()}
    for name in ("fa4", "cudnn"):
        if name in args.anchors:
            try:
                impls[name] = anchor_fn(name, causal)
            except Exception as e:
                note_failure(f"serving gqa {name}", e)

    def check(name, out):
        sinks = variants.get(name)
        return max_abs_err(out[:, rows], refs[None if sinks is None else id(sinks)])
    us = time_rounds(f"serving gqa s={s} causal={causal}", row, impls, sets, check, variants, args)
    flops = 4.0 * b * hq * d * visible_pairs(s, s, causal)
    for name, t in us.items():
        row[name] = flops / (t * 1e-6) / 1e12
    del sets, refs
    return row


def bench_serving_varlen(lens, args) -> dict:
    """A packed causal varlen batch (cu_seqlens): flashbuf and FA4; SDPA takes no varlen batch."""
    (hq, hkv), d = SERVING_HEADS, SERVING_D
    total, longest = sum(lens), max(lens)
    row = serving_row("varlen", len(lens), longest, longest, True, 0)
    row["lens"] = list(lens)
    variants = flashbuf_variants(args, hq) if flashbuf is not None else {}
    row.update({name: None for name in variants})
    cu_host = [0]
    for n in lens:
        cu_host.append(cu_host[-1] + n)
    cu = torch.tensor(cu_host, dtype=torch.int32, device=DEV)
    set_bytes = total * (hq + 2 * hkv) * d * 2
    sets = [(torch.randn(total, hq, d, device=DEV, dtype=torch.bfloat16),
             torch.randn(total, hkv, d, device=DEV, dtype=torch.bfloat16),
             torch.randn(total, hkv, d, device=DEV, dtype=torch.bfloat16)) for _ in range(rotation_sets(set_bytes, 8))]
    q0, k0, v0 = sets[0]
    refs = references_by_sinks(variants, lambda sinks: packed_reference(q0, k0, v0, cu_host, cu_host, True,
                                                                         sinks=sinks))
    impls = {name: (lambda sk_: lambda q, k, v: flashbuf.attention(
        q, k, v, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=longest, max_seqlen_k=longest,
        backend=args.backend, **sinks_kw(sk_)))(sinks) for name, sinks in variants.items()}
    if "fa4" in args.anchors:
        if fa4_varlen_func is None:
            note_failure("serving varlen fa4", f"flash_attn.cute does not import: {FA4_IMPORT_ERROR}")
        else:
            impls["fa4"] = lambda q, k, v: fa4_output(fa4_varlen_func(
                q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=longest, max_seqlen_k=longest, causal=True))

    def check(name, out):
        sinks = variants.get(name)
        return max(max_abs_err(out[rows], ref) for rows, ref in refs[None if sinks is None else id(sinks)])
    tag = f"serving varlen {len(lens)} sequences, longest {longest}"
    us = time_rounds(tag, row, impls, sets, check, variants, args)
    flops = 4.0 * hq * d * sum(visible_pairs(n, n, True) for n in lens)
    for name, t in us.items():
        row[name] = flops / (t * 1e-6) / 1e12
    del sets, refs
    return row


def bench_serving_paged(b: int, ctx: int, chunk: int, page: int, args) -> dict:
    """Chunked prefill: `chunk` new queries per sequence over its `ctx` cached keys and their own
    (sk = ctx + chunk, bottom-right causal), K/V in shuffled pages: flashbuf and FA4 (varlen
    queries with page_table and seqused_k). SDPA has no paged KV, and its is_causal is top-left
    for Sq != Sk: its cell is null."""
    (hq, hkv), d, sk = SERVING_HEADS, SERVING_D, ctx + chunk
    row = serving_row("paged", b, chunk, sk, True, page)
    variants = flashbuf_variants(args, hq) if flashbuf is not None else {}
    row.update({name: None for name in variants})
    seqlens = torch.full((b,), sk, dtype=torch.int32, device=DEV)
    cu_q = torch.arange(0, b * chunk + 1, chunk, dtype=torch.int32, device=DEV)
    set_bytes = b * (chunk * hq + 2 * sk * hkv) * d * 2
    contiguous = [(torch.randn(b, chunk, hq, d, device=DEV, dtype=torch.bfloat16),
                   torch.randn(b, sk, hkv, d, device=DEV, dtype=torch.bfloat16),
                   torch.randn(b, sk, hkv, d, device=DEV, dtype=torch.bfloat16))
                  for _ in range(rotation_sets(set_bytes, 8))]
    rows = sample_rows(chunk)
    q0, k0, v0 = contiguous[0]
    refs = references_by_sinks(variants, lambda sinks: reference_rows(q0, k0, v0, rows, True, sinks=sinks))
    sets = []
    for q, k, v in contiguous:
        kp, vp, table = padded_paged_copy(k, v, page)
        sets.append((q, kp, vp, table))
    del contiguous
    impls = {name: (lambda sk_: lambda q, kp, vp, table: flashbuf.attention(
        q, kp, vp, causal=True, seqlens_k=seqlens, page_table=table, max_seqlen_k=sk, backend=args.backend,
        **sinks_kw(sk_)))(sinks) for name, sinks in variants.items()}
    if "fa4" in args.anchors:
        if fa4_varlen_func is None:
            note_failure("serving paged fa4", f"flash_attn.cute does not import: {FA4_IMPORT_ERROR}")
        else:
            impls["fa4"] = lambda q, kp, vp, table: fa4_output(fa4_varlen_func(
                q.view(b * chunk, hq, d), kp, vp, cu_seqlens_q=cu_q, max_seqlen_q=chunk, max_seqlen_k=sk,
                seqused_k=seqlens, page_table=table, causal=True)).view(b, chunk, hq, d)

    def check(name, out):
        sinks = variants.get(name)
        return max_abs_err(out[:, rows], refs[None if sinks is None else id(sinks)])
    us = time_rounds(f"serving paged b={b} ctx={ctx} chunk={chunk} page={page}", row, impls, sets, check, variants,
                     args)
    flops = 4.0 * b * hq * d * visible_pairs(chunk, sk, True)
    for name, t in us.items():
        row[name] = flops / (t * 1e-6) / 1e12
    del sets, refs
    return row


def serving_cases(cases=("gqa", "varlen", "paged")):
    """(label, thunk taking args) for every row of the serving grid's `cases`, in the order of
    shared/anchors/h200-fa4-serving-*.json."""
    for s in SERVING_S if "gqa" in cases else ():
        for causal in (False, True):
            yield f"serving gqa s={s} causal={causal}", (lambda s_, c_: lambda a: bench_serving_gqa(s_, c_, a))(s, causal)
    for lens in SERVING_VARLEN if "varlen" in cases else ():
        yield f"serving varlen {len(lens)} sequences", (lambda l_: lambda a: bench_serving_varlen(l_, a))(lens)
    for page in SERVING_PAGES if "paged" in cases else ():
        for b, ctx, chunk in SERVING_CHUNKS:
            yield (f"serving paged b={b} ctx={ctx} chunk={chunk} page={page}",
                   (lambda *x: lambda a: bench_serving_paged(*x, a))(b, ctx, chunk, page))


# ---- results ---------------------------------------------------------------------------------------

def git_commit() -> str:
    if os.environ.get("FLASHBUF_COMMIT"):
        return os.environ["FLASHBUF_COMMIT"]
    here = os.path.dirname(os.path.abspath(__file__))
    # The GPU machine's copy of the tree can hold a stale git HEAD; the .commit file written
    # before the device call (git rev-parse --short HEAD > .commit) names the tree instead.
    try:
        with open(os.path.join(here, "..", ".commit")) as f:
            return f.read().strip()
    except OSError:
        pass
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                              check=True).stdout.strip()
    except Exception:
        return "unknown"


def fa4_version():
    """The FA4 package's version, or why it is absent."""
    if fa4_func is None:
        return f"absent ({FA4_IMPORT_ERROR})"
    try:
        from importlib.metadata import version
        return version("flash-attn-4")
    except Exception:
        import flash_attn
        return getattr(flash_attn, "__version__", "unknown")


def gpu_meta() -> dict:
    meta = {"gpu": torch.cuda.get_device_name(DEV)}
    try:
        fields = "driver_version,clocks.max.sm,clocks.max.mem,clocks.sm,power.limit"
        line = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader", "-i",
                               str(torch.cuda.current_device())], capture_output=True, text=True,
                              check=True).stdout.strip()
        driver, sm_max, mem_max, sm_now, power = [x.strip() for x in line.split(",")]
        meta.update({"driver": driver, "clocks": {"sm_max": sm_max, "mem_max": mem_max, "sm_at_start": sm_now},
                     "power_limit": power})
    except Exception as e:
        meta["driver"] = f"unknown ({type(e).__name__})"
    return meta


def short_gpu_name(name: str) -> str:
    for token in name.lower().replace("-", " ").split():
        if token[:1] in "abhlv" and any(c.isdigit() for c in token):
            return token
    return name.lower().replace(" ", "_")


def draw_plot(rows, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prefill = [r for r in rows if r["kind"] == "prefill"]
    decode = [r for r in rows if r["kind"] == "decode"]
    panels = sorted({(r["causal"], r["d"]) for r in prefill})
    heads = sorted({(r["hq"], r["hkv"]) for r in decode})
    ncols = max(3, len(heads))
    nrows = (2 if any(c for c, _ in panels) and any(not c for c, _ in panels) else (1 if panels else 0)) + \
        (1 if heads else 0)
    if nrows == 0:
        return
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 4 * nrows), squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)
    styles = {"flashbuf": dict(color="C3", marker="o"), "fa2": dict(color="C0", marker="s", linestyle="--"),
              "cudnn": dict(color="C2", marker="^", linestyle=":")}
    causal_rows = sorted({c for c, _ in panels})
    for causal, d in panels:
        r_i = causal_rows.index(causal)
        c_i = sorted({dd for cc, dd in panels if cc == causal}).index(d)
        ax = axes[r_i][c_i]
        ax.set_visible(True)
        sel = sorted((r for r in prefill if r["causal"] == causal and r["d"] == d), key=lambda r: r["sq"])
        for impl, style in styles.items():
            pts = [(r["sq"], r[impl]) for r in sel if r[impl] is not None]
            if pts:
                ax.plot(*zip(*pts), label=impl, **style)
        ax.set_xscale("log", base=2)
        ax.set_title(f"prefill bf16 D={d} {'causal' if causal else 'no mask'}")
        ax.set_xlabel("sequence length")
        ax.set_ylabel("TFLOP/s")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for c_i, (hq, hkv) in enumerate(heads):
        ax = axes[nrows - 1][c_i]
        ax.set_visible(True)
        sel = [r for r in decode if (r["hq"], r["hkv"]) == (hq, hkv)]
        for j, b in enumerate(sorted({r["b"] for r in sel})):
            color = f"C{j}"
            for page, ls in ((0, "-"), (16, "--"), (64, "-.")):
                pts = sorted((r["sk"], r["flashbuf"]) for r in sel if r["b"] == b and r["page"] == page
                             and r["flashbuf"] is not None)
                if pts:
                    ax.plot(*zip(*pts), color=color, linestyle=ls, marker="o", markersize=3,
                            label=f"flashbuf B={b}" + (f" page {page}" if page else ""))
            pts = sorted({(r["sk"], r["cudnn"]) for r in sel if r["b"] == b and r["cudnn"] is not None})
            if pts:
                ax.plot(*zip(*pts), color=color, linestyle=":", marker="^", markersize=3, label=f"cudnn B={b}")
            pts = sorted({(r["sk"], r["floor_us"]) for r in sel if r["b"] == b})
            ax.plot(*zip(*pts), color=color, linewidth=0.6, alpha=0.5)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"decode bf16 D=128 Hq/Hkv={hq}/{hkv} (thin: floor)")
        ax.set_xlabel("KV length")
        ax.set_ylabel("µs per step (graph replay)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def print_table(rows) -> None:
    def fmt(x, w=8, p=1):
        return f"{x:{w}.{p}f}" if isinstance(x, (int, float)) and x is not None else f"{'-':>{w}}"

    def ratio(a, b):
        return a / b if a is not None and b else None

    prefill = [r for r in rows if r["kind"] == "prefill"]
    decode = [r for r in rows if r["kind"] == "decode"]
    if prefill:
        print("\n== prefill, bf16, TFLOP/s; ratios are flashbuf / anchor (> 1: flashbuf faster) ==")
        print(f"{'causal':>6} {'d':>4} {'s':>6} {'b':>3} {'h':>3} | {'flashbuf':>8} {'fa2':>8} {'cudnn':>8} |"
              f" {'/fa2':>6} {'/cudnn':>6} | {'err':>8} kernel")
        for r in prefill:
            print(f"{str(r['causal']):>6} {r['d']:>4} {r['sq']:>6} {r['b']:>3} {r['hq']:>3} | {fmt(r['flashbuf'])}"
                  f" {fmt(r['fa2'])} {fmt(r['cudnn'])} | {fmt(ratio(r['flashbuf'], r['fa2']), 6, 2)}"
                  f" {fmt(ratio(r['flashbuf'], r['cudnn']), 6, 2)} | {fmt(r['max_abs_err'], 8, 4)} {r['kernel'] or '-'}")
    if decode:
        print("\n== decode, bf16 D=128, µs per step (graph replay); ratios are flashbuf / anchor (< 1: flashbuf "
              "faster) ==")
        print(f"{'hq/hkv':>7} {'b':>4} {'kv':>7} {'page':>4} | {'floor':>8} {'flashbuf':>8} {'fa2':>8} {'cudnn':>8} |"
              f" {'/fa2':>6} {'/cudnn':>6} {'/floor':>6} | {'err':>8}")
        for r in decode:
            print(f"{r['hq']:>3}/{r['hkv']:<3} {r['b']:>4} {r['sk']:>7} {r['page']:>4} | {fmt(r['floor_us'])}"
                  f" {fmt(r['flashbuf'])} {fmt(r['fa2'])} {fmt(r['cudnn'])} |"
                  f" {fmt(ratio(r['flashbuf'], r['fa2']), 6, 2)} {fmt(ratio(r['flashbuf'], r['cudnn']), 6, 2)}"
                  f" {fmt(ratio(r['flashbuf'], r['floor_us']), 6, 2)} | {fmt(r['max_abs_err'], 8, 4)}")
    serving = [r for r in rows if r["kind"] == "serving"]
    if serving:
        print("\n== serving grid, bf16 Hq/Hkv 32/8 D 128, TFLOP/s of visible pairs; ratios are flashbuf / anchor "
              "(> 1: flashbuf faster) ==")
        print(f"{'case':>7} {'shape':<34} | {'flashbuf':>8} {'fa4':>8} {'cudnn':>8} | {'/fa4':>6} {'/cudnn':>6} |"
              f" {'err':>8} kernel")
        for r in serving:
            if r["case"] == "varlen":
                lens = r["lens"]
                shape = ",".join(map(str, lens)) if len(lens) <= 6 else \
                    " + ".join(f"{n} x {lens.count(n)}" if lens.count(n) > 1 else str(n) for n in dict.fromkeys(lens))
            elif r["case"] == "paged":
                shape = f"b {r['b']} ctx {r['sk'] - r['sq']} chunk {r['sq']} page {r['page']}"
            else:
                shape = f"b {r['b']} s {r['sq']} {'causal' if r['causal'] else 'no mask'}"
            print(f"{r['case']:>7} {shape[:34]:<34} | {fmt(r['flashbuf'])} {fmt(r['fa4'])} {fmt(r['cudnn'])} |"
                  f" {fmt(ratio(r['flashbuf'], r['fa4']), 6, 2)} {fmt(ratio(r['flashbuf'], r['cudnn']), 6, 2)} |"
                  f" {fmt(r['max_abs_err'], 8, 4)} {r['kernel'] or '-'}")
    ab = [r for r in rows if "flashbuf_sinks" in r]
    if ab:
        print("\n== sinks A/B: flashbuf with random sinks / without, timed in the same rounds "
              "(prefill TFLOP/s: > 1 faster with sinks; decode µs: < 1 faster with sinks) ==")
        for r in ab:
            print(f"{r['kind']:>7} d={r['d']:<3} b={r['b']:<4} h={r['hq']}/{r['hkv']:<3} sq={r['sq']:<6} sk={r['sk']:<7}"
                  f" causal={str(r['causal']):<5} page={r['page']:<3} | {fmt(r['flashbuf'], 8, 2)}"
                  f" {fmt(r['flashbuf_sinks'], 8, 2)} | {fmt(ratio(r['flashbuf_sinks'], r['flashbuf']), 6, 3)}")


# ---- main ------------------------------------------------------------------------------------------

def int_list(text: str) -> list[int]:
    return [int(x.strip().lower().replace("k", "")) * (1024 if x.strip().lower().endswith("k") else 1)
            for x in text.split(",") if x.strip()]


def heads_list(text: str) -> list[tuple[int, int]]:
    return [tuple(int(y) for y in x.split("/")) for x in text.split(",") if x.strip()]


def anchor_list(text: str) -> list[str]:
    names = [] if text == "none" else text.split(",")
    unknown = [n for n in names if n not in ANCHOR_NAMES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown anchor(s) {unknown}; choose from {list(ANCHOR_NAMES)} or none")
    return names


def tasks(args, run_prefill: bool, run_decode: bool, causals) -> list:
    """The run's points in order, each (label, a function that times it and returns its rows)."""
    out = []
    if run_prefill:
        for causal in causals:
            for d in args.d:
                for s in args.s:
                    out.append((f"prefill causal={causal} d={d} dv={args.dv or d} s={s}",
                                lambda d=d, s=s, causal=causal: [bench_prefill(d, s, causal, args)]))
    if run_decode:
        for hq, hkv in args.heads:
            for b in args.b:
                for skv in args.kv:
                    if b * skv * hkv <= DECODE_MAX_B_KV_HKV:
                        out.append((f"decode {hq}/{hkv} b={b} kv={skv}",
                                    lambda hq=hq, hkv=hkv, b=b, skv=skv: bench_decode_shape(hq, hkv, b, skv,
                                                                                           args.pages, args)))
    if args.serving:
        for label, bench in serving_cases(args.serving_cases):
            out.append((label, lambda bench=bench: [bench(args)]))
    return out


def run_meta() -> dict:
    meta = gpu_meta()
    meta.update({
        "commit": git_commit(),
        "command": "python3 " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__)] + sys.argv[1:]),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "date": datetime.date.today().isoformat(),
        "ceilings": {"gemm_bf16_tflops": GEMM_BF16_TFLOPS, "read_tbs": READ_TBS},
        "flashbuf_build": flashbuf.build_info() if flashbuf is not None else None,
        "fa4": fa4_version(),
        "l2_bytes": l2_bytes(),
        "warm_ms": WARM_S * 1e3,
        "failures": failures,
        "tuning": dict(TUNING_GIVEN),
    })
    return meta


def serve(run: list, channel) -> int:
    """--serve: the timing end of bench/ab_interleaved.py. Says {"points": n} on stdout, then
    for each request line "<point> <seed>" on stdin times that point with the inputs drawn
    after torch.manual_seed(seed) (two servers given the same seed time the same tensors) and
    answers {"point", "rows", "error"}; on "meta" it answers the run's meta. One JSON line per
    answer on `channel` (the process's stdout; main sends everything else to stderr)."""
    say = lambda obj: (channel.write(json.dumps(obj) + "\n"), channel.flush())
    say({"points": len(run)})
    for line in sys.stdin:
        words = line.split()
        if words == ["meta"]:
            say(run_meta())
            continue
        point, seed = int(words[0]), int(words[1])
        label, task = run[point]
        print(label, flush=True)
        torch.manual_seed(seed)
        rows, error = [], None
        try:
            rows = task()
        except Exception as e:
            note_failure(label, e)
            traceback.print_exc()
            error = repr(e)[:300]
        torch.cuda.empty_cache()
        say({"point": point, "rows": rows, "error": error})
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prefill", action="store_true", help="run the prefill grid (default: both grids)")
    p.add_argument("--decode", action="store_true", help="run the decode grid (default: both grids)")
    p.add_argument("--quick", action="store_true", help="a small subset of both grids, for smoke tests")
    p.add_argument("--serving", action="store_true",
                   help="run the serving grid (GQA batches, varlen batches, paged chunked prefill; BENCH.md); "
                        "alone it runs only that grid")
    p.add_argument("--serving-cases", type=lambda t: t.split(","), default=["gqa", "varlen", "paged"],
                   help="serving grid: which of its cases to run (gqa,varlen,paged)")
    p.add_argument("--d", type=int_list, default=list(PREFILL_D), help="prefill head dims (64,128,256)")
    p.add_argument("--s", type=int_list, default=list(PREFILL_S), help="prefill sequence lengths (512,...,16k)")
    p.add_argument("--dv", type=int, default=0,
                   help="prefill V head dim for every --d (0: the same as D; e.g. --d 192 --dv 128)")
    p.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    p.add_argument("--heads", type=heads_list, default=list(DECODE_HEADS), help="decode Hq/Hkv (32/8,64/8,32/32)")
    p.add_argument("--b", type=int_list, default=list(DECODE_B), help="decode batch sizes (1,8,32,128)")
    p.add_argument("--kv", type=int_list, default=list(DECODE_KV), help="decode KV lengths (512,...,128k)")
    p.add_argument("--pages", type=int_list, default=list(DECODE_PAGES), help="decode page sizes, 0 = contiguous")
    p.add_argument("--backend", choices=("auto", "sm80", "sm90"), default="auto",
                   help="flashbuf prefill kernel (auto: the one the library picks for the device and head dim)")
    p.add_argument("--prefill-page", type=int, default=0,
                   help="prefill: flashbuf reads K/V from pages of this size in shuffled order (0: contiguous)")
    p.add_argument("--prefill-varlen", action="store_true",
                   help="prefill: flashbuf reads the same tensors as one packed varlen batch (cu_seqlens)")
    p.add_argument("--prefill-cache", action="store_true",
                   help=f"prefill: flashbuf reads K/V from a batch-form cache of {CACHE_SLACK} more rows, each "
                        "sequence's length S given by seqlens_k (the rows past it noise; S is whole key tiles, "
                        "so no tail tile is gathered)")
    p.add_argument("--sinks", nargs="?", const="on", default="off", choices=("off", "on", "ab"),
                   help="attention sinks for flashbuf (random, per query head; the anchors have none): "
                        "--sinks gives the flashbuf column sinks, --sinks ab adds a flashbuf_sinks column "
                        "timed in the same rounds as the sink-free flashbuf column")
    p.add_argument("--anchors", type=anchor_list, default=list(ANCHORS) + (["fa4"] if fa4_func is not None else []),
                   help="anchors to run: fa2,cudnn,fa4 (default; fa4 when flash_attn.cute imports), some of them, "
                        "or none (A/B runs of flashbuf alone); the serving grid runs fa4 and cudnn")
    p.add_argument("--iters", type=int, default=9, help="graph replays per measurement (>= 7; median)")
    p.add_argument("--rounds", type=int, default=1,
                   help="time every implementation (decode: on every page size) this many times, each round "
                        "from a different one (median)")
    p.add_argument("--target-ms", type=float, default=20.0, help="length of one replayed graph")
    p.add_argument("--warm-ms", type=float, default=WARM_MS_DEFAULT,
                   help="untimed replays of the measured graph before the timed ones, so that each is timed "
                        "at its own sustained clocks, not in the wake of the implementation timed before it")
    p.add_argument("--out", help="results JSON (default: $OUT or bench/results, <gpu>-<what>-<date>.json)")
    p.add_argument("--serve", action="store_true",
                   help="time single points on request (stdin/stdout JSON lines): bench/ab_interleaved.py's server")
    p.add_argument("--plot", help="PNG plot (default: next to the JSON)")
    p.add_argument("--anchors-only", action="store_true",
                   help="time the anchors even where flashbuf cannot run (its cells null); without it such a "
                        "run stops before timing anything")
    args = p.parse_args(argv)
    channel = sys.stdout
    if args.serve:  # stdout carries the answers alone
        sys.stdout = sys.stderr
    apply_tuning_environment()
    if sum(map(bool, (args.prefill_page, args.prefill_varlen, args.prefill_cache))) > 1:
        p.error("--prefill-page, --prefill-varlen and --prefill-cache: one K/V form at a time")
    if args.prefill_page < 0 or any(s % args.prefill_page for s in args.s if args.prefill_page):
        p.error(f"--prefill-page {args.prefill_page}: must divide every prefill length {args.s}")
    if args.rounds < 1:
        p.error(f"--rounds {args.rounds}: must be >= 1")
    if args.warm_ms < 0:
        p.error(f"--warm-ms {args.warm_ms}: must be >= 0")
    global WARM_S
    WARM_S = args.warm_ms / 1000.0
    if set(args.serving_cases) - {"gqa", "varlen", "paged"}:
        p.error(f"--serving-cases {','.join(args.serving_cases)}: choose from gqa,varlen,paged")

    if not torch.cuda.is_available():
        print("bench.py needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    if args.quick:
        args.d, args.s, args.causal = [64, 128], [512, 2048], "both"
        args.heads, args.b, args.kv, args.pages = [(32, 8)], [1, 8], [512, 8192], [0, 16]
    serving_only = args.serving and not (args.prefill or args.decode or args.quick)
    run_prefill = (args.prefill or not args.decode or args.quick) and not serving_only
    run_decode = (args.decode or not args.prefill or args.quick) and not serving_only
    causals = {"both": [False, True], "yes": [True], "no": [False]}[args.causal]
    if flashbuf is None:
        note_failure("import flashbuf", FLASHBUF_IMPORT_ERROR)
    elif not flashbuf.cuda_available():
        note_failure("flashbuf", "this build has no CUDA kernels (or sees no GPU); its cells stay null")
    if "fa4" in args.anchors and fa4_func is None:
        note_failure("import flash_attn.cute", FA4_IMPORT_ERROR)

    # A run that cannot time flashbuf (an A/B build, a file of record) measures nothing it was
    # asked for: say so before any point, unless the anchors alone were asked for.
    if (flashbuf is None or not flashbuf.cuda_available()) and (args.serve or not args.anchors_only):
        print(f"bench.py: flashbuf cannot run here ({FLASHBUF_IMPORT_ERROR or 'no CUDA kernels'}); "
              "--anchors-only times the anchors alone", file=sys.stderr)
        return 2
    if args.serve:
        return serve(tasks(args, run_prefill, run_decode, causals), channel)
    rows = []
    for label, task in tasks(args, run_prefill, run_decode, causals):
        print(label, flush=True)
        try:
            new = task()
            rows.extend(new)
            for r in new:
                print("  " + json.dumps(r), flush=True)
        except Exception as e:
            note_failure(label, e)
            traceback.print_exc()
        torch.cuda.empty_cache()

    meta = run_meta()
    what = "quick" if args.quick else "-".join(
        k for k, on in (("prefill", run_prefill), ("decode", run_decode), ("serving", args.serving)) if on)
    name = f"{short_gpu_name(meta['gpu'])}-{what}-{datetime.date.today():%Y%m%d}"
    out = args.out or os.path.join(os.environ.get("OUT") or os.path.join(os.path.dirname(__file__), "results"),
                                   name + ".json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    plot = args.plot or os.path.splitext(out)[0] + ".png"
    try:
        draw_plot(rows, plot)
        print(f"\nwrote {out} and {plot}")
    except Exception as e:
        print(f"\nwrote {out}; plot failed: {e!r}")
    if failures:
        print(f"\n{len(failures)} failure(s):")
        for msg in failures:
            print("  " + msg)
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
