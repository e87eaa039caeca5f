"""The float64 NumPy reference the Python tests compare flashbuf with.

Naive softmax attention, one sequence and all heads at a time, written for clarity rather than
speed: bottom-right aligned causal and window masks, softcap, GQA, varlen and paged inputs in
flashbuf's layouts (include/flashbuf/flashbuf.hpp). A row that sees no key gets o = 0 and
lse = -inf, as the library promises.
"""
from __future__ import annotations

import numpy as np


def as_f64(a) -> np.ndarray:
    """float64 copy of a NumPy array (ml_dtypes bfloat16 included) or a torch tensor."""
    if hasattr(a, "detach"):  # torch
        return a.detach().float().cpu().numpy().astype(np.float64)
    return np.asarray(a).astype(np.float64)


def attention_one(q, k, v, *, causal=False, window=(-1, -1), softcap=0.0, scale=None):
    """q (Sq, Hq, D), k (Sk, Hkv, D), v (Sk, Hkv, Dv), float64 -> o (Sq, Hq, Dv), lse (Hq, Sq)."""
    sq, hq, d = q.shape
    sk, hkv, _ = k.shape
    dv = v.shape[-1]
    if sk == 0 or sq == 0:
        return np.zeros((sq, hq, dv)), np.full((hq, sq), -np.inf)
    group = hq // hkv
    k = np.repeat(k, group, axis=1)  # query head h reads kv head h // group
    v = np.repeat(v, group, axis=1)
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    s = np.einsum("qhd,khd->hqk", q, k) * scale
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)

    left, right = window
    if causal:
        right = 0
    pos = np.arange(sq)[:, None] + (sk - sq)  # bottom-right alignment
    key = np.arange(sk)[None, :]
    visible = np.ones((sq, sk), dtype=bool)
    if right >= 0:
        visible &= key <= pos + right
    if left >= 0:
        visible &= key >= pos - left
    s = np.where(visible[None], s, -np.inf)

    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    l = p.sum(axis=-1)
    o = np.einsum("hqk,khd->qhd", p, v)
    with np.errstate(divide="ignore", invalid="ignore"):
        o = np.where(l.T[:, :, None] > 0, o / l.T[:, :, None], 0.0)
        lse = np.where(l > 0, np.log(l) + m[..., 0], -np.inf)
    return o, lse


def attention(q, k, v, *, causal=False, window=(-1, -1), softcap=0.0, scale=None, cu_seqlens_q=None,
              cu_seqlens_k=None, seqlens_k=None, page_table=None):
    """Reference in flashbuf's layouts; returns float64 (o, lse) shaped like flashbuf's."""
    q, k, v = as_f64(q), as_f64(k), as_f64(v)
    kw = dict(causal=causal, window=window, softcap=softcap, scale=scale)
    cu_q = None if cu_seqlens_q is None else np.asarray(as_f64(cu_seqlens_q), dtype=np.int64)
    cu_k = None if cu_seqlens_k is None else np.asarray(as_f64(cu_seqlens_k), dtype=np.int64)
    lens_k = None if seqlens_k is None else np.asarray(as_f64(seqlens_k), dtype=np.int64)
    table = None if page_table is None else np.asarray(as_f64(page_table), dtype=np.int64)
    batch = len(cu_q) - 1 if cu_q is not None else q.shape[0]

    def keys(b):
        if table is not None:
            page = k.shape[1]
            rows = np.arange(lens_k[b])
            pages = table[b, rows // page]
            return k[pages, rows % page], v[pages, rows % page]
        if cu_k is not None:
            return k[cu_k[b]:cu_k[b + 1]], v[cu_k[b]:cu_k[b + 1]]
        n = k.shape[1] if lens_k is None else lens_k[b]
        return k[b, :n], v[b, :n]

    if cu_q is not None:
        o = np.zeros(q.shape[:-1] + (v.shape[-1],))
        lse = np.full((q.shape[1], q.shape[0]), -np.inf)
        for b in range(batch):
            kb, vb = keys(b)
            ob, lb = attention_one(q[cu_q[b]:cu_q[b + 1]], kb, vb, **kw)
            o[cu_q[b]:cu_q[b + 1]] = ob
            lse[:, cu_q[b]:cu_q[b + 1]] = lb
        return o, lse

    outs, lses = [], []
    for b in range(batch):
        kb, vb = keys(b)
        ob, lb = attention_one(q[b], kb, vb, **kw)
        outs.append(ob)
        lses.append(lb)
    return np.stack(outs), np.stack(lses)


def tolerance(dtype_name: str) -> float:
    """Absolute tolerance for outputs of order 1: the output's own rounding plus fp32 sums."""
    return {"fp32": 2e-5, "fp16": 2e-3, "bf16": 1.6e-2}[dtype_name]


def appended_cache(cache, new, cache_seqlens, *, cache_batch_idx=None, page_table=None):
    """float64 cache after FlashAttention's in-place append of new (B, S_new, Hkv, D): token i of
    sequence b at position cache_seqlens[b] + i of its cache row (cache_batch_idx[b], or b) or of
    its pages (page_table[b], pages of cache.shape[1] rows). A token whose position or page lies
    outside the cache is not written (flashbuf drops what it could not check on the host)."""
    out = as_f64(cache).copy()
    new = as_f64(new)
    lens = np.asarray(as_f64(cache_seqlens), dtype=np.int64)
    table = None if page_table is None else np.asarray(as_f64(page_table), dtype=np.int64)
    rows = None if cache_batch_idx is None else np.asarray(as_f64(cache_batch_idx), dtype=np.int64)
    rows_per_page = cache.shape[1]
    capacity = rows_per_page * (table.shape[1] if table is not None else 1)
    for b in range(new.shape[0]):
        for i in range(new.shape[1]):
            pos = int(lens[b]) + i
            if not 0 <= pos < capacity:
                continue
            page = table[b, pos // rows_per_page] if table is not None else (rows[b] if rows is not None else b)
            if 0 <= page < cache.shape[0]:
                out[page, pos % rows_per_page] = new[b, i]
    return out
