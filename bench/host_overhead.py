"""Host time per call of flashbuf's Python entry points on tiny CPU tensors (1 x 4 heads, D 64),
where the attention itself costs little and what is measured is the wrapper, the checks, the
operator call and DLPack: the best of `--rounds` rounds of `--calls` calls each, in µs.

    python bench/host_overhead.py [--calls 2000] [--rounds 5]

Compare two trees by running it with each on PYTHONPATH, alternating (bench/NOTES-prefill.md).
"""
from __future__ import annotations

import argparse
import time

import torch

import flashbuf
import flashbuf.flash_attn as fa


def cases():
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for name, call in cases().items():
        for _ in range(args.calls // 10):
            call()
        best = float("inf")
        for _ in range(args.rounds):
            start = time.perf_counter()
            for _ in range(args.calls):
                call()
            best = min(best, (time.perf_counter() - start) / args.calls)
        print(f"{name}: {best * 1e6:.1f} us")


if __name__ == "__main__":
    main()
