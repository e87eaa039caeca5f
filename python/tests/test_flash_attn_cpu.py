"""flashbuf.flash_attn, FlashAttention's entry points, on the CPU backend against the float64
reference and FlashAttention's documented semantics: argument names and order, the LSE layout,
bottom-right masks, the paged cache with block_table as page_table's alias, and
flash_attn_with_kvcache's in-place append into contiguous, indexed and paged caches.

Every test runs on NumPy arrays (CI has no PyTorch) and, where PyTorch is installed, on torch CPU
tensors.
"""
from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import attention_reference as ref
import flashbuf
import flashbuf.flash_attn as flash_attn
from flashbuf._common import NUMPY_BF16

try:
    import torch
except ImportError:
    torch = None

KINDS = ["numpy"] + (["torch"] if torch is not None else [])


class Arrays:
    """Makes inputs of one kind (NumPy or torch CPU) in one dtype, and reads them back."""

    def __init__(self, kind, dtype_name, seed=0):
        self.kind, self.dtype_name = kind, dtype_name
        self.rng = np.random.default_rng(seed)

    def randn(self, *shape):
        a = self.rng.standard_normal(shape).astype(np.float32)
        if self.kind == "torch":
            return torch.from_numpy(a).to({"fp32": torch.float32, "bf16": torch.bfloat16}[self.dtype_name])
        return a.astype({"fp32": np.float32, "bf16": NUMPY_BF16}[self.dtype_name])

    def int32(self, values):
        a = np.asarray(values, dtype=np.int32)
        return torch.from_numpy(a) if self.kind == "torch" else a

    def copy(self, x):
        return x.clone() if self.kind == "torch" else x.copy()


def arrays(kind, dtype_name="fp32", seed=0):
    if dtype_name == "bf16" and kind == "numpy" and NUMPY_BF16 is None:
        pytest.skip("ml_dtypes is not installed")
    return Arrays(kind, dtype_name, seed)


def f64(x):
    return ref.as_f64(x)


def assert_close(actual, expected, dtype_name="fp32", scale=1.0):
    err = np.max(np.abs(f64(actual) - expected), initial=0.0)
    tol = ref.tolerance(dtype_name) * scale
    assert err <= tol, f"max abs error {err:.3g} > {tol:.3g}"


def assert_lse_close(actual, expected):
    actual = f64(actual)
    assert actual.shape == expected.shape
    assert np.array_equal(np.isneginf(actual), np.isneginf(expected)), "-inf rows differ"
    finite = np.isfinite(expected)
    assert np.max(np.abs(actual[finite] - expected[finite]), initial=0.0) <= 1e-3


# ---- the signatures are FlashAttention's -------------------------------------------------------

FA2_SIGNATURES = {
    # flash-attn 2.x flash_attn_interface.py, positional order and defaults.
    "flash_attn_func": ["q", "k", "v", "dropout_p", "softmax_scale", "causal", "window_size", "softcap",
                        "alibi_slopes", "deterministic", "return_attn_probs"],
    "flash_attn_varlen_func": ["q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k",
                               "dropout_p", "softmax_scale", "causal", "window_size", "softcap", "alibi_slopes",
                               "deterministic", "return_attn_probs", "block_table"],
    "flash_attn_with_kvcache": ["q", "k_cache", "v_cache", "k", "v", "rotary_cos", "rotary_sin", "cache_seqlens",
                                "cache_batch_idx", "cache_leftpad", "page_table", "softmax_scale", "causal",
                                "window_size", "softcap", "rotary_interleaved", "alibi_slopes", "num_splits",
                                "return_softmax_lse"],
}
FA2_DEFAULTS = {"dropout_p": 0.0, "softmax_scale": None, "causal": False, "window_size": (-1, -1), "softcap": 0.0,
                "alibi_slopes": None, "deterministic": False, "return_attn_probs": False, "num_splits": 0,
                "return_softmax_lse": False, "rotary_interleaved": True, "block_table": None, "cache_seqlens": None}


@pytest.mark.parametrize("name", list(FA2_SIGNATURES))
def test_signatures_follow_flash_attn_2(name):
    params = inspect.signature(getattr(flash_attn, name)).parameters
    positional = [p.name for p in params.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
    assert positional == FA2_SIGNATURES[name]  # block_table's slot is page_table in with_kvcache
    for arg, default in FA2_DEFAULTS.items():
        if arg in params:
            assert params[arg].default == default, arg
    assert getattr(flashbuf, name) is getattr(flash_attn, name)


# ---- flash_attn_func ----------------------------------------------------------------------------

FA_MASKS = {
    "none": (dict(), dict()),
    "causal": (dict(causal=True), dict(causal=True)),
    "window": (dict(window_size=(3, 2)), dict(window=(3, 2))),
    "window_fa4_none": (dict(window_size=(4, None)), dict(window=(4, -1))),
    "causal_window": (dict(causal=True, window_size=(5, 5)), dict(causal=True, window=(5, -1))),
    "softcap_scale": (dict(softcap=5.0, softmax_scale=0.3, causal=True), dict(softcap=5.0, scale=0.3, causal=True)),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype_name", ["fp32", "bf16"])
@pytest.mark.parametrize("mask", list(FA_MASKS))
def test_flash_attn_func_matches_reference(kind, dtype_name, mask):
    x = arrays(kind, dtype_name)
    fa_kw, ref_kw = FA_MASKS[mask]
    b, sq, sk, hq, hkv, d = 2, 7, 19, 6, 2, 32  # GQA, sq < sk: the masks sit at the bottom right
    q, k, v = x.randn(b, sq, hq, d), x.randn(b, sk, hkv, d), x.randn(b, sk, hkv, d)
    out = flash_attn.flash_attn_func(q, k, v, **fa_kw)
    o_ref, lse_ref = ref.attention(q, k, v, **ref_kw)
    assert tuple(out.shape) == (b, sq, hq, d) and out.dtype == q.dtype
    assert_close(out, o_ref, dtype_name)

    out, lse, probs = flash_attn.flash_attn_func(q, k, v, return_attn_probs=True, **fa_kw)
    assert tuple(lse.shape) == (b, hq, sq)  # FlashAttention's (batch, nheads, seqlen)
    assert tuple(probs.shape) == (0,)       # as flash-attn 2.x returns it without dropout
    assert_close(out, o_ref, dtype_name)
    assert_lse_close(lse, lse_ref)


def test_flash_attn_func_positional_arguments_mean_what_flash_attn_2_says():
    x = arrays("numpy")
    q, k, v = x.randn(1, 5, 2, 16), x.randn(1, 9, 2, 16), x.randn(1, 9, 2, 16)
    # (q, k, v, dropout_p, softmax_scale, causal, window_size, softcap)
    out = flash_attn.flash_attn_func(q, k, v, 0.0, 0.5, True, (3, -1), 2.0)
    o_ref, _ = ref.attention(q, k, v, scale=0.5, causal=True, window=(3, -1), softcap=2.0)
    assert_close(out, o_ref)


@pytest.mark.parametrize("kind", KINDS)
def test_inputs_without_a_contiguous_last_dimension_are_taken(kind):
    """As FlashAttention's maybe_contiguous: q, k, v strided in their last dimension work."""
    x = arrays(kind)
    q, k, v = x.randn(1, 4, 2, 16, 2)[..., 0], x.randn(1, 6, 2, 16, 2)[..., 1], x.randn(1, 6, 2, 16)
    out = flash_attn.flash_attn_func(q, k, v)
    assert_close(out, ref.attention(q, k, v)[0])


@pytest.mark.parametrize("kind", KINDS)
def test_packed_forms_are_views_of_the_stack(kind):
    x = arrays(kind)
    b, s, h, d = 2, 6, 3, 16
    qkv = x.randn(b, s, 3, h, d)
    out = flash_attn.flash_attn_qkvpacked_func(qkv, causal=True)
    o_ref, _ = ref.attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], causal=True)
    assert_close(out, o_ref)
    q, kv = x.randn(b, 4, 4, d), x.randn(b, s, 2, 2, d)
    out = flash_attn.flash_attn_kvpacked_func(q, kv)
    assert_close(out, ref.attention(q, kv[:, :, 0], kv[:, :, 1])[0])

    cu = x.int32([0, 5, 5, 11])
    qkv = x.randn(11, 3, h, d)
    out = flash_attn.flash_attn_varlen_qkvpacked_func(qkv, cu, 6, causal=True)
    o_ref, _ = ref.attention(qkv[:, 0], qkv[:, 1], qkv[:, 2], cu_seqlens_q=cu, cu_seqlens_k=cu, causal=True)
    assert_close(out, o_ref)
    q, kv = x.randn(11, 4, d), x.randn(11, 2, 2, d)
    out = flash_attn.flash_attn_varlen_kvpacked_func(q, kv, cu, cu, 6, 6)
    assert_close(out, ref.attention(q, kv[:, 0], kv[:, 1], cu_seqlens_q=cu, cu_seqlens_k=cu)[0])


# ---- flash_attn_varlen_func ---------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mask", ["none", "causal", "window", "softcap_scale"])
def test_flash_attn_varlen_func_matches_reference(kind, mask):
    x = arrays(kind)
    fa_kw, ref_kw = FA_MASKS[mask]
    lens_q, lens_k = [3, 0, 8, 1], [5, 4, 8, 13]  # an empty query sequence, sq <= sk
    cu_q, cu_k = x.int32(np.cumsum([0] + lens_q)), x.int32(np.cumsum([0] + lens_k))
    hq, hkv, d = 4, 2, 24
    q, k, v = x.randn(sum(lens_q), hq, d), x.randn(sum(lens_k), hkv, d), x.randn(sum(lens_k), hkv, d)
    out, lse, _ = flash_attn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k),
                                                    return_attn_probs=True, **fa_kw)
    o_ref, lse_ref = ref.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, **ref_kw)
    assert tuple(lse.shape) == (hq, sum(lens_q))  # FlashAttention's (nheads, total_q)
    assert_close(out, o_ref)
    assert_lse_close(lse, lse_ref)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("alias", ["block_table", "page_table", "positional"])
def test_flash_attn_varlen_func_paged(kind, alias):
    x = arrays(kind, seed=3)
    lens_q, lens_k, page = [2, 5, 1], [9, 5, 14], 4
    pages = 12
    table = x.int32(np.random.default_rng(1).permutation(pages)[:12].reshape(3, 4))
    cu_q, cu_k = x.int32(np.cumsum([0] + lens_q)), x.int32(np.cumsum([0] + lens_k))
    q, kp, vp = x.randn(sum(lens_q), 4, 16), x.randn(pages, page, 2, 16), x.randn(pages, page, 2, 16)
    args = (q, kp, vp, cu_q, cu_k, max(lens_q), max(lens_k))
    if alias == "positional":  # block_table is flash-attn 2.x's 16th positional argument
        out = flash_attn.flash_attn_varlen_func(*args, 0.0, None, True, (-1, -1), 0.0, None, False, False, table)
    else:
        out = flash_attn.flash_attn_varlen_func(*args, causal=True, **{alias: table})
    o_ref, _ = ref.attention(q, kp, vp, cu_seqlens_q=cu_q, seqlens_k=x.int32(lens_k), page_table=table, causal=True)
    assert_close(out, o_ref)
    # cu_seqlens_k becomes per-sequence key counts here; its offsets are checked as attention()
    # checks them, not differenced whatever they hold.
    floats = torch.tensor([0.0, 9.0, 14.0, 28.0]) if kind == "torch" else np.array([0.0, 9.0, 14.0, 28.0])
    bad = ((ValueError, r"^cu_seqlens_k\[0\]: must be 0", x.int32([100, 109, 114, 128])),
           (ValueError, r"^cu_seqlens_k\[2\]: offsets must be non-decreasing", x.int32([0, 9, 5, 19])),
           (TypeError, r"^cu_seqlens_k: expected an integer dtype", floats))
    for error, message, cu in bad:
        with pytest.raises(error, match=message):
            flash_attn.flash_attn_varlen_func(q, kp, vp, cu_q, cu, max(lens_q), max(lens_k), **{alias: table}
                                              if alias != "positional" else {"block_table": table})


# ---- flash_attn_with_kvcache --------------------------------------------------------------------

def expected_contiguous_cache(cache, new, seqlens, rows):
    """The cache after FlashAttention's append, as float64: new[b, i] at cache[rows[b], seqlens[b] + i]."""
    out = f64(cache).copy()
    for b, row in enumerate(rows):
        out[row, seqlens[b]:seqlens[b] + new.shape[1]] = f64(new)[b]
    return out


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype_name", ["fp32", "bf16"])
@pytest.mark.parametrize("seqlen_q", [1, 3, 21], ids=["decode", "speculative", "prefill"])
def test_with_kvcache_appends_in_place_then_attends(kind, dtype_name, seqlen_q):
    x = arrays(kind, dtype_name, seed=seqlen_q)
    b, s_cache, hq, hkv, d = 3, 40, 8, 2, 32
    k_cache, v_cache = x.randn(b, s_cache, hkv, d), x.randn(b, s_cache, hkv, d)
    k_before, v_before = f64(k_cache), f64(v_cache)
    cache_seqlens = [0, 7, 40 - seqlen_q]  # an empty cache, and one filled to the last row
    q, k, v = x.randn(b, seqlen_q, hq, d), x.randn(b, seqlen_q, hkv, d), x.randn(b, seqlen_q, hkv, d)
    out, lse = flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=x.int32(cache_seqlens),
                                                  causal=True, return_softmax_lse=True)
    want_k = expected_contiguous_cache(k_before, k, cache_seqlens, range(b))
    want_v = expected_contiguous_cache(v_before, v, cache_seqlens, range(b))
    assert np.array_equal(f64(k_cache), want_k) and np.array_equal(f64(v_cache), want_v)
    lens = [n + seqlen_q for n in cache_seqlens]
    o_ref, lse_ref = ref.attention(q, want_k, want_v, seqlens_k=np.array(lens), causal=True)
    assert tuple(out.shape) == (b, seqlen_q, hq, d) and tuple(lse.shape) == (b, hq, seqlen_q)
    assert_close(out, o_ref, dtype_name)
    assert_lse_close(lse, lse_ref)


@pytest.mark.parametrize("kind", KINDS)
def test_with_kvcache_int_seqlens_window_softcap_and_no_append(kind):
    x = arrays(kind, seed=7)
    b, s_cache, h, d = 2, 33, 4, 16
    k_cache, v_cache = x.randn(b, s_cache, h, d), x.randn(b, s_cache, h, d)
    q, k, v = x.randn(b, 2, h, d), x.randn(b, 2, h, d), x.randn(b, 2, h, d)
    kw = dict(causal=True, window_size=(6, 0), softcap=3.0, softmax_scale=0.2)
    out = flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=11, **kw)
    o_ref, _ = ref.attention(q, k_cache, v_cache, seqlens_k=np.array([13, 13]), causal=True, window=(6, 0),
                             softcap=3.0, scale=0.2)
    assert_close(out, o_ref)
    # No k/v: nothing is written; cache_seqlens None reads the whole cache.
    before = f64(k_cache)
    out = flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache)
    assert np.array_equal(f64(k_cache), before)
    assert_close(out, ref.attention(q, k_cache, v_cache)[0])
    out = flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=x.int32([5, 30]))
    assert_close(out, ref.attention(q, k_cache, v_cache, seqlens_k=np.array([5, 30]))[0])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seqlen_q", [1, 18], ids=["decode", "prefill"])
@pytest.mark.parametrize("layout", ["viewable", "strided"])
def test_with_kvcache_cache_batch_idx(kind, seqlen_q, layout):
    x = arrays(kind, seed=11)
    b, b_cache, s_cache, hq, hkv, d = 3, 5, 24, 4, 1, 16
    if layout == "strided":  # rows of a wider buffer: no page view, so the rows are gathered
        k_cache, v_cache = x.randn(b_cache, s_cache + 8, hkv, d)[:, :s_cache], x.randn(b_cache, s_cache + 8, hkv, d)[:, :s_cache]
    else:
        k_cache, v_cache = x.randn(b_cache, s_cache, hkv, d), x.randn(b_cache, s_cache, hkv, d)
    k_before, v_before = f64(k_cache), f64(v_cache)
    rows, seqlens = [4, 0, 2], [3, 0, 24 - seqlen_q]
    q, k, v = x.randn(b, seqlen_q, hq, d), x.randn(b, seqlen_q, hkv, d), x.randn(b, seqlen_q, hkv, d)
    out = flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=x.int32(seqlens),
                                             cache_batch_idx=x.int32(rows), causal=True)
    want_k = expected_contiguous_cache(k_before, k, seqlens, rows)
    want_v = expected_contiguous_cache(v_before, v, seqlens, rows)
    assert np.array_equal(f64(k_cache), want_k) and np.array_equal(f64(v_cache), want_v)
    o_ref, _ = ref.attention(q, want_k[rows], want_v[rows], seqlens_k=np.array(seqlens) + seqlen_q, causal=True)
    assert_close(out, o_ref)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seqlen_q", [1, 5, 19], ids=["decode", "speculative", "prefill"])
@pytest.mark.parametrize("alias", ["page_table", "block_table"])
def test_with_kvcache_paged_append_crosses_pages(kind, seqlen_q, alias):
    x = arrays(kind, seed=13)
    b, page, pages, max_pages, hq, hkv, d, dv = 2, 4, 16, 7, 6, 3, 16, 8
    table_np = np.random.default_rng(2).permutation(pages)[:b * max_pages].reshape(b, max_pages).astype(np.int32)
    table = x.int32(table_np)
    k_cache, v_cache = x.randn(pages, page, hkv, d), x.randn(pages, page, hkv, dv)
    k_before, v_before = f64(k_cache), f64(v_cache)
    seqlens = [3, 27 - seqlen_q]  # the appended rows start mid-page
    q, k, v = x.randn(b, seqlen_q, hq, d), x.randn(b, seqlen_q, hkv, d), x.randn(b, seqlen_q, hkv, dv)
    out, lse = flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=x.int32(seqlens),
                                                  causal=True, return_softmax_lse=True, **{alias: table})
    want_k, want_v = k_before.copy(), v_before.copy()
    for bi in range(b):
        for i in range(seqlen_q):
            pos = seqlens[bi] + i
            want_k[table_np[bi, pos // page], pos % page] = f64(k)[bi, i]
            want_v[table_np[bi, pos // page], pos % page] = f64(v)[bi, i]
    assert np.array_equal(f64(k_cache), want_k) and np.array_equal(f64(v_cache), want_v)
    o_ref, lse_ref = ref.attention(q, want_k, want_v, seqlens_k=np.array(seqlens) + seqlen_q, page_table=table_np,
                                   causal=True)
    assert tuple(out.shape) == (b, seqlen_q, hq, dv)
    assert_close(out, o_ref)
    assert_lse_close(lse, lse_ref)


@pytest.mark.parametrize("kind", KINDS)
def test_with_kvcache_short_queries_use_a_cached_decode_plan(kind):
    x = arrays(kind, seed=17)
    k_cache, v_cache = x.randn(2, 48, 2, 16), x.randn(2, 48, 2, 16)
    q = x.randn(2, 1, 4, 16)
    lens = x.int32([10, 48])
    flash_attn._PLANS.clear()
    first = flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens)
    assert len(flash_attn._PLANS) == 1
    plan = next(iter(flash_attn._PLANS.values()))
    assert isinstance(plan, flashbuf.DecodePlan) and plan.batch == 2 and plan.max_seqlen_k == 48
    flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens)
    assert list(flash_attn._PLANS.values()) == [plan]  # planned once
    unsplit = flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, num_splits=1)
    assert list(flash_attn._PLANS.values()) == [plan]  # num_splits=1 runs attention() instead
    o_ref, _ = ref.attention(q, k_cache, v_cache, seqlens_k=np.array([10, 48]))
    assert_close(first, o_ref)
    assert_close(unsplit, o_ref)


# ---- what flashbuf does not do, and bad arguments ----------------------------------------------

def test_unsupported_features_raise_not_implemented():
    x = arrays("numpy")
    q, k, v = x.randn(1, 3, 2, 16), x.randn(1, 5, 2, 16), x.randn(1, 5, 2, 16)
    slopes = np.ones(2, np.float32)
    with pytest.raises(NotImplementedError, match=r"^dropout_p: "):
        flash_attn.flash_attn_func(q, k, v, dropout_p=0.1)
    with pytest.raises(NotImplementedError, match=r"^alibi_slopes: "):
        flash_attn.flash_attn_func(q, k, v, alibi_slopes=slopes)
    cu = x.int32([0, 3])
    with pytest.raises(NotImplementedError, match=r"^dropout_p: "):
        flash_attn.flash_attn_varlen_func(q[0], k[0], v[0], cu, x.int32([0, 5]), 3, 5, 0.5)
    cos = np.ones((8, 8), np.float32)
    for name in ("rotary_cos", "rotary_sin", "cache_leftpad", "alibi_slopes"):
        with pytest.raises(NotImplementedError, match=rf"^{name}: "):
            flash_attn.flash_attn_with_kvcache(q, k, v, **{name: cos})
    if not flash_attn._HAS_SINKS:
        with pytest.raises(NotImplementedError, match=r"^learnable_sink: "):
            flash_attn.flash_attn_func(q, k, v, learnable_sink=np.zeros(2, np.float32))


@pytest.mark.parametrize("kind", KINDS)
def test_with_kvcache_bad_arguments_write_nothing(kind):
    x = arrays(kind)
    k_cache, v_cache = x.randn(2, 8, 2, 16), x.randn(2, 8, 2, 16)
    before = f64(k_cache), f64(v_cache)
    q, k, v = x.randn(2, 3, 4, 16), x.randn(2, 3, 2, 16), x.randn(2, 3, 2, 16)
    table = x.int32([[0], [1]])
    cases = [
        (ValueError, r"^cache_seqlens: appending 3 tokens", dict(k=k, v=v, cache_seqlens=x.int32([0, 6]))),
        (ValueError, r"^cache_seqlens: required", dict(k=k, v=v)),
        (ValueError, r"^v: k and v are appended together", dict(k=k, cache_seqlens=0)),
        (ValueError, r"^k: expected shape \(2, 3, 2, 16\)", dict(k=k[:, :, :1], v=v, cache_seqlens=0)),
        (ValueError, r"^cache_seqlens: expected an int or shape \(2,\)", dict(k=k, v=v, cache_seqlens=x.int32([0]))),
        (ValueError, r"^block_table: an alias of page_table", dict(page_table=table, block_table=table)),
        (ValueError, r"^num_splits: ", dict(num_splits=-1)),
        (ValueError, r"^cache_batch_idx: expected shape \(2,\)", dict(cache_batch_idx=x.int32([0]))),
        (NotImplementedError, r"^cache_batch_idx: not supported with a paged cache",
         dict(page_table=table, cache_batch_idx=x.int32([0, 1]))),
    ]
    cases.append((ValueError, r"^q: 3 heads are not a multiple", dict(k=k, v=v, cache_seqlens=0, q=q[:, :, :3])))
    # q read after the append wrote the cache it views; flags as text (bool("False") is True)
    cases.append((ValueError, r"^q: shares memory with k_cache", dict(k=k, v=v, cache_seqlens=0, q=v_cache[:, 5:])))
    cases.append((TypeError, r"^causal: expected a bool", dict(k=k, v=v, cache_seqlens=0, causal="False")))
    cases.append((TypeError, r"^return_softmax_lse: expected a bool", dict(return_softmax_lse="no")))
    if flash_attn._HAS_SINKS:
        cases.append((ValueError, r"^learnable_sink: shares memory with k_cache",
                      dict(k=k, v=v, cache_seqlens=0, learnable_sink=k_cache[1, 7, 1, :4])))
    cases.append((ValueError, r"^q: head dim 8 does not match", dict(k=k, v=v, cache_seqlens=0, q=q[..., :8])))
    if kind == "torch":
        cases.append((TypeError, r"^k: dtype", dict(k=k.double(), v=v, cache_seqlens=0)))
        cases.append((TypeError, r"^q: dtype", dict(k=k, v=v, cache_seqlens=0, q=q.double())))
        # torch q over NumPy caches: named as the framework, not as dtypes of the same name
        cases.append((ValueError, r"^q: must be on k_cache's device \(and of its framework\)",
                      dict(k=k, v=v, cache_seqlens=0, q=q.clone(), caches=(k_cache.numpy(), v_cache.numpy()))))
    for error, message, kw in cases:
        with pytest.raises(error, match=message):
            flash_attn.flash_attn_with_kvcache(kw.pop("q", q), *kw.pop("caches", (k_cache, v_cache)), **kw)
        assert np.array_equal(f64(k_cache), before[0]) and np.array_equal(f64(v_cache), before[1])
    with pytest.raises(ValueError, match=r"^q: expected rank 4"):
        flash_attn.flash_attn_func(q[0], k[0], v[0])
    # packed inputs with the wrong count stacked (flash_attn took slices of them, or IndexError)
    with pytest.raises(ValueError, match=r"^qkv: expected 3 stacked in dimension 2"):
        flash_attn.flash_attn_qkvpacked_func(x.randn(2, 3, 2, 4, 16))
    with pytest.raises(ValueError, match=r"^kv: expected 2 stacked in dimension 2"):
        flash_attn.flash_attn_kvpacked_func(q, x.randn(2, 3, 3, 2, 16))
    with pytest.raises(ValueError, match=r"^qkv: expected 3 stacked in dimension 1"):
        flash_attn.flash_attn_varlen_qkvpacked_func(x.randn(6, 5, 4, 16), x.int32([0, 6]), 6)
    with pytest.raises(ValueError, match=r"^kv: expected 2 stacked in dimension 1"):
        flash_attn.flash_attn_varlen_kvpacked_func(q[0], x.randn(3, 3, 2, 16), x.int32([0, 3]), x.int32([0, 3]), 3, 3)
    with pytest.raises(TypeError, match=r"^max_seqlen_q: expected an int"):
        flash_attn.flash_attn_varlen_func(q[0], k[0], v[0], x.int32([0, 3]), x.int32([0, 3]), 3.5, 3)
    with pytest.raises(TypeError, match=r"^dropout_p: expected a number"):
        flash_attn.flash_attn_func(q, k, v, dropout_p="none")
    wide = [a.double() if kind == "torch" else a.astype(np.float64) for a in (q, k_cache, v_cache)]
    with pytest.raises(TypeError, match=r"^q: unsupported dtype"):  # (not the plan's `dtype`)
        flash_attn.flash_attn_with_kvcache(*wide, cache_seqlens=3)
    with pytest.raises(TypeError, match=r"^return_attn_probs: expected a bool"):
        flash_attn.flash_attn_func(q, k, v, return_attn_probs="yes")
    with pytest.raises(TypeError, match=r"^deterministic: expected a bool"):
        flash_attn.flash_attn_varlen_func(q[0], k[0], v[0], x.int32([0, 3]), x.int32([0, 3]), 3, 3, deterministic="x")
    with pytest.raises(ValueError, match=r"^q: expected rank 3"):
        flash_attn.flash_attn_varlen_func(q, k, v, x.int32([0, 3]), x.int32([0, 3]), 3, 3)


@pytest.mark.parametrize("kind", KINDS)
def test_errors_name_flash_attn_arguments_not_the_library_ones(kind):
    """The library's checks behind these entry points name its own arguments (k, seqlens_k,
    sinks, page_table); the errors name what the caller passed instead."""
    x = arrays(kind)
    q, k_cache = x.randn(2, 1, 4, 8), x.randn(2, 16, 2, 8)
    cases = [
        (ValueError, r"^cache_seqlens\[0\]: 17 keys exceed", lambda: flash_attn.flash_attn_with_kvcache(
            q, k_cache, k_cache, cache_seqlens=17)),
        (ValueError, r"^k_cache: expected shape", lambda: flash_attn.flash_attn_with_kvcache(
            q, k_cache[..., :4], k_cache[..., :4], cache_seqlens=3)),
        (ValueError, r"^cu_seqlens_k: expected shape \(3,\) like cu_seqlens_q", lambda: flash_attn.flash_attn_varlen_func(
            q[:, 0], k_cache, k_cache, x.int32([0, 1, 2]), x.int32([0, 5]), 1, 5, block_table=x.int32([[0], [1]]))),
        (ValueError, r"^cu_seqlens_k\[1\]: 35 keys exceed", lambda: flash_attn.flash_attn_varlen_func(
            q[:, 0], k_cache, k_cache, x.int32([0, 1, 2]), x.int32([0, 5, 40]), 1, 5, block_table=x.int32([[0], [1]]))),
        (ValueError, r"^block_table: expected 2 rows", lambda: flash_attn.flash_attn_with_kvcache(
            q, k_cache, k_cache, cache_seqlens=3, block_table=x.int32([[0], [1], [0]]))),
        (ValueError, r"^block_table: entries 0\.\.9 where the append writes", lambda: flash_attn.flash_attn_with_kvcache(
            q, k_cache, k_cache, k=x.randn(2, 1, 2, 8), v=x.randn(2, 1, 2, 8), cache_seqlens=3,
            block_table=x.int32([[0], [9]]))),
    ]
    if flash_attn._HAS_SINKS:
        cases.append((ValueError, r"^learnable_sink: expected shape \(4\)", lambda: flash_attn.flash_attn_func(
            q, k_cache, k_cache, learnable_sink=x.randn(3))))
    if kind == "torch":
        cases.append((TypeError, r"^cache_batch_idx: expected a torch.Tensor", lambda: flash_attn.flash_attn_with_kvcache(
            q, k_cache, k_cache, cache_seqlens=3, cache_batch_idx=np.array([1, 0], np.int32))))
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()


@pytest.mark.parametrize("kind", KINDS)
def test_with_kvcache_bad_indices_and_scalars_write_nothing(kind):
    """Index values and scalars the append or the attention after it would refuse, or would wrap
    around the cache (a negative cache_seqlens or page), are refused before the append writes
    anything, each error naming its argument."""
    x = arrays(kind)
    k_cache, v_cache = x.randn(2, 8, 2, 16), x.randn(2, 8, 2, 16)
    pages_k, pages_v = x.randn(4, 4, 2, 16), x.randn(4, 4, 2, 16)
    before = [f64(t) for t in (k_cache, v_cache, pages_k, pages_v)]
    q, k, v = x.randn(2, 1, 4, 16), x.randn(2, 1, 2, 16), x.randn(2, 1, 2, 16)
    int64 = (lambda a: torch.tensor(a, dtype=torch.int64)) if kind == "torch" else (lambda a: np.asarray(a, np.int64))
    floats = (lambda a: torch.tensor(a, dtype=torch.float32)) if kind == "torch" else \
        (lambda a: np.asarray(a, np.float32))
    contiguous = [
        (ValueError, r"^cache_seqlens: expected 0\.\.", dict(cache_seqlens=-1)),
        (ValueError, r"^cache_seqlens: negative token count -1", dict(cache_seqlens=x.int32([2, -1]))),
        (ValueError, r"^cache_seqlens: entries .* do not fit int32", dict(cache_seqlens=int64([2, 2**32 + 2]))),
        (TypeError, r"^cache_seqlens: expected an integer dtype", dict(cache_seqlens=floats([2.9, 1.0]))),
        (TypeError, r"^cache_seqlens: expected an int32 tensor or array", dict(cache_seqlens=[2, 1])),
        (ValueError, r"^cache_batch_idx: entries -1\.\.1 where the append writes",
         dict(cache_seqlens=0, cache_batch_idx=x.int32([1, -1]))),
        (ValueError, r"^cache_batch_idx: entries 0\.\.2 where the append writes",
         dict(cache_seqlens=0, cache_batch_idx=x.int32([0, 2]))),
        (TypeError, r"^cache_batch_idx: expected an integer dtype",
         dict(cache_seqlens=0, cache_batch_idx=floats([0.0, 1.0]))),
        (ValueError, r"^softcap: ", dict(cache_seqlens=0, softcap=-1.0)),
        (ValueError, r"^window_size\[0\]: expected >= -1", dict(cache_seqlens=0, window_size=(-3, 0))),
        (ValueError, r"^window_size\[1\]: expected >= -1", dict(cache_seqlens=0, window_size=(-1, -5))),
        (TypeError, r"^window_size\[0\]: expected an int", dict(cache_seqlens=0, window_size=(1.7, 0))),
        (ValueError, r"^scale: 1e-50 is outside float32's range", dict(cache_seqlens=0, softmax_scale=1e-50)),
        (ValueError, r"^softcap: -1e-50 is outside float32's range", dict(cache_seqlens=0, softcap=-1e-50)),
    ]
    for error, message, kw in contiguous:
        with pytest.raises(error, match=message):
            flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, **kw)
    paged = [
        (ValueError, r"^page_table: entries -1\.\.0 where the append writes", x.int32([[0, 1], [-1, 3]])),
        (ValueError, r"^page_table: entries 0\.\.4 where the append writes", x.int32([[0, 1], [4, 3]])),
        (TypeError, r"^page_table: expected an integer dtype", floats([[0, 1], [2, 3]])),
    ]
    for error, message, table in paged:
        with pytest.raises(error, match=message):
            flash_attn.flash_attn_with_kvcache(q, pages_k, pages_v, k, v, cache_seqlens=x.int32([1, 2]),
                                               page_table=table)
    for got, want in zip((k_cache, v_cache, pages_k, pages_v), before):
        assert np.array_equal(f64(got), want)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("num_splits", [0, 1])
def test_with_kvcache_batch_idx_reads_the_appended_rows_of_a_cache_without_page_views(kind, num_splits):
    """A cache whose rows cannot be viewed as pages (a slice of 300 of 320 rows) is read through a
    copy of the rows cache_batch_idx picks; the copy holds the tokens just appended."""
    x = arrays(kind, seed=19)
    big_k, big_v = x.randn(3, 320, 2, 16), x.randn(3, 320, 2, 16)
    q, k, v = x.randn(2, 1, 2, 16), x.randn(2, 1, 2, 16), x.randn(2, 1, 2, 16)
    idx, lens = x.int32([2, 0]), x.int32([3, 7])
    dense_k, dense_v = x.copy(big_k[:, :300]), x.copy(big_v[:, :300])
    got = flash_attn.flash_attn_with_kvcache(q, big_k[:, :300], big_v[:, :300], k, v, cache_seqlens=lens,
                                             cache_batch_idx=idx, num_splits=num_splits)
    want = flash_attn.flash_attn_with_kvcache(q, dense_k, dense_v, k, v, cache_seqlens=lens, cache_batch_idx=idx,
                                              num_splits=num_splits)
    assert np.array_equal(f64(got), f64(want))
    assert np.array_equal(f64(big_k[:, :300]), f64(dense_k))


def test_decode_plan_workspaces_of_the_callers():
    """A plan made without a workspace runs on the caller's (one per run, e.g. per stream or
    thread), refuses to run without one, and checks the one it is given."""
    rng = np.random.default_rng(11)
    q = rng.standard_normal((2, 1, 4, 16)).astype(np.float32)
    k, v = (rng.standard_normal((2, 24, 2, 16)).astype(np.float32) for _ in range(2))
    lens = np.array([5, 24], np.int32)
    own = flashbuf.DecodePlan(2, 1, 4, 2, 16, 16, 24, 0, dtype="fp32", device="cpu")
    bare = flashbuf.DecodePlan(2, 1, 4, 2, 16, 16, 24, 0, dtype="fp32", device="cpu", allocate_workspace=False)
    assert bare.workspace is None and bare.num_splits == own.num_splits
    with pytest.raises(ValueError, match=r"^workspace: this plan holds none"):
        bare.run(q, k, v, lens)
    want = own.run(q, k, v, lens)
    assert np.array_equal(bare.run(q, k, v, lens, workspace=bare.new_workspace()), want)
    for bad in (np.empty(8, np.uint8), np.empty(4096, np.float32), bare.new_workspace()[1:]):
        with pytest.raises(ValueError, match=r"^workspace: expected a contiguous uint8 buffer"):
            bare.run(q, k, v, lens, workspace=bad)
    if torch is not None:
        tq, tk, tv, tl = (torch.from_numpy(a) for a in (q, k, v, lens))
        assert np.array_equal(bare.run(tq, tk, tv, tl, workspace=bare.new_workspace()).numpy(), want)
        # a torch workspace of the caller's, traced (its fake tensor has no address to check)
        torch._dynamo.reset()
        run = torch.compile(lambda q, k, v, n: bare.run(q, k, v, n, workspace=torch.empty(4096, dtype=torch.uint8)),
                            fullgraph=True, backend="aot_eager")
        assert torch.allclose(run(tq, tk, tv, tl), torch.from_numpy(want))



@pytest.mark.skipif(not flash_attn._HAS_SINKS, reason="flashbuf.attention takes no sinks in this build")
@pytest.mark.parametrize("kind", KINDS)
def test_learnable_sink_joins_the_denominator(kind):
    """FA4's learnable_sink: softmax over the keys and one more logit per head that has no value,
    so o = o_plain * l / (l + e^sink) and lse = log(l + e^sink)."""
    x = arrays(kind, seed=19)
    b, sq, sk, hq, hkv, d = 2, 5, 12, 4, 2, 16
    q, k, v = x.randn(b, sq, hq, d), x.randn(b, sk, hkv, d), x.randn(b, sk, hkv, d)
    sink = x.randn(hq)
    o_ref, lse_ref = ref.attention(q, k, v, causal=True)
    s = f64(sink)[None, :, None]
    lse_sink = np.logaddexp(lse_ref, s)
    o_sink = o_ref * np.exp(lse_ref - lse_sink).transpose(0, 2, 1)[..., None]
    out, lse, _ = flash_attn.flash_attn_func(q, k, v, causal=True, learnable_sink=sink, return_attn_probs=True)
    assert_close(out, o_sink)
    assert_lse_close(lse, lse_sink)
    k_cache, v_cache = x.randn(b, 20, hkv, d), x.randn(b, 20, hkv, d)
    out = flash_attn.flash_attn_with_kvcache(q[:, :1], k_cache, v_cache, cache_seqlens=x.int32([3, 20]),
                                             learnable_sink=sink)
    o_ref, lse_ref = ref.attention(q[:, :1], k_cache, v_cache, seqlens_k=np.array([3, 20]))
    lse_sink = np.logaddexp(lse_ref, s)
    assert_close(out, o_ref * np.exp(lse_ref - lse_sink).transpose(0, 2, 1)[..., None])


@pytest.mark.skipif(torch is None or not flash_attn._HAS_SINKS, reason="needs PyTorch and sinks")
def test_learnable_sink_of_another_kind_than_q_is_named():
    """A list (or array) learnable_sink beside torch q is refused naming learnable_sink, not the
    sinks keyword it becomes."""
    x = arrays("torch", seed=29)
    q, k, v = x.randn(1, 3, 2, 16), x.randn(1, 4, 2, 16), x.randn(1, 4, 2, 16)
    with pytest.raises(TypeError, match=r"^learnable_sink: expected a torch.Tensor"):
        flash_attn.flash_attn_func(q, k, v, learnable_sink=[0.5, -1.0])
    with pytest.raises(TypeError, match=r"^learnable_sink: expected real logits"):  # .float() drops the imaginary part
        flash_attn.flash_attn_func(q, k, v, learnable_sink=torch.tensor([0.5, 1j]))
    with pytest.raises(TypeError, match=r"^learnable_sink: expected real logits"):  # float() would not read it
        flash_attn.flash_attn_func(q.numpy(), k.numpy(), v.numpy(), learnable_sink=["a", "b"])


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
@pytest.mark.parametrize("planned", [True, False], ids=["plan_made_eagerly", "no_plan_yet"])
def test_torch_compile_fullgraph(planned):
    """flash_attn_func and flash_attn_with_kvcache (append included) trace without graph breaks;
    a decode plan made by an earlier eager call is used, and without one attention() runs."""
    torch._dynamo.reset()
    flash_attn._PLANS.clear()
    x = arrays("torch", seed=23)
    q, k, v = x.randn(2, 5, 4, 16), x.randn(2, 7, 2, 16), x.randn(2, 7, 2, 16)
    compiled = torch.compile(lambda q, k, v: flash_attn.flash_attn_func(q, k, v, causal=True, window_size=(3, 0)),
                             fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(q, k, v), flash_attn.flash_attn_func(q, k, v, causal=True, window_size=(3, 0)))

    k_cache, v_cache = x.randn(2, 32, 2, 16), x.randn(2, 32, 2, 16)
    k_eager, v_eager = k_cache.clone(), v_cache.clone()
    q1, k1, v1 = x.randn(2, 1, 4, 16), x.randn(2, 1, 2, 16), x.randn(2, 1, 2, 16)
    lens = x.int32([3, 9])
    if planned:
        flash_attn.flash_attn_with_kvcache(q1, k_eager.clone(), v_eager.clone(), cache_seqlens=lens)
    step = torch.compile(lambda q, k, v, n: flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v,
                                                                               cache_seqlens=n, causal=True),
                         fullgraph=True, backend="aot_eager")
    got = step(q1, k1, v1, lens)
    want = flash_attn.flash_attn_with_kvcache(q1, k_eager, v_eager, k1, v1, cache_seqlens=lens, causal=True)
    assert torch.allclose(got, want, atol=1e-6)
    assert torch.equal(k_cache, k_eager) and torch.equal(v_cache, v_eager)
    assert len(flash_attn._PLANS) == 1  # the eager call planned (again) where the trace did not


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("layout", ["contiguous", "indexed", "paged"])
def test_append_kv_writes_each_token_where_its_entries_say(kind, layout):
    """flashbuf.append_kv (what flash_attn_with_kvcache appends with): every token at its position
    in its row or page, nothing else written; a host entry that would write outside the cache is
    refused, naming it, with nothing written."""
    x = arrays(kind, seed=23)
    k, v = x.randn(3, 2, 2, 4), x.randn(3, 2, 2, 4)
    idx = table = None
    if layout == "paged":  # pages of 4 rows, two a sequence: capacity 8
        k_cache, v_cache = x.randn(5, 4, 2, 4), x.randn(5, 4, 2, 4)
        table, lens, bad = x.int32([[0, 1], [2, 3], [-3, 4]]), x.int32([3, 3, 6]), ("page_table", 1, 1, 9)
    else:
        k_cache, v_cache = x.randn(3, 8, 2, 4), x.randn(3, 8, 2, 4)
        lens, bad = x.int32([6, 0, 3]), ("cache_seqlens", 0, None, 7)
        if layout == "indexed":
            idx, bad = x.int32([2, 1, 0]), ("cache_batch_idx", 1, None, 3)
    want_k = ref.appended_cache(k_cache, k, lens, cache_batch_idx=idx, page_table=table)
    want_v = ref.appended_cache(v_cache, v, lens, cache_batch_idx=idx, page_table=table)
    before = (f64(k_cache), f64(v_cache))
    flashbuf.append_kv(k_cache, v_cache, k, v, lens, cache_batch_idx=idx, page_table=table)
    assert np.array_equal(f64(k_cache), want_k) and np.array_equal(f64(v_cache), want_v)
    assert not np.array_equal(want_k, before[0])
    name, row, col, value = bad
    entries = {"page_table": table, "cache_seqlens": lens, "cache_batch_idx": idx}[name]
    if col is None:
        entries[row] = value
    else:
        entries[row, col] = value
    written = (f64(k_cache), f64(v_cache))
    label = f"{name}[{row}]" + ("" if col is None else f"[{col}]")
    with pytest.raises(ValueError, match=rf"^{re.escape(label)}: "):
        flashbuf.append_kv(k_cache, v_cache, k, v, lens, cache_batch_idx=idx, page_table=table)
    assert np.array_equal(f64(k_cache), written[0]) and np.array_equal(f64(v_cache), written[1])


@pytest.mark.parametrize("kind", KINDS)
def test_append_kv_takes_k_and_v_taking_turns_in_one_buffer(kind):
    """A (B, S, 2, heads, D) cache split into K and V at dimension 2: the two views' byte ranges
    interleave, their elements do not, so the append writes both; more sequences than cache rows
    (without cache_batch_idx) and one cache for both are refused by name."""
    x = arrays(kind, seed=29)
    pool = x.randn(2, 8, 2, 2, 4)
    k_cache, v_cache = pool[:, :, 0], pool[:, :, 1]
    k, v, lens = x.randn(2, 3, 2, 4), x.randn(2, 3, 2, 4), x.int32([5, 0])
    want_k = ref.appended_cache(k_cache, k, lens)
    want_v = ref.appended_cache(v_cache, v, lens)
    flashbuf.append_kv(k_cache, v_cache, k, v, lens)
    assert np.array_equal(f64(k_cache), want_k) and np.array_equal(f64(v_cache), want_v)
    with pytest.raises(ValueError, match=r"^k: batch 2 exceeds k_cache's 1 sequences"):
        flashbuf.append_kv(k_cache[:1], v_cache[:1], k, v, lens)
    with pytest.raises(ValueError, match=r"^k_cache: shares memory with v_cache"):
        flashbuf.append_kv(k_cache, k_cache, k, v, lens)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_index_entries_the_host_cannot_read_are_pinned_not_wrapped_to_int32():
    """Device (or traced) int64 index tensors reach int32 without a host read: an entry beyond
    int32's range is pinned to its end, so it stays out of range (clamped by the kernel, or
    tripping the append's bounds check) rather than wrapping to a valid position."""
    wide = torch.tensor([2**32 + 5, -(2**32) - 1, 7, 2**31], dtype=torch.int64)
    assert flash_attn._saturated_int32(wide).tolist() == [2**31 - 1, -(2**31), 7, 2**31 - 1]
    assert flash_attn._saturated_int32(wide).dtype == torch.int32
    narrow = torch.tensor([3, 4], dtype=torch.int32)
    assert flash_attn._saturated_int32(narrow) is narrow
