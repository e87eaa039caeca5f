"""One flashbuf prefill and one PyTorch SDPA FlashAttention-2 call on the same inputs, for
Nsight Compute to compare kernel by kernel (not a benchmark of record):

  ncu --clock-control none -k regex:"prefill|flash" --section SpeedOfLight \
      --section WarpStateStats --section InstructionStats python3 bench/profile_prefill.py 128 4096
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashbuf

d = int(sys.argv[1]) if len(sys.argv) > 1 else 128
s = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
causal = len(sys.argv) > 3 and sys.argv[3] == "causal"
b, h = 16384 // s, 2048 // d
q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
o = flashbuf.attention(q, k, v, causal=causal)
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    ref = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         is_causal=causal).transpose(1, 2)
torch.cuda.synchronize()
print("max abs diff flashbuf vs fa2:", (o.float() - ref.float()).abs().max().item())
