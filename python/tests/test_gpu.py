"""flashbuf on a CUDA GPU through PyTorch: against the float64 reference and PyTorch's SDPA,
under torch.compile, and inside captured CUDA graphs (decode replayed with new seqlens_k).
Skipped unless PyTorch sees a GPU and this flashbuf build has CUDA kernels.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import attention_reference as ref  # noqa: E402
import flashbuf  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and flashbuf.cuda_available()),
                                reason="needs a CUDA GPU and a flashbuf build with CUDA")

DEV = "cuda"


def randn(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device=DEV, dtype=dtype)


def max_err(actual, expected):
    return float(np.max(np.abs(ref.as_f64(actual) - expected)))


def sdpa(q, k, v, causal):
    """PyTorch SDPA in flashbuf's (B, S, H, D) layout, same precision, bottom-right causal."""
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    sq, sk = q.shape[1], k.shape[1]
    mask = None
    if causal:
        mask = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(diagonal=sk - sq)
    o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask,
                                                         enable_gqa=q.shape[2] != k.shape[2])
    return o.transpose(1, 2)


def require_head_dim(dtype, d, dv):
    info = flashbuf.build_info()
    name = {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    if f"{name}_{d}_{dv}" not in info:
        pytest.skip(f"{name}_{d}_{dv} not instantiated in this build")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 128, 128, 8, 8), (3, 77, 301, 8, 2), (1, 513, 513, 4, 1)],
                         ids=["square", "odd-gqa", "mqa"])
@pytest.mark.parametrize("backend", ["auto", "sm80", "sm90"])
def test_prefill_vs_reference_and_sdpa(dtype, d, causal, shape, backend):
    require_head_dim(dtype, d, d)
    if backend == "sm90" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the sm90 kernel needs a compute capability 9.0 device")
    b, sq, sk, hq, hkv = shape
    q, k, v = randn(b, sq, hq, d, dtype=dtype), randn(b, sk, hkv, d, dtype=dtype), randn(b, sk, hkv, d, dtype=dtype)
    o, lse = flashbuf.attention(q, k, v, causal=causal, return_lse=True, backend=backend)
    torch.cuda.synchronize()
    o_ref, lse_ref = ref.attention(q, k, v, causal=causal)
    # FlashAttention-3's criterion: at most twice PyTorch's own same-precision error, plus slack.
    ours, theirs = max_err(o, o_ref), max_err(sdpa(q, k, v, causal), o_ref)
    assert ours <= 2 * theirs + 1e-3, f"flashbuf {ours:.3g} vs SDPA {theirs:.3g}"
    finite = np.isfinite(lse_ref)
    assert np.max(np.abs(lse.cpu().numpy()[finite] - lse_ref[finite])) <= 1e-2
    assert flashbuf.last_backend() == backend if backend != "auto" else flashbuf.last_backend() in ("sm80", "sm90")


def test_varlen_paged_window_softcap_vs_reference():
    require_head_dim(torch.bfloat16, 128, 128)
    lens_q, lens_k = [5, 0, 130, 64], [300, 17, 130, 0]
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(lens_q)]), dtype=torch.int32, device=DEV)
    cu_k = torch.tensor(np.concatenate([[0], np.cumsum(lens_k)]), dtype=torch.int32, device=DEV)
    q, k, v = randn(sum(lens_q), 8, 128), randn(sum(lens_k), 2, 128), randn(sum(lens_k), 2, 128)
    kw = dict(causal=True, window=(64, -1), softcap=20.0)
    o = flashbuf.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q),
                           max_seqlen_k=max(lens_k), **kw)
    o_ref, _ = ref.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, **kw)
    assert max_err(o, o_ref) <= ref.tolerance("bf16")

    # the same keys in a shuffled page pool (page 16), batch-form queries
    b, s, page = 3, 200, 16
    lens = torch.tensor([200, 33, 1], dtype=torch.int32, device=DEV)
    qb, kc, vc = randn(b, 7, 8, 128), randn(b, s, 2, 128), randn(b, s, 2, 128)
    pages = -(-s // page)
    perm = torch.randperm(b * pages, device=DEV)
    table = perm.view(b, pages).to(torch.int32)
    kp = torch.empty(b * pages, page, 2, 128, device=DEV, dtype=torch.bfloat16)
    vp = torch.empty_like(kp)
    pad = pages * page - s
    kp[perm] = torch.nn.functional.pad(kc, (0, 0, 0, 0, 0, pad)).view(b * pages, page, 2, 128)
    vp[perm] = torch.nn.functional.pad(vc, (0, 0, 0, 0, 0, pad)).view(b * pages, page, 2, 128)
    o_paged = flashbuf.attention(qb, kp, vp, seqlens_k=lens, page_table=table, **kw)
    o_contig = flashbuf.attention(qb, kc, vc, seqlens_k=lens, **kw)
    o_ref, _ = ref.attention(qb, kc, vc, seqlens_k=lens, **kw)
    assert max_err(o_paged, o_ref) <= ref.tolerance("bf16")
    assert max_err(o_contig, o_ref) <= ref.tolerance("bf16")


def test_torch_compile():
    require_head_dim(torch.bfloat16, 128, 128)
    torch._dynamo.reset()
    q, k, v = randn(2, 256, 8, 128), randn(2, 256, 8, 128), randn(2, 256, 8, 128)

    def layer(q, k, v):
        return flashbuf.attention(q * 0.5, k, v, causal=True).float().square().mean(dim=-1)

    compiled = torch.compile(layer, fullgraph=True)
    assert torch.allclose(compiled(q, k, v), layer(q, k, v), atol=1e-3)


def test_cuda_graph_prefill_replay():
    require_head_dim(torch.bfloat16, 128, 128)
    q, k, v = randn(2, 300, 8, 128), randn(2, 300, 4, 128), randn(2, 300, 4, 128)
    flashbuf.attention(q, k, v, causal=True)  # warm up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = flashbuf.attention(q, k, v, causal=True)
    for _ in range(2):  # new inputs in the same buffers
        q.copy_(torch.randn_like(q))
        k.copy_(torch.randn_like(k))
        graph.replay()
        torch.cuda.synchronize()
        o_ref, _ = ref.attention(q, k, v, causal=True)
        assert max_err(o, o_ref) <= ref.tolerance("bf16")


@pytest.mark.parametrize("page_size", [0, 16, 64])
@pytest.mark.parametrize("q_per_seq", [1, 4])
def test_decode_graph_replay_with_new_seqlens(page_size, q_per_seq):
    b, hq, hkv, d, smax = 5, 32, 8, 128, 4096
    plan = flashbuf.DecodePlan(b, q_per_seq, hq, hkv, d, d, smax, page_size, dtype=torch.bfloat16, device=DEV)
    q = randn(b, q_per_seq, hq, d)
    kc, vc = randn(b, smax, hkv, d), randn(b, smax, hkv, d)
    if page_size:
        pages = smax // page_size
        perm = torch.randperm(b * pages, device=DEV)
        table = perm.view(b, pages).to(torch.int32)
        k = torch.empty(b * pages, page_size, hkv, d, device=DEV, dtype=torch.bfloat16)
        v = torch.empty_like(k)
        k[perm] = kc.reshape(b * pages, page_size, hkv, d)
        v[perm] = vc.reshape(b * pages, page_size, hkv, d)
    else:
        table, k, v = None, kc, vc
    seqlens = torch.tensor([4096, 1, 700, 2049, 0], dtype=torch.int32, device=DEV)
    plan.run(q, k, v, seqlens, table, causal=True)  # warm up
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o, lse = plan.run(q, k, v, seqlens, table, causal=True, return_lse=True)
    for lens in ([4096, 1, 700, 2049, 0], [3, 4000, 64, 0, 1500], [17, 17, 4096, 129, 2]):
        seqlens.copy_(torch.tensor(lens, dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        o_ref, lse_ref = ref.attention(q, kc, vc, seqlens_k=seqlens, causal=True)
        assert max_err(o, o_ref) <= ref.tolerance("bf16"), f"seqlens {lens}"
        finite = np.isfinite(lse_ref)
        assert np.array_equal(np.isneginf(lse.cpu().numpy()), np.isneginf(lse_ref))
        assert np.max(np.abs(lse.cpu().numpy()[finite] - lse_ref[finite])) <= 1e-2


def test_decode_plan_on_callers_workspaces_in_graphs():
    """A plan without a workspace of its own runs on the caller's, one per run: two graphs
    captured on two such workspaces replay independently, each right after the plan and its
    workspaces' Python references are gone (the graphs keep the allocator's blocks), as
    flash_attn_with_kvcache's cached plans, which it may forget, run."""
    b, hq, hkv, d, smax = 2, 32, 8, 128, 2048
    plan = flashbuf.DecodePlan(b, 1, hq, hkv, d, d, smax, 0, dtype=torch.bfloat16, device=DEV,
                               allocate_workspace=False)
    assert plan.workspace is None
    q, k, v = randn(b, 1, hq, d), randn(b, smax, hkv, d), randn(b, smax, hkv, d)
    lens = [torch.tensor([2048, 700], dtype=torch.int32, device=DEV), torch.tensor([5, 1999], dtype=torch.int32,
                                                                                 device=DEV)]
    plan.run(q, k, v, lens[0], workspace=plan.new_workspace())  # warm up
    torch.cuda.synchronize()
    graphs, outs = [], []
    for n in lens:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs.append(plan.run(q, k, v, n, workspace=plan.new_workspace()))
        graphs.append(graph)
    del plan
    for _ in range(2):
        for graph in graphs:
            graph.replay()
    torch.cuda.synchronize()
    for n, o in zip(lens, outs):
        o_ref, _ = ref.attention(q, k, v, seqlens_k=n)
        assert max_err(o, o_ref) <= ref.tolerance("bf16"), f"seqlens {n.tolist()}"


def test_decode_under_torch_compile():
    torch._dynamo.reset()
    b, hq, hkv, d, smax = 4, 32, 8, 128, 1024
    plan = flashbuf.DecodePlan(b, 1, hq, hkv, d, d, smax, 0, dtype=torch.bfloat16, device=DEV)
    q, k, v = randn(b, 1, hq, d), randn(b, smax, hkv, d), randn(b, smax, hkv, d)
    seqlens = torch.tensor([1024, 5, 300, 77], dtype=torch.int32, device=DEV)

    def step(q, k, v, seqlens):
        return plan.run(q, k, v, seqlens) * 2.0

    compiled = torch.compile(step, fullgraph=True)
    assert torch.allclose(compiled(q, k, v, seqlens), step(q, k, v, seqlens), atol=1e-2)


def test_merge_states_cuda():
    sq, sk, h, d = 33, 1000, 8, 128
    require_head_dim(torch.bfloat16, d, d)
    q, k, v = randn(1, sq, h, d), randn(1, sk, h, d), randn(1, sk, h, d)
    bounds = [0, 300, 301, 1000]
    parts = [flashbuf.attention(q, k[:, lo:hi], v[:, lo:hi], return_lse=True) for lo, hi in zip(bounds, bounds[1:])]
    o_parts = torch.stack([o[0].float() for o, _ in parts])
    lse_parts = torch.stack([lse[0] for _, lse in parts])  # (N, H, T), as attention returned it
    o, lse = flashbuf.merge_states(o_parts, lse_parts, return_lse=True)
    o_ref, lse_ref = ref.attention(q, k, v)
    assert max_err(o, o_ref[0]) <= ref.tolerance("bf16")
    assert np.max(np.abs(lse.cpu().numpy() - lse_ref[0])) <= 1e-2
    # The batch form, (N, B, S, H, Dv) with (N, B, H, S), merged without a transpose.
    o_b, lse_b = flashbuf.merge_states(torch.stack([o for o, _ in parts]), torch.stack([l for _, l in parts]),
                                       return_lse=True)
    assert max_err(o_b, o_ref) <= ref.tolerance("bf16")
    assert np.max(np.abs(lse_b.cpu().numpy() - lse_ref)) <= 1e-2


def test_errors_on_cuda():
    q, k = randn(1, 4, 3, 128), randn(1, 4, 2, 128)
    with pytest.raises(ValueError, match=r"^q: heads_q = 3"):
        flashbuf.attention(q, k, k)
    with pytest.raises(ValueError, match=r"is on"):
        flashbuf.attention(randn(1, 4, 2, 128), k.cpu(), k.cpu())
    # index tensors on the other device: refused, never read through the wrong pointer kind
    qv, kv = randn(5, 2, 128), randn(5, 2, 128)
    cu = torch.tensor([0, 5], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"^cu_seqlens_q: is on cpu"):
        flashbuf.attention(qv, kv, kv, cu_seqlens_q=cu, cu_seqlens_k=cu.to(DEV), max_seqlen_q=5, max_seqlen_k=5)
    with pytest.raises(ValueError, match=r"^cu_seqlens_q: is on cuda"):
        flashbuf.attention(qv.cpu(), kv.cpu(), kv.cpu(), cu_seqlens_q=cu.to(DEV), cu_seqlens_k=cu, max_seqlen_q=5,
                           max_seqlen_k=5)
    # a CUDA plan's decode with a host workspace (the operator called directly)
    plan = flashbuf.DecodePlan(2, 1, 4, 4, 128, 128, 64, 0, dtype=torch.bfloat16, device=DEV)
    qd, kd = randn(2, 1, 4, 128), randn(2, 64, 4, 128)
    lens = torch.tensor([64, 3], dtype=torch.int32, device=DEV)
    host_ws = torch.empty(max(plan.workspace_bytes, 256), dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"^workspace: is on cpu"):
        torch.ops.flashbuf.decode(qd, kd, kd, lens, None, host_ws, list(plan.plan), 0.0, False, -1, -1, 0.0, False)
    with pytest.raises(ValueError, match=r"^seqlens_k: is on cpu"):
        plan.run(qd, kd, kd, lens.cpu())


def test_strided_cuda_page_table_checked_as_its_view():
    """check_inputs=True on a CUDA page table that is a slice of a wider one: its rows are read
    in one pitched copy, entries past the view are never read, a bad entry inside is named by
    its row and column; a broadcast table (row stride 0) reads the one row every sequence uses."""
    require_head_dim(torch.bfloat16, 128, 128)
    b, page, lens_k = 3, 16, [70, 33, 48]
    pages = -(-max(lens_k) // page)
    lens = torch.tensor(lens_k, dtype=torch.int32, device=DEV)
    q = randn(b, 5, 4, 128)
    kp, vp = randn(b * pages + 2, page, 2, 128), randn(b * pages + 2, page, 2, 128)
    wide = torch.full((b, 3 * pages), 1 << 30, dtype=torch.int32, device=DEV)  # poison past the view
    wide[:, :pages] = torch.randperm(b * pages, device=DEV).view(b, pages).to(torch.int32)
    table = wide[:, :pages]
    assert not table.is_contiguous()
    kw = dict(seqlens_k=lens, causal=True)
    o = flashbuf.attention(q, kp, vp, page_table=table, check_inputs=True, **kw)
    o_want = flashbuf.attention(q, kp, vp, page_table=table.contiguous(), **kw)
    torch.cuda.synchronize()
    assert torch.equal(o, o_want)
    kc = kp[table.long()].flatten(1, 2)  # (b, pages * page, 2, 128): each sequence's keys in order
    vc = vp[table.long()].flatten(1, 2)
    o_ref, _ = ref.attention(q, kc, vc, **kw)
    assert max_err(o, o_ref) <= ref.tolerance("bf16")
    wide[2, 2] = b * pages + 2  # one past the pool, in a page sequence 2's 48 keys use
    with pytest.raises(ValueError, match=r"^page_table\[2\]\[2\]: .*outside the pool"):
        flashbuf.attention(q, kp, vp, page_table=table, check_inputs=True, **kw)
    wide[2, 2] = 0
    # Broadcast: every sequence reads row 0 (70 keys: all its pages are real).
    shared = table[:1].expand(b, pages)
    assert shared.stride(0) == 0
    o_shared = flashbuf.attention(q, kp, vp, page_table=shared, check_inputs=True, **kw)
    o_want = flashbuf.attention(q, kp, vp, page_table=shared.contiguous(), **kw)
    torch.cuda.synchronize()
    assert torch.equal(o_shared, o_want)


def test_varlen_capture_skips_index_reads_and_replays():
    """Varlen prefill captured in a CUDA graph: validation cannot read cu_seqlens then (it skips
    the device-to-host copy), max_seqlen_* must be given, and replays follow new contents."""
    require_head_dim(torch.bfloat16, 128, 128)
    lens_q, lens_k = [7, 0, 40], [50, 9, 40]
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(lens_q)]), dtype=torch.int32, device=DEV)
    cu_k = torch.tensor(np.concatenate([[0], np.cumsum(lens_k)]), dtype=torch.int32, device=DEV)
    q, k, v = randn(sum(lens_q), 4, 128), randn(sum(lens_k), 2, 128), randn(sum(lens_k), 2, 128)
    kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=64, max_seqlen_k=64, causal=True)
    flashbuf.attention(q, k, v, **kw)  # warm up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = flashbuf.attention(q, k, v, **kw)
    for _ in range(2):
        q.copy_(torch.randn_like(q))
        graph.replay()
        torch.cuda.synchronize()
        o_ref, _ = ref.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=True)
        assert max_err(o, o_ref) <= ref.tolerance("bf16")


def test_varlen_longest_first_order_follows_new_lengths_in_replays():
    """A skewed varlen batch (launched longest first on Hopper: the order is computed on the
    device each call) captured once and replayed over new sequence lengths of the same total:
    each replay's output is the reference of its own lengths."""
    require_head_dim(torch.bfloat16, 128, 128)
    batches = [[100] * 12 + [1300], [1300] + [100] * 12, [2500] + [0] * 11 + [0], [208] * 12 + [4]]
    total = sum(batches[0])
    assert all(sum(lens) == total for lens in batches)

    def offsets(lens):
        return torch.tensor(np.concatenate([[0], np.cumsum(lens)]), dtype=torch.int32, device=DEV)
    cu = offsets(batches[0])
    q, k, v = randn(total, 8, 128), randn(total, 2, 128), randn(total, 2, 128)
    kw = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=2500, max_seqlen_k=2500, causal=True)
    flashbuf.attention(q, k, v, **kw)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = flashbuf.attention(q, k, v, **kw)
    for lens in batches:
        cu.copy_(offsets(lens))
        graph.replay()
        torch.cuda.synchronize()
        o_ref, _ = ref.attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, causal=True)
        assert max_err(o, o_ref) <= ref.tolerance("bf16"), lens


def test_flashbuf_imported_before_torch_in_a_fresh_process(tmp_path):
    """Importing flashbuf before torch (as test_cpu.py does at collection) must leave CUDA as
    usable as the torch-first order of the benchmark: prefill, decode and a graph replay in a
    subprocess, so a crash fails this test instead of killing the session."""
    code = "\n".join([
        "import sys, flashbuf",
        "assert 'torch' in sys.modules, 'flashbuf did not import torch before its extension'",
        "import torch",
        "q = torch.randn(2, 64, 4, 128, device='cuda', dtype=torch.bfloat16)",
        "o = flashbuf.attention(q, q, q, causal=True)",
        "plan = flashbuf.DecodePlan(2, 1, 4, 4, 128, 128, 64, 0, dtype=torch.bfloat16, device='cuda')",
        "lens = torch.tensor([64, 5], dtype=torch.int32, device='cuda')",
        "plan.run(q[:, :1], q, q, lens)",
        "g = torch.cuda.CUDAGraph()",
        "with torch.cuda.graph(g):",
        "    o2 = plan.run(q[:, :1], q, q, lens)",
        "g.replay(); torch.cuda.synchronize(); print('ok')",
    ])
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
