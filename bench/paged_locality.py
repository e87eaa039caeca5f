"""Where paged decode loses to contiguous: the same cache read through a page table whose
pages lie (a) in order (the same addresses as the contiguous cache: only the indirection
differs), (b) shuffled inside windows of W pages, (c) shuffled over the whole pool. Times come
from CUDA-graph replay over rotated input sets, as in bench.py (not a benchmark of record):

  python3 bench/paged_locality.py [B] [KV] [PAGE]      (defaults 8 32768 16; Hq/Hkv 32/8, D 128)

If (a) matches contiguous and (c) does not, the cost is in the memory system (address
translation, DRAM locality), not in the kernel's page-table arithmetic.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (graph_time_us, rotation_sets)
import flashbuf  # noqa: E402

b, skv, page = (int(x) for x in (sys.argv[1:4] + ["8", "32768", "16"][len(sys.argv[1:4]):]))
hq, hkv, d = 32, 8, 128
dev = "cuda"
n_pages = b * skv // page
page_bytes = page * hkv * d * 2
sets = bench.rotation_sets(2 * b * skv * hkv * d * 2)
data = [(torch.randn(b, 1, hq, d, device=dev, dtype=torch.bfloat16),
         torch.randn(b, skv, hkv, d, device=dev, dtype=torch.bfloat16),
         torch.randn(b, skv, hkv, d, device=dev, dtype=torch.bfloat16)) for _ in range(sets)]
seqlens = torch.full((b,), skv, dtype=torch.int32, device=dev)


def order(window):
    """Pool slot of each logical page: shuffled inside consecutive windows of `window` pages."""
    if window <= 1:
        return torch.arange(n_pages, device=dev)
    perm = torch.empty(n_pages, dtype=torch.long, device=dev)
    for w0 in range(0, n_pages, window):
        w = min(window, n_pages - w0)
        perm[w0:w0 + w] = w0 + torch.randperm(w, device=dev)
    return perm


def time_paged(window):
    plan = flashbuf.DecodePlan(b, 1, hq, hkv, d, d, skv, page, dtype=torch.bfloat16, device=dev)
    calls, outs = [], []
    for q, k, v in data:
        perm = order(window)
        kp = torch.empty(n_pages, page, hkv, d, device=dev, dtype=k.dtype)
        vp = torch.empty_like(kp)
        kp[perm] = k.reshape(n_pages, page, hkv, d)
        vp[perm] = v.reshape(n_pages, page, hkv, d)
        table = perm.view(b, -1).to(torch.int32)
        calls.append(lambda q=q, kp=kp, vp=vp, t=table: plan.run(q, kp, vp, seqlens, t))
    ref = flashbuf.DecodePlan(b, 1, hq, hkv, d, d, skv, 0, dtype=torch.bfloat16, device=dev).run(
        *data[0], seqlens, None)
    err = (calls[0]() - ref).abs().max().item()
    assert err < 1e-2, f"paged differs from contiguous by {err}"
    return bench.graph_time_us(calls, 20, 10.0)


plan0 = flashbuf.DecodePlan(b, 1, hq, hkv, d, d, skv, 0, dtype=torch.bfloat16, device=dev)
contiguous = bench.graph_time_us([lambda q=q, k=k, v=v: plan0.run(q, k, v, seqlens, None) for q, k, v in data], 20, 10.0)
print(f"decode b={b} kv={skv} page={page} ({page_bytes // 1024} KB per pool page, {sets} input sets)")
print(f"  contiguous                         {contiguous:8.1f} us")
for window in (1, 8, 64, 512, n_pages):
    label = "in order" if window == 1 else ("shuffled over the pool" if window == n_pages else
                                             f"shuffled in {window}-page windows ({window * page_bytes >> 20} MB)"
                                             if window * page_bytes >= 1 << 20 else
                                             f"shuffled in {window}-page windows ({window * page_bytes >> 10} KB)")
    t = time_paged(window)
    print(f"  {label:34s} {t:8.1f} us  {contiguous / t:5.2f}x contiguous")
