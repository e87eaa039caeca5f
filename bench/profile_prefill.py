"""One flashbuf prefill and one anchor call (PyTorch SDPA's FlashAttention-2 or cuDNN, or
FlashAttention-4's `flash_attn.cute`) on the same inputs, for Nsight Compute to compare kernel by
kernel (not a benchmark of record):

  ncu --clock-control none -k regex:"prefill|flash|sdpa" --section SpeedOfLight \
      --section WarpStateStats --section InstructionStats python3 bench/profile_prefill.py 128 4096

Arguments: head dim, sequence length, "causal" or "full", flashbuf backend (auto, sm80, sm90),
anchor ("fa2", "cudnn" or "fa4"; FA4 compiles its kernel at its first call and runs twice here:
read its second launch in ncu's report).
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
anchor_name = sys.argv[5] if len(sys.argv) > 5 else "fa2"
if anchor_name not in ("fa2", "cudnn", "fa4"):
    sys.exit(f"anchor {anchor_name!r}: one of fa2, cudnn, fa4")
b, h = 16384 // s, 2048 // d
q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
o = flashbuf.attention(q, k, v, causal=causal, backend=backend)
if anchor_name == "fa4":
    from flash_attn.cute import flash_attn_func  # shared/anchors/fa4/ (scripts/gpu/fa4_site.sh)

    for _ in range(2):  # the first call compiles the kernel; the second is the one to profile
        ref = flash_attn_func(q, k, v, causal=causal)
    ref = ref[0] if isinstance(ref, (tuple, list)) else ref  # o, or (o, lse) by version
else:
    backend_of = {"fa2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    with sdpa_kernel(backend_of[anchor_name]):
        ref = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             is_causal=causal).transpose(1, 2)
torch.cuda.synchronize()
print(f"max abs diff flashbuf ({flashbuf.last_backend()}) vs {anchor_name}:", (o.float() - ref.float()).abs().max().item())
