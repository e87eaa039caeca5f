"""One flashbuf prefill and one PyTorch SDPA call (FlashAttention-2 or cuDNN) on the same inputs,
for Nsight Compute to compare kernel by kernel (not a benchmark of record):

  ncu --clock-control none -k regex:"prefill|flash|sdpa" --section SpeedOfLight \
      --section WarpStateStats --section InstructionStats python3 bench/profile_prefill.py 128 4096

Arguments: head dim, sequence length, "causal" or "full", flashbuf backend (auto, sm80, sm90),
anchor ("fa2" or "cudnn").
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashbuf

d = int(sys.argv[1]) if len(sys.argv) > 1 else 128
s = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
causal = len(sys.argv) > 3 and sys.argv[3] == "causal"
backend = sys.argv[4] if len(sys.argv) > 4 else "auto"
anchor = {"fa2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[sys.argv[5] if len(sys.argv) > 5 else "fa2"]
b, h = 16384 // s, 2048 // d
q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
o = flashbuf.attention(q, k, v, causal=causal, backend=backend)
with sdpa_kernel(anchor):
    ref = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         is_causal=causal).transpose(1, 2)
torch.cuda.synchronize()
print(f"max abs diff flashbuf ({flashbuf.last_backend()}) vs {sys.argv[5] if len(sys.argv) > 5 else 'fa2'}:", (o.float() - ref.float()).abs().max().item())
