"""One flashbuf decode step and one PyTorch SDPA step (cuDNN or FlashAttention-2) on the same
contiguous cache, a few times each, for Nsight Compute to compare the kernels of a latency-bound
step (not a benchmark of record):

  ncu --clock-control none -k regex:"decode|combine|merge|sdpa|flash" --section SpeedOfLight \\
      --section LaunchStats --section Occupancy --section WarpStateStats \\
      python3 bench/profile_decode.py 1 32 8 512 0 cudnn

Arguments: batch, query heads, KV heads, KV length, page size (0 = contiguous; pages shuffled),
anchor ("cudnn" or "fa2"). Prints the plan (splits, merge, workspace) so the kernels can be
matched to it. With nsys instead of ncu, the gaps between launches show the fixed cost per step.
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashbuf

b, hq, hkv, skv = (int(x) for x in sys.argv[1:5]) if len(sys.argv) > 4 else (1, 32, 8, 512)
page = int(sys.argv[5]) if len(sys.argv) > 5 else 0
anchor = {"fa2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[
    sys.argv[6] if len(sys.argv) > 6 else "cudnn"]
d = 128
q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.bfloat16)
k = torch.randn(b, skv, hkv, d, device="cuda", dtype=torch.bfloat16)
v = torch.randn(b, skv, hkv, d, device="cuda", dtype=torch.bfloat16)
seqlens = torch.full((b,), skv, dtype=torch.int32, device="cuda")
table = None
if page:  # the same rows in shuffled pages of a pool
    pages_per_seq = (skv + page - 1) // page
    perm = torch.randperm(b * pages_per_seq, device="cuda", dtype=torch.int32)
    table = perm.view(b, pages_per_seq)
    k_pool = torch.zeros(b * pages_per_seq, page, hkv, d, device="cuda", dtype=torch.bfloat16)
    v_pool = torch.zeros_like(k_pool)
    pad = pages_per_seq * page - skv
    k_pool[perm.long()] = torch.nn.functional.pad(k, (0, 0, 0, 0, 0, pad)).view(-1, page, hkv, d)
    v_pool[perm.long()] = torch.nn.functional.pad(v, (0, 0, 0, 0, 0, pad)).view(-1, page, hkv, d)
    k_run, v_run = k_pool, v_pool
else:
    k_run, v_run = k, v

plan = flashbuf.DecodePlan(b, 1, hq, hkv, d, d, skv, page, dtype=torch.bfloat16, device="cuda")
print(plan)
for _ in range(3):
    o = plan.run(q, k_run, v_run, seqlens, table)
with sdpa_kernel(anchor):
    for _ in range(3):
        ref = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             enable_gqa=hq != hkv).transpose(1, 2)
torch.cuda.synchronize()
print(f"max abs diff flashbuf vs {sys.argv[6] if len(sys.argv) > 6 else 'cudnn'}:",
      (o.float() - ref.float()).abs().max().item())
