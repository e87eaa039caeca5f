"""The catalogue of invalid (and easily mistaken valid) inputs, docs/errors.md as code.

Each Case is one mistake a user makes, sent through an entry point (flashbuf.attention,
DecodePlan / DecodePlan.run, merge_states) in every framework it applies to: NumPy arrays,
torch CPU tensors and torch CUDA tensors. An invalid case must raise the named exception type
with a message that starts with the argument it names ("k: ..."); a valid case must run and
run without error. Nothing may crash: every case runs in a process of its own, forked from one
that imported numpy, torch and flashbuf once (no case has run in it, nor has CUDA been
initialised there), so a dead process is a failed case, not a lost run.

    python catalogue.py list                       # the case ids
    python catalogue.py cpu [CASE ...]             # NumPy and torch CPU; one JSON line per case
    python catalogue.py cuda [CASE ...]            # torch CUDA
Each line: {"case": id, "status": exit status or -signal, "results": {framework: {"raised",
"message"}}}.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
from typing import Callable, Optional

import numpy as np

D = 128  # a head dim every build instantiates on the GPU (bf16_128_128, decode bf16_128)
INT32_MAX = 2**31 - 1


class Lib:
    """Makes arrays of one framework: 'numpy', 'torch-cpu' or 'torch-cuda'."""

    def __init__(self, kind: str):
        self.kind = kind
        self.torch = None
        if kind != "numpy":
            import torch

            self.torch = torch
            self.device = "cuda" if kind == "torch-cuda" else "cpu"

    def _dtype(self, name: str):
        if self.torch is not None:
            t = self.torch
            return {"bf16": t.bfloat16, "fp16": t.float16, "fp32": t.float32, "fp64": t.float64,
                    "int32": t.int32, "int64": t.int64, "float8": t.float8_e4m3fn}[name]
        import ml_dtypes

        return {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp32": np.float32, "fp64": np.float64,
                "int32": np.int32, "int64": np.int64, "float8": ml_dtypes.float8_e4m3fn}[name]

    def randn(self, *shape, dtype: str = "bf16"):
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        return self.array(x, dtype)

    def array(self, values, dtype: str):
        if self.torch is not None:
            x = self.torch.tensor(np.asarray(values, dtype=np.float64 if "fp" in dtype or dtype in ("bf16", "float8")
                                             else np.int64))
            return x.to(self._dtype(dtype)).to(self.device)
        return np.asarray(values).astype(self._dtype(dtype))

    def i32(self, values):
        return self.array(values, "int32")

    def cast(self, x, dtype: str):
        return x.to(self._dtype(dtype)) if self.torch is not None else x.astype(self._dtype(dtype))

    def broadcast(self, x, shape):
        """A stride-0 view (read-only in NumPy)."""
        if self.torch is not None:
            return x.expand(*shape)
        return np.broadcast_to(x, shape)

    def read_only(self, x):
        if self.torch is not None:
            return x
        x = x.copy()
        x.flags.writeable = False
        return x

    def neg_view(self, x):
        """x as a negative view of -x's memory (is_neg(): what x.conj().imag of a complex tensor is)."""
        return self.torch._neg_view(-x)

    def empty(self, *shape, dtype: str = "bf16"):
        if self.torch is not None:
            return self.torch.empty(shape, dtype=self._dtype(dtype), device=self.device)
        return np.empty(shape, dtype=self._dtype(dtype))

    def plan_args(self, dtype: str = "bf16"):
        if self.torch is not None:
            return dict(dtype=self._dtype(dtype), device=self.device)
        return dict(dtype=dtype, device="cpu")

    def shape(self, x):
        return tuple(x.shape)


@dataclasses.dataclass
class Case:
    id: str
    entry: str                   # attention | decode | merge_states | DecodePlan
    call: Callable[[Lib], object]  # runs the call; returns the outputs of a valid case
    error: Optional[type] = None  # None: a valid input, must run
    arg: Optional[str] = None     # the argument the message starts with
    fragment: str = ""            # must appear in the message
    what: str = ""                # the mistake, in words (docs/errors.md)
    cuda_check_inputs: bool = False  # on CUDA, refused only with check_inputs=True (device contents)
    frameworks: tuple = ("numpy", "torch-cpu", "torch-cuda")


def _fb():
    import flashbuf

    return flashbuf


def qkv(lib: Lib, b=2, sq=8, sk=8, hq=2, hkv=2, d=D, dv=D, dtype="bf16"):
    return lib.randn(b, sq, hq, d, dtype=dtype), lib.randn(b, sk, hkv, d, dtype=dtype), lib.randn(b, sk, hkv, dv, dtype=dtype)


def attention(lib: Lib, *args, check=False, **kw):
    if lib.kind == "torch-cuda" and check:
        kw["check_inputs"] = True
    return _fb().attention(*args, **kw)


def varlen(lib: Lib, cu_q=(0, 3, 8), cu_k=(0, 4, 10), **kw):
    q, k, v = lib.randn(cu_q[-1], 2, D), lib.randn(10, 2, D), lib.randn(10, 2, D)
    return q, k, v, dict(cu_seqlens_q=lib.i32(cu_q), cu_seqlens_k=lib.i32(cu_k), **kw)


def paged(lib: Lib, table=((5, 0, 3), (1, 2, 4)), lens=(9, 12), page=4, pages=6):
    q = lib.randn(2, 3, 2, D)
    kp, vp = lib.randn(pages, page, 2, D), lib.randn(pages, page, 2, D)
    return q, kp, vp, dict(page_table=lib.i32(table), seqlens_k=lib.i32(lens))


def plan(lib: Lib, batch=2, q_per_seq=1, heads_q=8, heads_kv=2, max_seqlen_k=16, page_size=0):
    return _fb().DecodePlan(batch, q_per_seq, heads_q, heads_kv, D, D, max_seqlen_k, page_size, **lib.plan_args())


def decode_inputs(lib: Lib, batch=2, q_per_seq=1, heads_q=8, heads_kv=2, smax=16):
    return (lib.randn(batch, q_per_seq, heads_q, D), lib.randn(batch, smax, heads_kv, D),
            lib.randn(batch, smax, heads_kv, D), lib.i32([smax, 3][:batch] + [1] * max(0, batch - 2)))


def run_decode(lib: Lib, p, q, k, v, lens, table=None, check=False, **kw):
    if lib.kind == "torch-cuda" and check:
        kw["check_inputs"] = True
    return p.run(q, k, v, lens, table, **kw)


def strided_last(lib: Lib):
    x = lib.randn(2, 8, 2, 2 * D)
    s = x[..., ::2]
    return attention(lib, s, s, s)


def out_is_k(lib: Lib):
    q, k, v = qkv(lib)
    return attention(lib, q, k, v, out=k)


def out_is_q(lib: Lib):
    q, k, v = qkv(lib)
    return attention(lib, q, k, v, out=q)


def out_broadcast(lib: Lib):
    q, k, v = qkv(lib)
    out = lib.broadcast(lib.empty(1, 1, 2, D), (2, 8, 2, D))
    return attention(lib, q, k, v, out=out)


def rows_times_group(lib: Lib):
    # Sq 2^24 x (Hq 256 / Hkv 1) = 2^32 packed rows, as stride-0 views (nothing large exists).
    q = lib.broadcast(lib.randn(1, 1, 1, D), (1, 1 << 24, 256, D))
    k = lib.broadcast(lib.randn(1, 1, 1, D), (1, 4, 1, D))
    return attention(lib, q, k, k)


def huge_seqlen_k(lib: Lib):
    q = lib.randn(1, 4, 1, D)
    k = lib.broadcast(lib.randn(1, 1, 1, D), (1, INT32_MAX, 1, D))
    return attention(lib, q, k, k, window=(100, 0))


def merge(lib: Lib, o_parts, lse_parts):
    return _fb().merge_states(o_parts, lse_parts)


def _cases():
    c = []
    add = c.append
    V, T = ValueError, TypeError
    # ---- attention: shapes
    add(Case("batch_mismatch", "attention", lambda L: attention(L, *qkv(L, b=2)[:1], *qkv(L, b=3)[1:]), V, "k",
             "[batch, seqlen_k, heads_kv, head_dim]", "k and v have another batch size than q"))
    add(Case("kv_heads_mismatch", "attention",
             lambda L: attention(L, qkv(L)[0], qkv(L, hkv=2)[1], qkv(L, hkv=3)[2]), V, "v",
             "[batch, seqlen_k, heads_kv, head_dim_v]", "k with 2 heads, v with 3"))
    add(Case("heads_not_multiple", "attention", lambda L: attention(L, *qkv(L, hq=3, hkv=2)), V, "q",
             "not a multiple of heads_kv", "heads_q not a multiple of heads_kv"))
    add(Case("head_dim_mismatch", "attention",
             lambda L: attention(L, qkv(L)[0], qkv(L, d=64)[1], qkv(L)[2]), V, "k", "head_dim",
             "k's head dim differs from q's"))
    add(Case("q_rank", "attention", lambda L: attention(L, qkv(L)[0][0, 0], *qkv(L)[1:]), V, "q", "expected rank",
             "q of rank 2"))
    add(Case("last_dim_strided", "attention", strided_last, V, "q", "last dimension must be contiguous",
             "q = k = v = x[..., ::2]"))
    add(Case("out_wrong_shape", "attention",
             lambda L: attention(L, *qkv(L), out=L.empty(2, 8, 2, 64)), V, "o", "expected shape",
             "out of the wrong shape"))
    # ---- attention: dtypes
    add(Case("dtype_mismatch", "attention",
             lambda L: attention(L, qkv(L)[0], L.cast(qkv(L)[1], "fp16"), qkv(L)[2]), T, "k", "does not match",
             "k fp16, q bf16"))
    add(Case("dtype_float64", "attention", lambda L: attention(L, *(L.cast(x, "fp64") for x in qkv(L))), T, "q",
             "dtype", "float64 inputs"))
    add(Case("dtype_float8", "attention", lambda L: attention(L, *(L.cast(x, "float8") for x in qkv(L))), T, "q",
             "dtype", "float8 inputs"))
    add(Case("not_an_array", "attention", lambda L: attention(L, qkv(L)[0], [[1.0]], qkv(L)[2]), T, "k", "",
             "a list instead of an array"))
    # ---- attention: memory
    add(Case("out_is_k", "attention", out_is_k, V, "o", "shares memory with k", "out=k"))
    add(Case("out_is_q", "attention", out_is_q, V, "o", "shares memory with q", "out=q"))
    add(Case("out_broadcast", "attention", out_broadcast, V, "o", "",
             "out a stride-0 (broadcast) view: read-only in NumPy, several rows per address in torch"))
    # ---- attention: derived sizes
    add(Case("rows_times_group_overflow", "attention", rows_times_group, V, "q", "packed rows exceed",
             "seqlen_q x heads_q / heads_kv >= 2^31 (stride-0 views)"))
    add(Case("seqlen_k_overflow", "attention", huge_seqlen_k, V, "k", "int indices allow",
             "seqlen_k = 2^31 - 1 with a window"))
    # ---- attention: varlen
    add(Case("cu_seqlens_not_from_zero", "attention",
             lambda L: (lambda q, k, v, kw: attention(L, q, k, v, check=True, **kw))(*varlen(L, cu_q=(1, 3, 8))), V,
             "cu_seqlens_q[0]", "must be 0", "cu_seqlens_q starting at 1", cuda_check_inputs=True))
    add(Case("cu_seqlens_k_decreasing", "attention",
             lambda L: (lambda q, k, v, kw: attention(L, q, k, v, check=True, **kw))(
                 *varlen(L, cu_q=(0, 3, 5, 8), cu_k=(0, 6, 4, 10))), V,
             "cu_seqlens_k[2]", "non-decreasing", "cu_seqlens_k going down", cuda_check_inputs=True))
    add(Case("cu_seqlens_last_not_rows", "attention",
             lambda L: (lambda q, k, v, kw: attention(L, q, k, v, check=True, **kw))(*varlen(L, cu_k=(0, 4, 9))), V,
             "cu_seqlens_k[2]", "number of rows of k", "cu_seqlens_k ending before the rows of k",
             cuda_check_inputs=True))
    add(Case("cu_seqlens_int64", "attention",
             lambda L: (lambda q, k, v, kw: attention(L, q, k, v, **{**kw, "cu_seqlens_q": L.cast(kw["cu_seqlens_q"], "int64")}))(*varlen(L)),
             T, "cu_seqlens_q", "int32 (offsets", "int64 offsets"))
    add(Case("seqlen_above_max", "attention",
             lambda L: (lambda q, k, v, kw: attention(L, q, k, v, max_seqlen_q=4, check=True, **kw))(*varlen(L)), V,
             "cu_seqlens_q[2]", "more than max_seqlen_q", "a sequence longer than max_seqlen_q",
             cuda_check_inputs=True))
    add(Case("varlen_k_without_offsets", "attention",
             lambda L: (lambda q, k, v, kw: attention(L, q, k, v, cu_seqlens_q=kw["cu_seqlens_q"]))(*varlen(L)), V, "k",
             "expected rank 4", "packed k without cu_seqlens_k"))
    add(Case("max_seqlen_beyond_int32", "attention",
             lambda L: (lambda q, k, v, kw: attention(L, q, k, v, max_seqlen_q=2**40, **kw))(*varlen(L)), V,
             "max_seqlen_q", "int32", "max_seqlen_q = 2^40"))
    add(Case("max_seqlen_negative", "attention",
             lambda L: (lambda q, k, v, kw: attention(L, q, k, v, max_seqlen_q=-3, **kw))(*varlen(L)), V,
             "max_seqlen_q", "negative", "max_seqlen_q = -3"))
    add(Case("max_seqlen_below_batch_shape", "attention",
             lambda L: attention(L, *qkv(L), max_seqlen_q=4), V,
             "max_seqlen_q", "less than q's seqlen_q", "max_seqlen_q below q's seqlen_q (no cu_seqlens_q)"))
    add(Case("head_dim_above_limit", "attention",
             lambda L: attention(L, *qkv(L, b=1, sq=1, sk=1, hq=1, hkv=1, d=16385, dv=16385)), V,
             "q", "exceeds the 16384", "head_dim 16385"))
    # ---- attention: paged
    add(Case("page_index_out_of_range", "attention",
             lambda L: (lambda q, k, v, kw: attention(L, q, k, v, check=True, **kw))(*paged(L, table=((5, 99, 3), (1, 2, 4)))),
             V, "page_table[0][1]", "outside the pool", "a page index past the pool", cuda_check_inputs=True))
    add(Case("seqlens_above_capacity", "attention",
             lambda L: (lambda q, k, v, kw: attention(L, q, k, v, check=True, **kw))(*paged(L, lens=(13, 12))), V,
             "seqlens_k[0]", "capacity", "seqlens_k beyond max_pages x page_size", cuda_check_inputs=True))
    add(Case("paged_without_seqlens", "attention",
             lambda L: (lambda q, k, v, kw: attention(L, q, k, v, page_table=kw["page_table"]))(*paged(L)), V,
             "seqlens_k", "required", "page_table without seqlens_k"))
    add(Case("page_size_too_large", "attention",
             lambda L: (lambda q, k, v, kw: attention(L, q, k, v, **kw))(*paged(L, page=257, pages=2, table=((0,), (1,)), lens=(3, 4))),
             V, "k", "page size", "pages of 257 tokens"))
    # ---- attention: scalars
    add(Case("scale_negative", "attention", lambda L: attention(L, *qkv(L), scale=-1.0), V, "scale", "",
             "scale = -1"))
    add(Case("scale_nan", "attention", lambda L: attention(L, *qkv(L), scale=float("nan")), V, "scale", "",
             "scale = NaN"))
    add(Case("scale_huge", "attention", lambda L: attention(L, *qkv(L), scale=3e38), V, "softmax_scale", "at most",
             "scale = 3e38 (scale x log2 e overflows)"))
    add(Case("softcap_negative", "attention", lambda L: attention(L, *qkv(L), softcap=-1.0), V, "softcap", "",
             "softcap = -1"))
    add(Case("softcap_tiny", "attention", lambda L: attention(L, *qkv(L), softcap=1e-40), V, "softcap", "",
             "softcap = 1e-40 (denormal)"))
    add(Case("softcap_huge", "attention", lambda L: attention(L, *qkv(L), softcap=3e38), V, "softcap", "",
             "softcap = 3e38"))
    add(Case("softcap_not_a_number", "attention", lambda L: attention(L, *qkv(L), softcap="big"), T, "softcap", "",
             "softcap = 'big'"))
    add(Case("scale_as_text", "attention", lambda L: attention(L, *qkv(L), scale="0.5"), T, "scale", "",
             "scale = '0.5' (text float() would read)"))
    add(Case("causal_as_text", "attention", lambda L: attention(L, *qkv(L), causal="False"), T, "causal", "bool",
             "causal = 'False' (text bool() would read as true)"))
    add(Case("window_below_minus_one", "attention", lambda L: attention(L, *qkv(L), window=(-2, 0)), V,
             "mask.window_left", ">= -1", "window = (-2, 0)"))
    add(Case("window_below_minus_one_right_unbounded", "attention", lambda L: attention(L, *qkv(L), window=(-5, -1)),
             V, "mask.window_left", ">= -1", "window = (-5, -1) (the binding's mask read it as no window)"))
    add(Case("scale_underflows_float32", "attention", lambda L: attention(L, *qkv(L), scale=1e-50), V, "scale",
             "float32", "scale = 1e-50 (0 in float32: the default scale)"))
    add(Case("softcap_underflows_float32", "attention", lambda L: attention(L, *qkv(L), softcap=-1e-50), V, "softcap",
             "float32", "softcap = -1e-50 (0 in float32: no softcap)"))
    add(Case("window_not_a_pair", "attention", lambda L: attention(L, *qkv(L), window=3), V, "window", "pair",
             "window = 3"))
    add(Case("backend_unknown", "attention", lambda L: attention(L, *qkv(L), backend="tpu"), V, "backend", "unknown",
             "backend = 'tpu'"))
    add(Case("backend_wrong_device", "attention", lambda L: attention(L, *qkv(L), backend="sm90" if L.kind != "torch-cuda" else "cpu"),
             V, "backend", "", "backend for the other device"))
    add(Case("q_missing", "attention", lambda L: attention(L, None, *qkv(L)[1:]), V, "q", "required",
             "q=None beside k and v"))
    add(Case("negative_view", "attention", lambda L: (lambda q, k, v: attention(L, L.neg_view(q), k, v))(*qkv(L)), V,
             "q", "negative view", "a torch negative view as q (torch._neg_view; x.conj().imag; torch only)",
             frameworks=("torch-cpu", "torch-cuda")))
    add(Case("sinks_wrong_length", "attention", lambda L: attention(L, *qkv(L), sinks=L.randn(3, dtype="fp32")), V,
             "sinks", "[heads_q]", "sinks of 3 entries for 2 query heads"))
    add(Case("sinks_not_fp32", "attention", lambda L: attention(L, *qkv(L), sinks=L.randn(2, dtype="bf16")), T,
             "sinks", "fp32", "bf16 sinks"))
    # ---- DecodePlan and run
    add(Case("decode_heads_mismatch", "decode",
             lambda L: run_decode(L, plan(L), *decode_inputs(L, heads_q=4)), V, "q", "[batch, q_per_seq, heads_q",
             "DecodePlan(heads_q=8) run with q of 4 heads"))
    add(Case("decode_seqlens_none", "decode",
             lambda L: (lambda q, k, v, lens: run_decode(L, plan(L), q, k, v, None))(*decode_inputs(L)), V,
             "seqlens_k", "required", "seqlens_k=None"))
    add(Case("decode_q_per_seq_mismatch", "decode",
             lambda L: run_decode(L, plan(L), *decode_inputs(L, q_per_seq=2)), V, "q", "q_per_seq",
             "q with 2 tokens per sequence for a plan of 1"))
    add(Case("decode_cache_batch_mismatch", "decode",
             lambda L: (lambda q, k, v, lens: run_decode(L, plan(L), q, k[:1], v[:1], lens))(*decode_inputs(L)), V, "k",
             "[batch, max_seqlen_k", "a cache of another batch size"))
    add(Case("decode_page_table_missing", "decode",
             lambda L: run_decode(L, plan(L, page_size=4), *decode_inputs(L)), V, "page_table", "required",
             "a paged plan run without page_table"))
    add(Case("decode_seqlens_above_plan", "decode",
             lambda L: (lambda q, k, v, lens: run_decode(L, plan(L, max_seqlen_k=8), q, k, v, lens, check=True))(*decode_inputs(L)),
             V, "seqlens_k[0]", "max_seqlen_k", "seqlens_k beyond the plan's max_seqlen_k", cuda_check_inputs=True))
    add(Case("decode_softcap_negative", "decode",
             lambda L: run_decode(L, plan(L), *decode_inputs(L), softcap=-2.0), V, "softcap", "", "softcap = -2"))
    add(Case("plan_heads_not_multiple", "DecodePlan", lambda L: plan(L, heads_q=6, heads_kv=4), V, "problem.heads_q",
             "multiple", "heads_q = 6 over heads_kv = 4"))
    add(Case("plan_q_per_seq_too_many", "DecodePlan", lambda L: plan(L, q_per_seq=17), V, "problem.q_per_seq",
             "1..16", "17 query tokens per sequence"))
    add(Case("plan_batch_beyond_int32", "DecodePlan", lambda L: plan(L, batch=2**40), V, "batch", "int32",
             "batch = 2^40"))
    # ---- merge_states
    add(Case("merge_rank", "merge_states", lambda L: merge(L, L.randn(5, 4, D, dtype="fp32"), L.randn(3, 4, 5, dtype="fp32")),
             V, "o_parts", "rank", "o_parts of rank 3"))
    add(Case("merge_lse_dtype", "merge_states",
             lambda L: merge(L, L.randn(3, 5, 4, D, dtype="fp32"), L.randn(3, 4, 5, dtype="bf16")), T, "lse_parts",
             "fp32", "bf16 LSEs"))
    add(Case("merge_lse_missing", "merge_states", lambda L: merge(L, L.randn(3, 5, 4, D, dtype="fp32"), None), V,
             "lse_parts", "required", "lse_parts=None"))
    add(Case("merge_no_parts", "merge_states",
             lambda L: merge(L, L.randn(0, 5, 4, D, dtype="fp32"), L.randn(0, 4, 5, dtype="fp32")), V, "o_parts",
             "at least one part", "zero parts"))
    # ---- valid inputs that were refused or are easy to mistake for errors
    add(Case("valid_read_only_inputs", "attention", lambda L: attention(L, *(L.read_only(x) for x in qkv(L))),
             what="read-only NumPy inputs (flags.writeable = False)"))
    add(Case("valid_broadcast_inputs", "attention",
             lambda L: attention(L, qkv(L)[0], L.broadcast(L.randn(1, 1, 2, D), (2, 8, 2, D)),
                                 L.broadcast(L.randn(1, 1, 2, D), (2, 8, 2, D))),
             what="k, v as stride-0 views (np.broadcast_to: read-only)"))
    add(Case("valid_q_is_k_is_v", "attention", lambda L: (lambda x: attention(L, x, x, x))(qkv(L)[0]),
             what="q, k and v one tensor (inputs may share memory)"))
    add(Case("valid_zero_batch", "attention", lambda L: attention(L, *qkv(L, b=0)), what="batch 0"))
    add(Case("valid_zero_queries", "attention", lambda L: attention(L, *qkv(L, sq=0)), what="seqlen_q 0"))
    add(Case("valid_zero_keys", "attention", lambda L: attention(L, *qkv(L, sk=0), return_lse=True),
             what="seqlen_k 0 (o = 0, lse = -inf)"))
    add(Case("valid_varlen_all_empty", "attention",
             lambda L: attention(L, L.randn(0, 2, D), L.randn(0, 2, D), L.randn(0, 2, D), cu_seqlens_q=L.i32([0, 0, 0]),
                                 cu_seqlens_k=L.i32([0, 0, 0])),
             what="varlen lengths all 0, max_seqlen_* omitted"))
    add(Case("valid_zero_pages", "attention",
             lambda L: attention(L, L.randn(2, 3, 2, D), L.randn(0, 16, 2, D), L.randn(0, 16, 2, D),
                                 page_table=L.i32(np.zeros((2, 0), np.int32)), seqlens_k=L.i32([0, 0])),
             what="a paged cache of 0 pages (every sequence empty)"))
    add(Case("valid_decode_batch_zero", "decode",
             lambda L: run_decode(L, plan(L, batch=0), *decode_inputs(L, batch=0)), what="a decode batch of 0"))
    add(Case("valid_merge_one_part", "merge_states",
             lambda L: merge(L, L.randn(1, 5, 4, D, dtype="fp32"), L.randn(1, 4, 5, dtype="fp32")),
             what="merge_states of one part"))
    return {case.id: case for case in c}


CASES = _cases()


def frameworks_for(case: Case, device: str) -> list[str]:
    wanted = ["torch-cuda"] if device == "cuda" else ["numpy", "torch-cpu"]
    out = [f for f in wanted if f in case.frameworks]
    if "torch-cpu" in out or "torch-cuda" in out:
        try:
            import torch  # noqa: F401
        except ImportError:
            out = [f for f in out if f == "numpy"]
    return out


def run(case: Case, framework: str) -> dict:
    try:
        lib = Lib(framework)
        case.call(lib)
        if lib.kind == "torch-cuda":
            lib.torch.cuda.synchronize()
        return {"raised": None, "message": ""}
    except Exception as e:  # reported, judged by the test
        return {"raised": type(e).__name__, "message": str(e)}


CASE_TIMEOUT_S = 300


def run_forked(case_id: str, device: str) -> dict:
    """The case in a child process; its exit status says whether it survived."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, report, leave without running the parent's exit handlers
        os.close(read_end)
        signal.alarm(CASE_TIMEOUT_S)
        case = CASES[case_id]
        payload = json.dumps({f: run(case, f) for f in frameworks_for(case, device)}).encode()
        os.write(write_end, payload)
        os.close(write_end)
        os._exit(0)
    os.close(write_end)
    chunks = []
    while True:
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    data = b"".join(chunks)
    return {"case": case_id, "status": code, "results": json.loads(data) if code == 0 and data else {}}


def main(argv: list[str]) -> int:
    if argv[1:] == ["list"]:
        print("\n".join(CASES))
        return 0
    device, ids = argv[1], argv[2:] or list(CASES)
    _fb()  # imported once, before any fork
    try:  # the first call of a torch custom operator imports torch._dynamo (seconds): do it here once
        import torch._dynamo  # noqa: F401
    except ImportError:
        pass
    for case_id in ids:
        print(json.dumps(run_forked(case_id, device)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
