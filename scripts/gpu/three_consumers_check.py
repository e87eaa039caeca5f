"""D 64 problems that take the Hopper kernel's three-consumer blocks (192-row items, a block
each: three_consumers_pay in core/work_items.hpp), through the torch operator on CUDA: odd
lengths, a partial last item, GQA, causal. Each output is checked against SDPA's math in
float32; with --no-check the problems only run, for compute-sanitizer:

  PYTHONPATH=<package> python3 scripts/gpu/three_consumers_check.py
  PYTHONPATH=<package> compute-sanitizer --tool memcheck --error-exitcode 9 \\
      --kernel-name kns=prefill_sm90 python3 scripts/gpu/three_consumers_check.py --no-check
"""
import sys

import torch
import torch.nn.functional as F

import flashbuf

# (batch, seqlen, query heads, key/value heads, causal): >= 4 waves of 192-row items on 132 SMs,
# >= 16 key tiles an item unmasked and >= 32 causal (the rule's thresholds).
PROBLEMS = [(2, 2111, 24, 8, False), (1, 8300, 12, 4, True), (4, 2000, 32, 8, False)]


def main() -> int:
    check = "--no-check" not in sys.argv
    failed = 0
    for b, s, hq, hkv, causal in PROBLEMS:
        g = torch.Generator(device="cuda").manual_seed(s)
        q = torch.randn(b, s, hq, 64, device="cuda", dtype=torch.bfloat16, generator=g)
        k = torch.randn(b, s, hkv, 64, device="cuda", dtype=torch.bfloat16, generator=g)
        v = torch.randn(b, s, hkv, 64, device="cuda", dtype=torch.bfloat16, generator=g)
        o = flashbuf.attention(q, k, v, causal=causal, backend="sm90")
        torch.cuda.synchronize()
        name = f"b {b} s {s} heads {hq}/{hkv} causal {causal}"
        if not check:
            print(f"{name}: ran")
            continue
        kk, vv = (t.repeat_interleave(hq // hkv, dim=2).transpose(1, 2).float() for t in (k, v))
        ref = F.scaled_dot_product_attention(q.transpose(1, 2).float(), kk, vv, is_causal=causal).transpose(1, 2)
        err = (o.float() - ref).abs().max().item()
        ok = err < 2e-2  # bf16 output of unit-variance values: a few ulp
        failed += not ok
        print(f"{name}: max |error| {err:.4g} {'ok' if ok else 'FAILED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
