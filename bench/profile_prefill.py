"""One flashbuf prefill and one anchor call (PyTorch SDPA's FlashAttention-2 or cuDNN, or
FlashAttention-4's `flash_attn.cute`) on the same inputs, for Nsight Compute to compare kernel by
kernel (not a benchmark of record):

  ncu --clock-control none -k regex:"prefill|flash|sdpa" --section SpeedOfLight \
      --section WarpStateStats --section InstructionStats python3 bench/profile_prefill.py 128 4096

Arguments: head dim; sequence length, or `varlen:L1,L2,...` for one varlen batch of those
lengths (queries are the keys, as the serving grid's varlen rows); "causal" or "full"; flashbuf
backend (auto, sm80, sm90); anchor ("fa2", "cudnn", "fa4" or "none"; FA4 compiles its kernel at
its first call and runs twice here: read its second launch in ncu's report; fa2 and cudnn take
no varlen batch); heads `Hq/Hkv` (default 2048 / D of both: the BENCH.md grid's 16k tokens of
hidden 2048, batch 16384 / S). E.g. the serving grid's six mixed lengths against the batch form:

  ncu --metrics lts__t_sector_hit_rate.pct,dram__bytes_read.sum,gpu__time_duration.sum \
      -k regex:prefill python3 bench/profile_prefill.py 128 varlen:4096,512,2048,37,8000,1500 causal sm90 none 32/8
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashbuf

d = int(sys.argv[1]) if len(sys.argv) > 1 else 128
shape = sys.argv[2] if len(sys.argv) > 2 else "4096"
causal = len(sys.argv) > 3 and sys.argv[3] == "causal"
backend = sys.argv[4] if len(sys.argv) > 4 else "auto"
anchor_name = sys.argv[5] if len(sys.argv) > 5 else "fa2"
hq, hkv = map(int, sys.argv[6].split("/")) if len(sys.argv) > 6 else (2048 // d, 2048 // d)
if anchor_name not in ("fa2", "cudnn", "fa4", "none"):
    sys.exit(f"anchor {anchor_name!r}: one of fa2, cudnn, fa4, none")
varlen = shape.startswith("varlen:")
if varlen and anchor_name in ("fa2", "cudnn"):
    sys.exit("a varlen batch runs against fa4 or none")


def randn(*dims):
    return torch.randn(*dims, device="cuda", dtype=torch.bfloat16)


if varlen:
    lens = [int(x) for x in shape[len("varlen:"):].split(",")]
    total, longest = sum(lens), max(lens)
    cu = torch.tensor([0] + [sum(lens[:i + 1]) for i in range(len(lens))], device="cuda", dtype=torch.int32)
    q, k, v = randn(total, hq, d), randn(total, hkv, d), randn(total, hkv, d)
    o = flashbuf.attention(q, k, v, causal=causal, backend=backend, cu_seqlens_q=cu, cu_seqlens_k=cu,
                           max_seqlen_q=longest, max_seqlen_k=longest)
else:
    s = int(shape)
    b = 16384 // s
    q, k, v = randn(b, s, hq, d), randn(b, s, hkv, d), randn(b, s, hkv, d)
    o = flashbuf.attention(q, k, v, causal=causal, backend=backend)
if anchor_name == "none":
    torch.cuda.synchronize()
    print(f"flashbuf ({flashbuf.last_backend()}): {tuple(o.shape)}, finite: {bool(torch.isfinite(o).all())}")
    sys.exit(0)
if anchor_name == "fa4":
    from flash_attn.cute import flash_attn_func, flash_attn_varlen_func  # shared/anchors/fa4/ (scripts/gpu/fa4_site.sh)

    for _ in range(2):  # the first call compiles the kernel; the second is the one to profile
        if varlen:
            ref = flash_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=longest,
                                         max_seqlen_k=longest, causal=causal)
        else:
            ref = flash_attn_func(q, k, v, causal=causal)
    ref = ref[0] if isinstance(ref, (tuple, list)) else ref  # o, or (o, lse) by version
else:
    backend_of = {"fa2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    group = hq // hkv
    kk, vv = (t.repeat_interleave(group, dim=2) for t in (k, v))
    with sdpa_kernel(backend_of[anchor_name]):
        ref = F.scaled_dot_product_attention(q.transpose(1, 2), kk.transpose(1, 2), vv.transpose(1, 2),
                                             is_causal=causal).transpose(1, 2)
torch.cuda.synchronize()
diff = (o.float() - ref.float()).abs().max().item()
print(f"max abs diff flashbuf ({flashbuf.last_backend()}) vs {anchor_name}:", diff)
