"""Time per call of flashbuf's Python entry points where the attention itself costs little, so
that what is measured is the wrapper, the checks, the operator call and DLPack (and, for
flash_attn_with_kvcache, the append's own small operations): the best of `--rounds` rounds of
`--calls` calls each, in µs.

    python bench/host_overhead.py [--calls 2000] [--rounds 5]       # CPU tensors, 1 x 4 heads, D 64
    python bench/host_overhead.py --device cuda                       # + CUDA-graph replays of a step

On CUDA the cases are decode steps of 32/8 heads, D 128, over a 2k cache (contiguous, and
paged in pages of 16): "eager" is the host's time per call (synchronised once a round),
"graph" a CUDA graph of `--graph-steps` calls replayed, per call: the device's time, which
every small operation the append launches adds to. Compare two trees by running it with each
on PYTHONPATH, alternating (bench/NOTES-prefill.md).
"""
from __future__ import annotations

import argparse
import time

import torch

import flashbuf
import flashbuf.flash_attn as fa


def cpu_cases():
    torch.manual_seed(0)
    q1, k_new, v_new = torch.randn(1, 1, 4, 64), torch.randn(1, 1, 4, 64), torch.randn(1, 1, 4, 64)
    k_cache, v_cache = torch.randn(1, 64, 4, 64), torch.randn(1, 64, 4, 64)
    lens = torch.tensor([10], dtype=torch.int32)
    q8, k8 = torch.randn(1, 8, 4, 64), torch.randn(1, 8, 4, 64)

    def append():
        lens.fill_(10)  # the same position every call
        return fa.flash_attn_with_kvcache(q1, k_cache, v_cache, k_new, v_new, cache_seqlens=lens, causal=True)

    return {
        "attention, 8 tokens": lambda: flashbuf.attention(q8, k8, k8, causal=True),
        "flash_attn_func, 8 tokens": lambda: fa.flash_attn_func(q8, k8, k8, causal=True),
        "flash_attn_with_kvcache, decode over 10 keys": lambda: fa.flash_attn_with_kvcache(
            q1, k_cache, v_cache, cache_seqlens=lens, causal=True),
        "flash_attn_with_kvcache, append 1 and decode": append,
    }


def cuda_cases():
    torch.manual_seed(0)
    cases = {}
    for batch in (1, 8):
        for page in (0, 16):
            smax, hq, hkv, d = 2048, 32, 8, 128
            q = torch.randn(batch, 1, hq, d, device="cuda", dtype=torch.bfloat16)
            k_new, v_new = (torch.randn(batch, 1, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            lens = torch.full((batch,), smax - 64, dtype=torch.int32, device="cuda")
            if page:
                pages = smax // page
                table = torch.randperm(batch * pages, device="cuda").view(batch, pages).to(torch.int32)
                k_cache, v_cache = (torch.randn(batch * pages, page, hkv, d, device="cuda", dtype=torch.bfloat16)
                                    for _ in range(2))
            else:
                table = None
                k_cache, v_cache = (torch.randn(batch, smax, hkv, d, device="cuda", dtype=torch.bfloat16)
                                    for _ in range(2))

            def step(q=q, k_cache=k_cache, v_cache=v_cache, k_new=k_new, v_new=v_new, lens=lens, table=table):
                return fa.flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new, cache_seqlens=lens,
                                                  page_table=table, causal=True)

            name = f"with_kvcache append 1 + decode, B {batch}, {'page ' + str(page) if page else 'contiguous'}"
            cases[name] = step
    return cases


def best_of(call, calls, rounds, sync=None):
    for _ in range(max(calls // 10, 1)):
        call()
    if sync:
        sync()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        if sync:
            sync()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--graph-steps", type=int, default=100)
    args = parser.parse_args()
    if args.device == "cpu":
        for name, call in cpu_cases().items():
            print(f"{name}: {best_of(call, args.calls, args.rounds):.1f} us")
        return
    for name, step in cuda_cases().items():
        eager = best_of(step, args.calls, args.rounds, torch.cuda.synchronize)
        graph = torch.cuda.CUDAGraph()
        step()
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            for _ in range(args.graph_steps):
                step()
        replay = best_of(graph.replay, max(args.calls // args.graph_steps, 5), args.rounds, torch.cuda.synchronize)
        print(f"{name}: eager {eager:.1f} us, graph {replay / args.graph_steps:.2f} us a step")


if __name__ == "__main__":
    main()
