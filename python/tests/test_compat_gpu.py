"""flashbuf's drop-ins on a CUDA GPU: flashbuf.flash_attn against the float64 reference and,
where FlashAttention 4 (flash_attn.cute) is importable, against its functions on the same
inputs; flash_attn_with_kvcache's in-place append, its decode path and CUDA-graph capture; and
transformers models in bf16 with attn_implementation="flashbuf" against "sdpa".

Skipped unless PyTorch sees a GPU and this flashbuf build has CUDA kernels; a test whose head
dim this build did not instantiate skips with the reason.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import attention_reference as ref  # noqa: E402
import flashbuf  # noqa: E402
import flashbuf.flash_attn as flash_attn  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and flashbuf.cuda_available()),
                                reason="needs a CUDA GPU and a flashbuf build with CUDA")

DEV = "cuda"

try:
    import flash_attn.cute as fa4  # FlashAttention 4 (CuTe DSL), from ../shared/anchors/fa4/
except Exception:  # noqa: BLE001 - any failure to import means: no FA4 to compare with
    fa4 = None


def randn(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device=DEV, dtype=dtype)


def max_err(actual, expected):
    return float(np.max(np.abs(ref.as_f64(actual) - expected), initial=0.0))


def lse_err(actual, expected):
    actual = ref.as_f64(actual)
    assert np.array_equal(np.isneginf(actual), np.isneginf(expected)), "-inf rows differ"
    finite = np.isfinite(expected)
    return float(np.max(np.abs(actual[finite] - expected[finite]), initial=0.0))


def require_prefill(d, dv=None):
    if f"bf16_{d}_{dv or d}" not in flashbuf.build_info():
        pytest.skip(f"bf16_{d}_{dv or d} not instantiated in this build")


def fa4_call(name, *args, **kwargs):
    """FA4's function name on the arguments: (out, lse), or a skip where FA4 is absent or
    refuses the configuration."""
    if fa4 is None:
        pytest.skip("flash_attn.cute (FlashAttention 4) is not importable")
    fn = getattr(fa4, name)
    if "return_lse" in inspect.signature(fn).parameters:
        kwargs["return_lse"] = True
    try:
        result = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - FA4 refuses by assertion, DSL compile error or ValueError alike
        pytest.skip(f"FlashAttention 4 does not run this configuration: {type(e).__name__}: {e}")
    torch.cuda.synchronize()
    return (result[0], result[1]) if isinstance(result, tuple) else (result, None)


MASKS = {"none": dict(), "causal": dict(causal=True), "window": dict(window_size=(64, 32)),
         "causal_window": dict(causal=True, window_size=(100, 0))}


def ref_kwargs(fa_kw):
    kw = {"causal": fa_kw.get("causal", False)}
    if "window_size" in fa_kw:
        kw["window"] = fa_kw["window_size"]
    return kw


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("mask", list(MASKS))
def test_flash_attn_func_vs_reference_and_fa4(d, mask):
    require_prefill(d)
    b, sq, sk, hq, hkv = 2, 200, 333, 8, 2
    q, k, v = randn(b, sq, hq, d), randn(b, sk, hkv, d), randn(b, sk, hkv, d)
    out, lse, probs = flash_attn.flash_attn_func(q, k, v, return_attn_probs=True, **MASKS[mask])
    torch.cuda.synchronize()
    o_ref, lse_ref = ref.attention(q, k, v, **ref_kwargs(MASKS[mask]))
    assert out.shape == (b, sq, hq, d) and lse.shape == (b, hq, sq) and probs.numel() == 0
    assert max_err(out, o_ref) <= ref.tolerance("bf16")
    assert lse_err(lse, lse_ref) <= 1e-2
    o4, lse4 = fa4_call("flash_attn_func", q, k, v, **MASKS[mask])
    assert max_err(out, o_ref) <= 2 * max_err(o4, o_ref) + 1e-3  # FA3's criterion against FA4
    if lse4 is not None:
        assert float((lse - lse4).abs().max()) <= 1e-2


def test_flash_attn_varlen_func_vs_reference_and_fa4():
    require_prefill(128)
    lens_q, lens_k = [5, 0, 130, 64], [300, 17, 130, 64]
    cu_q = torch.tensor(np.cumsum([0] + lens_q), dtype=torch.int32, device=DEV)
    cu_k = torch.tensor(np.cumsum([0] + lens_k), dtype=torch.int32, device=DEV)
    q, k, v = randn(sum(lens_q), 8, 128), randn(sum(lens_k), 2, 128), randn(sum(lens_k), 2, 128)
    out, lse, _ = flash_attn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=True,
                                                    return_attn_probs=True)
    torch.cuda.synchronize()
    o_ref, lse_ref = ref.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=True)
    assert lse.shape == (8, sum(lens_q))
    assert max_err(out, o_ref) <= ref.tolerance("bf16")
    assert lse_err(lse, lse_ref) <= 1e-2
    o4, _ = fa4_call("flash_attn_varlen_func", q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                     max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k), causal=True)
    assert max_err(out, o_ref) <= 2 * max_err(o4, o_ref) + 1e-3


def test_flash_attn_varlen_func_paged_block_table():
    require_prefill(128)
    lens_q, lens_k, page = [3, 40, 1], [100, 40, 257], 16
    max_pages = -(-max(lens_k) // page)
    table = torch.randperm(3 * max_pages, device=DEV).view(3, max_pages).to(torch.int32)
    cu_q = torch.tensor(np.cumsum([0] + lens_q), dtype=torch.int32, device=DEV)
    cu_k = torch.tensor(np.cumsum([0] + lens_k), dtype=torch.int32, device=DEV)
    q, kp, vp = randn(sum(lens_q), 8, 128), randn(3 * max_pages, page, 2, 128), randn(3 * max_pages, page, 2, 128)
    out = flash_attn.flash_attn_varlen_func(q, kp, vp, cu_q, cu_k, max(lens_q), max(lens_k), causal=True,
                                            block_table=table)
    torch.cuda.synchronize()
    o_ref, _ = ref.attention(q, kp, vp, cu_seqlens_q=cu_q, seqlens_k=cu_k[1:] - cu_k[:-1], page_table=table,
                             causal=True)
    assert max_err(out, o_ref) <= ref.tolerance("bf16")


def test_learnable_sink_vs_fa4():
    if not flash_attn._HAS_SINKS:
        pytest.skip("flashbuf.attention takes no sinks in this build")
    require_prefill(128)
    q, k, v = randn(2, 96, 8, 128), randn(2, 150, 2, 128), randn(2, 150, 2, 128)
    sink = torch.randn(8, device=DEV).to(torch.bfloat16)
    out, lse, _ = flash_attn.flash_attn_func(q, k, v, causal=True, learnable_sink=sink, return_attn_probs=True)
    torch.cuda.synchronize()
    o_ref, lse_ref = ref.attention(q, k, v, causal=True)
    s = ref.as_f64(sink)[None, :, None]
    lse_sink = np.logaddexp(lse_ref, s)  # the sink joins each row's denominator
    o_sink = o_ref * np.exp(lse_ref - lse_sink).transpose(0, 2, 1)[..., None]
    assert max_err(out, o_sink) <= ref.tolerance("bf16")
    assert lse_err(lse, lse_sink) <= 1e-2
    o4, _ = fa4_call("flash_attn_func", q, k, v, causal=True, learnable_sink=sink)
    assert max_err(out, o_sink) <= 2 * max_err(o4, o_sink) + 1e-3


@pytest.mark.parametrize("page_size", [0, 16])
@pytest.mark.parametrize("seqlen_q", [1, 4, 40], ids=["decode", "speculative", "prefill"])
def test_with_kvcache_appends_and_attends(page_size, seqlen_q):
    require_prefill(128)
    b, hq, hkv, d, smax = 4, 32, 8, 128, 1024
    cache_seqlens = torch.tensor([0, 5, 700, smax - seqlen_q], dtype=torch.int32, device=DEV)
    k_dense, v_dense = randn(b, smax, hkv, d), randn(b, smax, hkv, d)
    q, k, v = randn(b, seqlen_q, hq, d), randn(b, seqlen_q, hkv, d), randn(b, seqlen_q, hkv, d)
    if page_size:
        pages = smax // page_size
        perm = torch.randperm(b * pages, device=DEV)
        table = perm.view(b, pages).to(torch.int32)
        k_cache = torch.empty(b * pages, page_size, hkv, d, device=DEV, dtype=torch.bfloat16)
        v_cache = torch.empty_like(k_cache)
        k_cache[perm] = k_dense.reshape(b * pages, page_size, hkv, d)
        v_cache[perm] = v_dense.reshape(b * pages, page_size, hkv, d)
    else:
        table, k_cache, v_cache = None, k_dense.clone(), v_dense.clone()
    out, lse = flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=cache_seqlens,
                                                  block_table=table, causal=True, return_softmax_lse=True)
    torch.cuda.synchronize()
    for i, n in enumerate(cache_seqlens.tolist()):  # the expected cache after the append
        k_dense[i, n:n + seqlen_q] = k[i]
        v_dense[i, n:n + seqlen_q] = v[i]
    if page_size:
        assert torch.equal(k_cache[perm].reshape(b, smax, hkv, d), k_dense)
        assert torch.equal(v_cache[perm].reshape(b, smax, hkv, d), v_dense)
    else:
        assert torch.equal(k_cache, k_dense) and torch.equal(v_cache, v_dense)
    o_ref, lse_ref = ref.attention(q, k_dense, v_dense, seqlens_k=cache_seqlens + seqlen_q, causal=True)
    assert max_err(out, o_ref) <= ref.tolerance("bf16")
    assert lse_err(lse, lse_ref) <= 1e-2
    if seqlen_q <= 16:
        assert flashbuf.last_backend() == "decode"


def test_with_kvcache_int64_lengths_beyond_int32_are_not_wrapped():
    """Device int64 cache_seqlens are not read by the host: 2^32 + 5 must not become 5 on the
    way to int32. Pinned to int32's end, it is past the cache, which the kernel clamps to the
    whole cache (docs/errors.md: unchecked device indices give wrong rows, never wrapped ones)."""
    b, hq, hkv, d, smax = 2, 8, 2, 128, 256
    k_cache, v_cache, q = randn(b, smax, hkv, d), randn(b, smax, hkv, d), randn(b, 1, hq, d)
    lens = torch.tensor([2**32 + 5, 40], dtype=torch.int64, device=DEV)
    out = flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens)
    o_ref, _ = ref.attention(q, k_cache, v_cache, seqlens_k=torch.tensor([smax, 40], device=DEV))
    assert max_err(out, o_ref) <= ref.tolerance("bf16")


@pytest.mark.parametrize("layout", ["contiguous", "indexed", "indexed_copy", "paged"])
def test_with_kvcache_device_entries_outside_the_cache_drop_their_writes(layout):
    """On CUDA the append reads cache_seqlens, cache_batch_idx and page_table without a host
    synchronisation. Entries that would write outside the cache (past its end, negative, a row
    or page outside the pool) drop those tokens instead of tripping a device-side assertion that
    would end the process's CUDA context: every other token lands, the rest of the cache is
    unchanged, the attention after reads lengths and pages clamped to the cache (finite output),
    and the device keeps working."""
    b, hq, hkv, d, page = 3, 8, 2, 128, 16
    q, k, v = randn(b, 2, hq, d), randn(b, 2, hkv, d), randn(b, 2, hkv, d)
    idx = table = None
    if layout == "paged":  # two pages a sequence: capacity 32
        k_cache, v_cache = randn(6, page, hkv, d), randn(6, page, hkv, d)
        table = torch.tensor([[0, 1], [2, 9], [-3, 4]], dtype=torch.int32, device=DEV)
        lens = torch.tensor([15, 15, 31], dtype=torch.int32, device=DEV)
    else:
        k_cache, v_cache = randn(3, 64, hkv, d), randn(3, 64, hkv, d)
        lens = torch.tensor([63, -1, 3], dtype=torch.int32, device=DEV)
        if layout.startswith("indexed"):
            idx = torch.tensor([2, 5, 0], dtype=torch.int32, device=DEV)
        if layout == "indexed_copy":  # rows that cannot be viewed as pages: a gathered copy
            k_cache, v_cache = randn(3, 70, hkv, d)[:, :63], randn(3, 70, hkv, d)[:, :63]
    want_k = ref.appended_cache(k_cache, k, lens, cache_batch_idx=idx, page_table=table)
    want_v = ref.appended_cache(v_cache, v, lens, cache_batch_idx=idx, page_table=table)
    out = flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=lens, cache_batch_idx=idx,
                                             page_table=table, causal=True)
    torch.cuda.synchronize()  # raises where a device-side assertion fired
    assert np.array_equal(ref.as_f64(k_cache), want_k) and np.array_equal(ref.as_f64(v_cache), want_v)
    assert bool(torch.isfinite(out).all())


@pytest.mark.parametrize("lengths", ["int", "cpu tensor"])
def test_with_kvcache_host_lengths_are_checked_before_they_move_to_the_device(lengths):
    """cache_seqlens the host holds (an int, a CPU tensor) are checked on the host even though
    they travel on to the device: an append past the cache's end is refused by name, with
    nothing written, not dropped on the device."""
    k_cache, v_cache = randn(2, 64, 2, 128), randn(2, 64, 2, 128)
    q, k, v = randn(2, 1, 8, 128), randn(2, 8, 2, 128), randn(2, 8, 2, 128)
    seqlens = 60 if lengths == "int" else torch.tensor([3, 60], dtype=torch.int32)
    before = (k_cache.clone(), v_cache.clone())
    with pytest.raises(ValueError, match=r"^cache_seqlens: appending 8 tokens"):
        flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=seqlens)
    assert torch.equal(k_cache, before[0]) and torch.equal(v_cache, before[1])


def test_with_kvcache_appends_into_k_and_v_taking_turns_in_one_buffer():
    """A (pages, 2, page, heads, D) pool split into K and V at dimension 1 (the caches' byte
    ranges interleave, their elements do not) appends and attends as two separate caches."""
    pool = randn(6, 2, 16, 2, 128)
    separate = pool.clone()
    table = torch.tensor([[4, 1], [0, 5]], dtype=torch.int32, device=DEV)
    lens = torch.tensor([14, 3], dtype=torch.int32, device=DEV)
    q, k, v = randn(2, 3, 8, 128), randn(2, 3, 2, 128), randn(2, 3, 2, 128)
    k_sep, v_sep = separate[:, 0].contiguous(), separate[:, 1].contiguous()
    want = flash_attn.flash_attn_with_kvcache(q, k_sep, v_sep, k, v, cache_seqlens=lens, page_table=table, causal=True)
    got = flash_attn.flash_attn_with_kvcache(q, pool[:, 0], pool[:, 1], k, v, cache_seqlens=lens, page_table=table,
                                             causal=True)
    assert torch.equal(pool[:, 0], k_sep) and torch.equal(pool[:, 1], v_sep)
    assert torch.equal(got, want)


def test_with_kvcache_decode_step_captured_in_a_cuda_graph():
    b, hq, hkv, d, smax, page = 3, 16, 4, 128, 512, 16
    pages = smax // page
    table = torch.randperm(b * pages, device=DEV).view(b, pages).to(torch.int32)
    k_cache = randn(b * pages, page, hkv, d)
    v_cache = randn(b * pages, page, hkv, d)
    q, k, v = randn(b, 1, hq, d), randn(b, 1, hkv, d), randn(b, 1, hkv, d)
    seqlens = torch.tensor([3, 100, 400], dtype=torch.int32, device=DEV)

    def step():
        return flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=seqlens,
                                                  page_table=table, causal=True)

    step()  # plans the decode outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    for lens in ([7, 0, 511], [200, 33, 64]):
        seqlens.copy_(torch.tensor(lens, dtype=torch.int32))
        q.copy_(torch.randn_like(q))
        k.copy_(torch.randn_like(k))
        v.copy_(torch.randn_like(v))
        graph.replay()
        torch.cuda.synchronize()
        o_ref, _ = ref.attention(q, k_cache, v_cache, seqlens_k=seqlens + 1, page_table=table, causal=True)
        assert max_err(out, o_ref) <= ref.tolerance("bf16"), f"cache_seqlens {lens}"
        for i, n in enumerate(lens):  # the replay appended this step's k at position n
            assert torch.equal(k_cache[table[i, n // page], n % page], k[i, 0])


def test_merge_states_of_attention_outputs_on_cuda():
    require_prefill(128)
    q, k, v = randn(3, 5, 8, 128), randn(3, 700, 8, 128), randn(3, 700, 8, 128)
    parts = [flashbuf.attention(q, k[:, a:b], v[:, a:b], return_lse=True) for a, b in ((0, 250), (250, 700))]
    o, lse = flashbuf.merge_states(torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts]),
                                   return_lse=True)
    torch.cuda.synchronize()
    o_ref, lse_ref = ref.attention(q, k, v)
    assert max_err(o, o_ref) <= 2 * ref.tolerance("bf16")  # the parts were rounded to bf16 once
    assert lse_err(lse, lse_ref) <= 1e-2


# ---- transformers in bf16 ----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["llama", "qwen2", "qwen3"])
def test_transformers_bf16_prefill_and_generate_match_sdpa(name):
    pytest.importorskip("transformers")
    import transformers_models as tm

    require_prefill(tm.HEAD_DIM)
    ours, theirs = tm.model_pair(name, DEV, torch.bfloat16)
    ids, mask = tm.padded_batch(DEV)
    err, scale = tm.logits_error(ours, theirs, ids, mask)
    assert err <= 3e-2 * max(scale, 1.0), f"{name}: bf16 logits differ by {err:.3g} (max logit {scale:.3g})"
    got, want = tm.greedy(ours, ids, mask), tm.greedy(theirs, ids, mask)
    if not torch.equal(got, want):
        # Only a near-tie in sdpa's own logits may flip a greedy choice in bf16.
        margin = tm.first_divergence_margin(theirs, ids, mask, got, want)
        assert margin <= 2 * 3e-2 * max(scale, 1.0), f"{name}: tokens differ where sdpa's top-2 margin is {margin:.3g}"
