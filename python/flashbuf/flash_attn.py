"""FlashAttention's entry points on flashbuf, for code written against the flash-attn package.

    import flashbuf.flash_attn as flash_attn        # where the code said `import flash_attn`
    from flashbuf import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache

The functions take flash-attn 2.x's arguments (names, order, defaults), shapes and return
conventions, forward only:

    flash_attn_func(q, k, v, ...)                         q (B, S, H, D)   -> out (B, S, H, Dv)
    flash_attn_varlen_func(q, k, v, cu_seqlens_q, ...)    q (T, H, D)      -> out (T, H, Dv)
    flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=..., ...)
    flash_attn_qkvpacked_func, flash_attn_kvpacked_func and their varlen forms (views, no copies)

The LSE is FlashAttention's (and attention()'s): (B, H, S) or (H, T), natural log. The paged
cache's table is `page_table` (FlashAttention 3/4's name) with `block_table` (2.x's) accepted as
its alias; FlashAttention 4's `learnable_sink` passes to flashbuf's sinks. Differences:

  * dropout_p > 0, alibi_slopes, rotary_cos / rotary_sin and cache_leftpad raise
    NotImplementedError; deterministic is accepted (the forward pass is deterministic).
  * return_attn_probs=True returns (out, softmax_lse, S_dmask) with an empty S_dmask, as
    flash-attn 2.x does whenever dropout_p is 0: no probabilities are materialised.
  * num_splits: 1 runs attention() unsplit; any other value lets flashbuf's decode plan choose
    the split (the results agree up to rounding).
  * No autograd: the outputs carry no gradient.
  * Keywords that only FlashAttention 3 or 4 have (qv, q/k/v_descale, seqused_q/k, cu_seqlens_k_new,
    pack_gqa, sm_margin, scheduler_metadata, attention_chunk, score_mod, mask_mod, out,
    return_lse) are not taken (TypeError); FA4's positional order after v differs from 2.x's,
    which is the one followed here.

Tensors: PyTorch on CUDA or the CPU, or NumPy arrays (CPU backend), as attention() takes them.
"""
from __future__ import annotations

import inspect
import re
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from ._api import DecodePlan, _check_attention, _compiling, append_kv, attention, torch
from ._common import Array, flag, real, window_side

__all__ = ["flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache", "flash_attn_qkvpacked_func",
           "flash_attn_kvpacked_func", "flash_attn_varlen_qkvpacked_func", "flash_attn_varlen_kvpacked_func"]

# flashbuf.attention and DecodePlan.run take the sink logits as `sinks` once the library has them.
_HAS_SINKS = "sinks" in inspect.signature(attention).parameters and \
    "sinks" in inspect.signature(DecodePlan.run).parameters

# The most query tokens per sequence that DecodePlan takes (DecodeProblem::q_per_seq).
_MAX_DECODE_QUERIES = 16
# The largest page the kernels read (flashbuf's paged K/V takes pages of 1..256 tokens).
_MAX_PAGE_SIZE = 256


def _is_torch(x: Any) -> bool:
    return torch is not None and isinstance(x, torch.Tensor)


# ---- argument conversion --------------------------------------------------------------------

class _CallersNames:
    """The library's checks name its own arguments (k, seqlens_k, sinks); where this module passed
    them what its caller gave under FlashAttention's names (k_cache, cache_seqlens,
    learnable_sink), an error raised inside `with _CallersNames(k="k_cache", ...)` that names one
    of them is raised again naming the caller's. (A class, not a generator: it wraps every call.)"""

    __slots__ = ("names",)

    def __init__(self, **names: str):
        self.names = names

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> bool:
        if kind is not ValueError and kind is not TypeError:
            return False
        message = str(error)
        named = re.match(r"[A-Za-z_]+(?=[:\[])", message)
        if named is None or named.group(0) not in self.names:
            return False
        raise kind(self.names[named.group(0)] + message[named.end():]) from None


def _flags(deterministic: Any, return_attn_probs: Any) -> bool:
    """return_attn_probs as a bool, deterministic checked as one too (the forward pass is
    deterministic either way)."""
    flag("deterministic", deterministic)
    return flag("return_attn_probs", return_attn_probs)


def _refuse_unsupported(**values: Any) -> None:
    """NotImplementedError for the FlashAttention features flashbuf does not compute."""
    why = {
        "dropout_p": "flashbuf computes attention without dropout; pass dropout_p=0.0 (inference)",
        "alibi_slopes": "flashbuf has no ALiBi bias",
        "rotary_cos": "flashbuf does not apply rotary embeddings; rotate q and k before the call",
        "rotary_sin": "flashbuf does not apply rotary embeddings; rotate q and k before the call",
        "cache_leftpad": "flashbuf reads every cache from position 0; left-padded caches are not supported",
    }
    for name, value in values.items():
        unsupported = (real(name, value) != 0.0) if name == "dropout_p" else value is not None
        if unsupported:
            raise NotImplementedError(f"{name}: {why[name]}")


def _window(window_size: Optional[Sequence[Optional[int]]]) -> tuple[int, int]:
    """FlashAttention's window_size: (left, right) with -1 (or None, as FlashAttention 4 writes
    it) for an unbounded side."""
    if window_size is None:
        return -1, -1
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise ValueError(f"window_size: expected a pair (left, right), -1 for unbounded; got {window_size!r}") from None
    return (-1 if left is None else window_side("window_size[0]", left),
            -1 if right is None else window_side("window_size[1]", right))


def _softcap(softcap: Optional[float]) -> float:
    return 0.0 if softcap is None else real("softcap", softcap)


def _sinks(learnable_sink: Any, q: Any) -> dict:
    """flashbuf's sinks keyword for FlashAttention 4's learnable_sink (Hq logits, any float dtype;
    a torch.Tensor where q is one)."""
    if learnable_sink is None:
        return {}
    if not _HAS_SINKS:
        raise NotImplementedError("learnable_sink: this flashbuf build's attention() takes no sinks yet")
    if _is_torch(learnable_sink):
        if learnable_sink.is_complex() or learnable_sink.dtype == torch.bool:
            raise TypeError(f"learnable_sink: expected real logits, got dtype {learnable_sink.dtype}")
        return {"sinks": learnable_sink.float()}
    if _is_torch(q):
        raise TypeError(f"learnable_sink: expected a torch.Tensor, as q is, got {type(learnable_sink).__name__}")
    values = np.asarray(learnable_sink)
    if values.dtype.kind not in "fiu":  # (complex, bool, text, objects)
        raise TypeError(f"learnable_sink: expected real logits, got dtype {values.dtype}")
    return {"sinks": values.astype(np.float32, copy=False)}


def _shares_bytes(a: Any, b: Any) -> bool:
    """Whether the byte ranges a's and b's elements lie in meet (NumPy's may_share_memory test;
    for torch tensors on one device, first whether their allocations meet at all, which is cheap)."""
    if not _is_torch(a):
        return np.may_share_memory(a, b)
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    if sa.data_ptr() >= sb.data_ptr() + sb.nbytes() or sb.data_ptr() >= sa.data_ptr() + sa.nbytes():
        return False
    (a_first, a_end), (b_first, b_end) = _torch_byte_span(a), _torch_byte_span(b)
    return a_first < b_end and b_first < a_end


def _torch_byte_span(x: Any) -> Tuple[int, int]:
    """The bytes [first, end) that a non-empty tensor's elements lie in."""
    first = end = x.data_ptr()
    itemsize = x.element_size()
    for size, stride in zip(x.shape, x.stride()):
        reach = (size - 1) * stride * itemsize
        if reach < 0:
            first += reach
        else:
            end += reach
    return first, end + itemsize


def _refuse_inputs_in_cache(k_cache: Any, v_cache: Any, **inputs: Any) -> None:
    """The append writes k_cache and v_cache before attention reads its inputs: an input that
    shares bytes with either would be read changed (docs/errors.md: no output may share a byte
    range with an input), so it is refused, named, before anything is written."""
    for name, x in inputs.items():
        if x is not None and (_shares_bytes(x, k_cache) or _shares_bytes(x, v_cache)):
            raise ValueError(f"{name}: shares memory with k_cache or v_cache, which the append writes before "
                             f"attention reads {name}; pass a copy")


def _page_table(page_table: Any, block_table: Any) -> Tuple[Any, str]:
    """The page table, whichever of its two names the caller gave it, and that name."""
    if block_table is not None and page_table is not None:
        raise ValueError("block_table: an alias of page_table; pass one of them, not both")
    return (page_table, "page_table") if block_table is None else (block_table, "block_table")


def _empty_probs(q: Any) -> Any:
    """S_dmask as flash-attn 2.x returns it without dropout: an empty tensor of q's dtype."""
    if _is_torch(q):
        return torch.empty((0,), dtype=q.dtype, device=q.device)
    return np.empty((0,), dtype=q.dtype)


def _diff(name: str, cu_seqlens: Any) -> Any:
    """Sequence lengths from cumulative offsets, int32, on the offsets' device (no sync). Offsets
    the host can read are checked as attention() checks cu_seqlens: from 0, non-decreasing."""
    _rank(name, cu_seqlens, 1, "(batch + 1,) offsets")
    cu_seqlens = _integer_array(name, cu_seqlens, tuple(cu_seqlens.shape))
    if _host_readable(cu_seqlens) and cu_seqlens.shape[0] > 0:
        offsets = [int(x) for x in (cu_seqlens.tolist() if _is_torch(cu_seqlens) else cu_seqlens)]
        if offsets[0] != 0:
            raise ValueError(f"{name}[0]: must be 0 (the offset of the first sequence), got {offsets[0]}")
        for i in range(1, len(offsets)):
            if offsets[i] < offsets[i - 1]:
                raise ValueError(f"{name}[{i}]: offsets must be non-decreasing, got {offsets[i - 1]} then {offsets[i]}")
    if _is_torch(cu_seqlens):
        return _saturated_int32(cu_seqlens[1:] - cu_seqlens[:-1])
    return np.diff(np.asarray(cu_seqlens)).astype(np.int32)


def _unit_last_stride(x: Any) -> Any:
    """x with a contiguous last dimension, copied only where it has none (as FlashAttention's
    maybe_contiguous does; flashbuf reads rows of the last dimension as vectors)."""
    if x is None:
        return None
    if _is_torch(x):
        return x if x.stride(-1) == 1 or x.shape[-1] <= 1 else x.contiguous()
    if isinstance(x, np.ndarray) and x.ndim and x.strides[-1] != x.itemsize and x.shape[-1] > 1:
        return np.ascontiguousarray(x)
    return x


def _rank(name: str, x: Any, rank: int, layout: str, stacked: tuple[int, int] | None = None) -> None:
    """x of rank `rank` (layout: its dimensions in words); stacked (dim, n): a packed input whose
    dimension dim holds n tensors (q, k, v or k, v)."""
    if getattr(x, "ndim", None) != rank:
        shape = tuple(getattr(x, "shape", ())) if hasattr(x, "shape") else type(x).__name__
        raise ValueError(f"{name}: expected rank {rank} {layout}, got {shape}")
    if stacked is not None and x.shape[stacked[0]] != stacked[1]:
        raise ValueError(f"{name}: expected {stacked[1]} stacked in dimension {stacked[0]} of {layout}, "
                         f"got shape {tuple(x.shape)}")


# ---- flash_attn_func and flash_attn_varlen_func -----------------------------------------------

def flash_attn_func(q: Array, k: Array, v: Array, dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                    causal: bool = False, window_size: Sequence[Optional[int]] = (-1, -1), softcap: float = 0.0,
                    alibi_slopes: Optional[Array] = None, deterministic: bool = False,
                    return_attn_probs: bool = False, *,
                    learnable_sink: Optional[Array] = None) -> Union[Array, Tuple[Array, Array, Array]]:
    """FlashAttention's flash_attn_func: softmax(softmax_scale * q k^T + mask) v.

    q (B, Sq, H, D), k (B, Sk, Hkv, D), v (B, Sk, Hkv, Dv), H a multiple of Hkv (MQA/GQA: query
    head h reads K/V head h // (H / Hkv)). causal and window_size are aligned to the bottom
    right: query i sees keys j with i + Sk - Sq - left <= j <= i + Sk - Sq + right (right = 0
    with causal; -1 is unbounded). softcap > 0 caps the scores with softcap * tanh(s / softcap).
    softmax_scale defaults to 1 / sqrt(D). A row that sees no key returns zeros.

    Returns out (B, Sq, H, Dv), or with return_attn_probs (out, softmax_lse (B, H, Sq) float32,
    S_dmask), S_dmask empty as flash-attn returns it without dropout. learnable_sink (H,), FA4's
    per-head sink logit, joins each row's softmax denominator. dropout_p > 0 and alibi_slopes
    raise NotImplementedError.
    """
    _refuse_unsupported(dropout_p=dropout_p, alibi_slopes=alibi_slopes)
    probs = _flags(deterministic, return_attn_probs)
    _rank("q", q, 4, "(batch, seqlen, nheads, headdim); packed sequences go to flash_attn_varlen_func")
    q, k, v = _unit_last_stride(q), _unit_last_stride(k), _unit_last_stride(v)
    with _CallersNames(sinks="learnable_sink"):
        result: Any = attention(q, k, v, causal=causal, window=_window(window_size), softcap=_softcap(softcap),
                                scale=softmax_scale, return_lse=probs, **_sinks(learnable_sink, q))
    if probs:
        out, lse = result
        return out, lse, _empty_probs(q)
    return result


def flash_attn_varlen_func(q: Array, k: Array, v: Array, cu_seqlens_q: Array, cu_seqlens_k: Array,
                           max_seqlen_q: int, max_seqlen_k: int, dropout_p: float = 0.0,
                           softmax_scale: Optional[float] = None, causal: bool = False,
                           window_size: Sequence[Optional[int]] = (-1, -1), softcap: float = 0.0,
                           alibi_slopes: Optional[Array] = None, deterministic: bool = False,
                           return_attn_probs: bool = False, block_table: Optional[Array] = None, *,
                           page_table: Optional[Array] = None,
                           learnable_sink: Optional[Array] = None) -> Union[Array, Tuple[Array, Array, Array]]:
    """FlashAttention's flash_attn_varlen_func: attention over packed sequences of varying length.

    q (Tq, H, D) and k, v (Tk, Hkv, D|Dv) hold the sequences back to back; cu_seqlens_q and
    cu_seqlens_k, int32 (B + 1), are their cumulative lengths, max_seqlen_q/k upper bounds of
    the lengths. With block_table (alias page_table) int32 (B, max_blocks), k and v are a paged
    cache (num_blocks, page_size, Hkv, D|Dv) and sequence b reads its first
    cu_seqlens_k[b+1] - cu_seqlens_k[b] keys from its pages (pages of 1..256 tokens). Masks,
    scale, softcap and learnable_sink are as in flash_attn_func, per sequence.

    Returns out (Tq, H, Dv), or with return_attn_probs (out, softmax_lse (H, Tq) float32,
    S_dmask) with S_dmask empty. dropout_p > 0 and alibi_slopes raise NotImplementedError.
    """
    _refuse_unsupported(dropout_p=dropout_p, alibi_slopes=alibi_slopes)
    probs = _flags(deterministic, return_attn_probs)
    _rank("q", q, 3, "(total_q, nheads, headdim) with cu_seqlens_q")
    q, k, v = _unit_last_stride(q), _unit_last_stride(k), _unit_last_stride(v)
    table, table_name = _page_table(page_table, block_table)
    if table is not None:  # (the lengths are taken from cu_seqlens_k here, before attention() sees it)
        want, got = (tuple(getattr(x, "shape", ())) for x in (cu_seqlens_q, cu_seqlens_k))
        if got != want:
            raise ValueError(f"cu_seqlens_k: expected shape {want} like cu_seqlens_q [batch + 1], got {got}")
    keys = dict(cu_seqlens_k=cu_seqlens_k) if table is None else \
        dict(seqlens_k=_diff("cu_seqlens_k", cu_seqlens_k), page_table=table)
    with _CallersNames(sinks="learnable_sink", seqlens_k="cu_seqlens_k", page_table=table_name):
        result: Any = attention(q, k, v, cu_seqlens_q=cu_seqlens_q, max_seqlen_q=max_seqlen_q,
                                max_seqlen_k=max_seqlen_k, causal=causal, window=_window(window_size),
                                softcap=_softcap(softcap), scale=softmax_scale, return_lse=probs,
                                **keys, **_sinks(learnable_sink, q))
    if probs:
        out, lse = result
        return out, lse, _empty_probs(q)
    return result


def flash_attn_qkvpacked_func(qkv: Array, dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                              causal: bool = False, window_size: Sequence[Optional[int]] = (-1, -1),
                              softcap: float = 0.0, alibi_slopes: Optional[Array] = None,
                              deterministic: bool = False,
                              return_attn_probs: bool = False) -> Union[Array, Tuple[Array, Array, Array]]:
    """flash_attn_func on qkv (B, S, 3, H, D) stacked: q, k, v are views of it."""
    _rank("qkv", qkv, 5, "(batch, seqlen, 3, nheads, headdim)", stacked=(2, 3))
    return flash_attn_func(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], dropout_p, softmax_scale, causal, window_size,
                           softcap, alibi_slopes, deterministic, return_attn_probs)


def flash_attn_kvpacked_func(q: Array, kv: Array, dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                             causal: bool = False, window_size: Sequence[Optional[int]] = (-1, -1),
                             softcap: float = 0.0, alibi_slopes: Optional[Array] = None,
                             deterministic: bool = False,
                             return_attn_probs: bool = False) -> Union[Array, Tuple[Array, Array, Array]]:
    """flash_attn_func with kv (B, Sk, 2, Hkv, D) stacked: k, v are views of it."""
    _rank("kv", kv, 5, "(batch, seqlen_k, 2, nheads_k, headdim)", stacked=(2, 2))
    return flash_attn_func(q, kv[:, :, 0], kv[:, :, 1], dropout_p, softmax_scale, causal, window_size, softcap,
                           alibi_slopes, deterministic, return_attn_probs)


def flash_attn_varlen_qkvpacked_func(qkv: Array, cu_seqlens: Array, max_seqlen: int, dropout_p: float = 0.0,
                                     softmax_scale: Optional[float] = None, causal: bool = False,
                                     window_size: Sequence[Optional[int]] = (-1, -1), softcap: float = 0.0,
                                     alibi_slopes: Optional[Array] = None, deterministic: bool = False,
                                     return_attn_probs: bool = False) -> Union[Array, Tuple[Array, Array, Array]]:
    """flash_attn_varlen_func on qkv (T, 3, H, D) stacked, one cu_seqlens for queries and keys."""
    _rank("qkv", qkv, 4, "(total, 3, nheads, headdim)", stacked=(1, 3))
    return flash_attn_varlen_func(qkv[:, 0], qkv[:, 1], qkv[:, 2], cu_seqlens, cu_seqlens, max_seqlen, max_seqlen,
                                  dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                                  return_attn_probs)


def flash_attn_varlen_kvpacked_func(q: Array, kv: Array, cu_seqlens_q: Array, cu_seqlens_k: Array,
                                    max_seqlen_q: int, max_seqlen_k: int, dropout_p: float = 0.0,
                                    softmax_scale: Optional[float] = None, causal: bool = False,
                                    window_size: Sequence[Optional[int]] = (-1, -1), softcap: float = 0.0,
                                    alibi_slopes: Optional[Array] = None, deterministic: bool = False,
                                    return_attn_probs: bool = False) -> Union[Array, Tuple[Array, Array, Array]]:
    """flash_attn_varlen_func with kv (Tk, 2, Hkv, D) stacked: k, v are views of it."""
    _rank("kv", kv, 4, "(total_k, 2, nheads_k, headdim)", stacked=(1, 2))
    return flash_attn_varlen_func(q, kv[:, 0], kv[:, 1], cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                  dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                                  return_attn_probs)


# ---- flash_attn_with_kvcache ------------------------------------------------------------------

_INT32_MAX = 2**31 - 1


def _integer_array(name: str, value: Any, shape: tuple) -> Any:
    """value, a torch tensor or NumPy array of an integer dtype and the given shape, with its host
    values (where they can be read without a synchronisation) in int32's range: refused, named,
    rather than truncated or wrapped on the way to int32."""
    if not _is_torch(value) and not isinstance(value, np.ndarray):
        raise TypeError(f"{name}: expected an int32 tensor or array of shape {shape}, got {type(value).__name__}")
    if _is_torch(value):
        integer = not (value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool)
        size = value.numel()
    else:
        integer, size = np.issubdtype(value.dtype, np.integer), value.size
    if not integer:
        raise TypeError(f"{name}: expected an integer dtype (int32), got {value.dtype}")
    if tuple(value.shape) != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {tuple(value.shape)}")
    if size and _host_readable(value):
        low, high = int(value.min()), int(value.max())
        if low < -_INT32_MAX - 1 or high > _INT32_MAX:
            raise ValueError(f"{name}: entries {low}..{high} do not fit int32")
    return value


def _saturated_int32(value: Any) -> Any:
    """A torch integer tensor as int32, entries beyond int32's range pinned to its ends (no
    synchronisation): an out-of-range device entry stays out of range, where truncation could
    wrap it to a valid position (2^32 + 5 to 5) and append or read there."""
    if value.dtype == torch.int32:
        return value
    return value.clamp(-_INT32_MAX - 1, _INT32_MAX).to(torch.int32)


def _int32_lengths(name: str, value: Any, batch: int, like: Any) -> Any:
    """cache_seqlens as an int32 (B) tensor/array on like's device; an int applies to every
    sequence. Host-readable lengths must be >= 0."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if not 0 <= int(value) <= _INT32_MAX:
            raise ValueError(f"{name}: expected 0..{_INT32_MAX} tokens, got {int(value)}")
        if _is_torch(like):
            return torch.full((batch,), int(value), dtype=torch.int32, device=like.device)
        return np.full((batch,), int(value), dtype=np.int32)
    if hasattr(value, "shape") and tuple(value.shape) != (batch,):
        raise ValueError(f"{name}: expected an int or shape ({batch},) [batch], got {tuple(value.shape)}")
    value = _integer_array(name, value, (batch,))
    if _host_readable(value) and batch > 0 and int(value.min()) < 0:
        raise ValueError(f"{name}: negative token count {int(value.min())}")
    if _is_torch(value):
        return _saturated_int32(value).to(device=like.device if _is_torch(like) else value.device)
    return np.asarray(value).astype(np.int32, copy=False)


def _host_readable(x: Any) -> bool:
    """Whether x's values can be read without a device synchronisation, breaking a CUDA-graph
    capture or a torch.compile graph."""
    return not _is_torch(x) or not (x.is_cuda or _compiling())


def _check_kv_cache_args(q: Any, k_cache: Any, v_cache: Any, k: Any, v: Any,
                         cache_batch_idx: Any, page_table: Any) -> None:
    """What the in-place append relies on, checked before anything is written."""
    _rank("q", q, 4, "(batch, seqlen_q, nheads, headdim)")
    layout = "(num_blocks, page_size, nheads_k, headdim)" if page_table is not None else \
        "(batch_size_cache, seqlen_cache, nheads_k, headdim)"
    _rank("k_cache", k_cache, 4, layout)
    _rank("v_cache", v_cache, 4, layout)
    batch = q.shape[0]
    if tuple(v_cache.shape[:3]) != tuple(k_cache.shape[:3]):
        raise ValueError(f"v_cache: expected shape {tuple(k_cache.shape[:3])} + (headdim_v,) like k_cache, "
                         f"got {tuple(v_cache.shape)}")
    if page_table is not None:
        _rank("page_table", page_table, 2, "(batch, max_num_blocks_per_seq)")
        if page_table.shape[0] != batch:
            raise ValueError(f"page_table: expected {batch} rows [batch], got shape {tuple(page_table.shape)}")
        if cache_batch_idx is not None:
            raise NotImplementedError("cache_batch_idx: not supported with a paged cache (as in FlashAttention); "
                                      "index the page table instead")
        if k_cache.shape[1] > _MAX_PAGE_SIZE:
            raise ValueError(f"k_cache: page size {k_cache.shape[1]} (dimension 1 of the paged cache) not supported: "
                             f"expected 1..{_MAX_PAGE_SIZE}")
    elif cache_batch_idx is not None:
        _rank("cache_batch_idx", cache_batch_idx, 1, "(batch,)")
        if _is_torch(cache_batch_idx) != _is_torch(q):
            raise TypeError(f"cache_batch_idx: expected a {'torch.Tensor' if _is_torch(q) else 'numpy.ndarray'}, "
                            f"as q is, got {type(cache_batch_idx).__name__}")
        if cache_batch_idx.shape[0] != batch:
            raise ValueError(f"cache_batch_idx: expected shape ({batch},) [batch], got {tuple(cache_batch_idx.shape)}")
    elif k_cache.shape[0] != batch:
        raise ValueError(f"k_cache: expected {batch} sequences (dimension 0, q's batch) without cache_batch_idx, "
                         f"got shape {tuple(k_cache.shape)}")
    if (k is None) != (v is None):
        raise ValueError(f"{'v' if v is None else 'k'}: k and v are appended together; pass both or neither")
    if k is None:
        return
    # What attention() would refuse after the append, refused before it.
    if q.shape[3] != k_cache.shape[3]:
        raise ValueError(f"q: head dim {q.shape[3]} does not match k_cache's {k_cache.shape[3]}")
    if k_cache.shape[2] == 0 or q.shape[2] % k_cache.shape[2] != 0:
        raise ValueError(f"q: {q.shape[2]} heads are not a multiple of k_cache's {k_cache.shape[2]} (GQA/MQA)")
    # (The framework first: a torch dtype and a NumPy one of the same name differ.)
    if _is_torch(q) != _is_torch(k_cache) or (_is_torch(q) and q.device != k_cache.device):
        raise ValueError("q: must be on k_cache's device (and of its framework)")
    if q.dtype != k_cache.dtype:
        raise TypeError(f"q: dtype {q.dtype} does not match k_cache's {k_cache.dtype}")
    for name, new, cache in (("k", k, k_cache), ("v", v, v_cache)):
        _rank(name, new, 4, "(batch, seqlen_new, nheads_k, headdim)")
        want = (batch, k.shape[1]) + tuple(cache.shape[2:])
        if tuple(new.shape) != want:
            raise ValueError(f"{name}: expected shape {want} [batch, seqlen_new, nheads_k, headdim] to append to "
                             f"{name}_cache, got {tuple(new.shape)}")
        if _is_torch(new) != _is_torch(cache) or (_is_torch(new) and new.device != cache.device):
            raise ValueError(f"{name}: must be on {name}_cache's device (and of its framework)")
        if new.dtype != cache.dtype:
            raise TypeError(f"{name}: dtype {new.dtype} does not match {name}_cache's {cache.dtype}")


def _host_int64(x: Any) -> np.ndarray:
    """A host-readable index array or tensor (_host_readable) as an int64 NumPy array."""
    return np.asarray(x.numpy() if _is_torch(x) else x, dtype=np.int64)


def _host_lengths(raw: Any, batch: int) -> Optional[np.ndarray]:
    """cache_seqlens as passed, int64 (B), where the host can read it without a synchronisation
    (an int, an array, a CPU tensor, even when it travels on to q's device), else None (and
    while torch.compile traces: NumPy on the lengths would become data-dependent guards there)."""
    if _compiling():
        return None
    if isinstance(raw, (int, np.integer)):  # (a bool was refused by _int32_lengths)
        return np.full((batch,), int(raw), dtype=np.int64)
    if _host_readable(raw):
        return _host_int64(raw)
    return None


def _check_append_entries(k_cache: Any, k: Any, host_lengths: Optional[np.ndarray], cache_batch_idx: Any,
                          page_table: Any) -> None:
    """The entries of cache_seqlens, page_table and cache_batch_idx that place the append's
    tokens, where the host can read them: each error names its argument, before attention's own
    checks (which would name seqlens_k) and before anything is written. Device entries are not
    read here; append_kv writes no token whose position or page lies outside the cache."""
    if host_lengths is None or host_lengths.size == 0:
        return
    seqlen_new = k.shape[1]
    positions = host_lengths[:, None] + np.arange(seqlen_new, dtype=np.int64)[None, :]
    capacity = page_table.shape[1] * k_cache.shape[1] if page_table is not None else k_cache.shape[1]
    if int(positions.max()) >= capacity:
        raise ValueError(f"cache_seqlens: appending {seqlen_new} tokens at cache_seqlens overruns the cache of "
                         f"{capacity} tokens per sequence")
    if page_table is not None:
        if not _host_readable(page_table):
            return
        pages = np.take_along_axis(_host_int64(page_table), positions // k_cache.shape[1], axis=1)
        name, count = "page_table", k_cache.shape[0]
    elif cache_batch_idx is not None:
        if not _host_readable(cache_batch_idx):
            return
        pages, name, count = cache_batch_idx, "cache_batch_idx", k_cache.shape[0]
    else:
        return
    low, high = int(pages.min()), int(pages.max())
    if low < 0 or high >= count:
        raise ValueError(f"{name}: entries {low}..{high} where the append writes, outside the cache's "
                         f"{count} {'pages' if page_table is not None else 'sequences'}")


def _as_int32(value: Any) -> Any:
    """An index tensor or array as int32 (host entries were checked to fit; device ones pinned)."""
    return _saturated_int32(value) if _is_torch(value) else np.ascontiguousarray(value, dtype=np.int32)


def _check_cache_rows(k_cache: Any, cache_batch_idx: Any) -> None:
    """cache_batch_idx's entries, where the host can read them, name rows of the cache."""
    if _host_readable(cache_batch_idx) and cache_batch_idx.shape[0] > 0:
        low, high = int(cache_batch_idx.min()), int(cache_batch_idx.max())
        if low < 0 or high >= k_cache.shape[0]:
            raise ValueError(f"cache_batch_idx: entries {low}..{high}, outside the cache's {k_cache.shape[0]} sequences")


def _largest_page(seqlen_cache: int) -> int:
    """The largest page size (<= 256) that divides a contiguous cache's rows."""
    return next(p for p in range(min(seqlen_cache, _MAX_PAGE_SIZE), 0, -1) if seqlen_cache % p == 0)


def _rows_as_pages(cache: Any, page_size: int) -> Any:
    """A contiguous cache (Bc, S, Hkv, D) viewed as pages (Bc * S / page_size, page_size, Hkv, D),
    or None where its strides do not allow a view."""
    shape = (cache.shape[0] * cache.shape[1] // page_size, page_size) + tuple(cache.shape[2:])
    if _is_torch(cache):
        try:
            return cache.view(shape)
        except RuntimeError:
            return None
    try:
        return cache.reshape(shape, copy=False)  # NumPy >= 2.1: ValueError where a copy would be needed
    except ValueError:
        return None
    except TypeError:  # older NumPy has no `copy`; there a view's shape, set in place, refuses instead
        view = cache.view()
        try:
            view.shape = shape
        except AttributeError:
            return None
        return view


def _rows_stand_in(cache: Any, batch: int) -> Any:
    """An uninitialised (batch, S, Hkv, D) array of cache's dtype and device, like a gathered
    copy of `batch` of its rows."""
    shape = (batch,) + tuple(cache.shape[1:])
    return cache.new_empty(shape) if _is_torch(cache) else np.empty(shape, dtype=cache.dtype)


def _cache_rows_by_index(k_cache: Any, v_cache: Any, cache_batch_idx: Any,
                         gather: bool = True) -> tuple[Any, Any, Any]:
    """The cache rows cache_batch_idx (int32) picks, as paged K/V and a page table: the
    contiguous cache read in place through page-sized views (a gathered copy where its strides
    forbid a view; gather=False: uninitialised stand-ins of the copy's shape, dtype and device,
    for checks that read no keys)."""
    batch, seqlen_cache = cache_batch_idx.shape[0], k_cache.shape[1]
    if batch > 0 and k_cache.shape[0] == 0:
        raise ValueError(f"cache_batch_idx: picks rows of a cache of none, shape {tuple(k_cache.shape)}")
    if seqlen_cache == 0:
        pages_k, pages_v = None, None
    else:
        page_size = _largest_page(seqlen_cache)
        pages_k, pages_v = _rows_as_pages(k_cache, page_size), _rows_as_pages(v_cache, page_size)
    if pages_k is None or pages_v is None:
        if not gather:
            return _rows_stand_in(k_cache, batch), _rows_stand_in(v_cache, batch), None
        if _is_torch(k_cache):
            # Entries the host did not read are clamped, as the kernels clamp a page table's.
            idx = cache_batch_idx.to(torch.int64).clamp(0, max(k_cache.shape[0] - 1, 0))
            return k_cache.index_select(0, idx), v_cache.index_select(0, idx), None
        idx = np.asarray(cache_batch_idx, dtype=np.int64)
        return k_cache[idx], v_cache[idx], None
    per_row = seqlen_cache // page_size
    if _is_torch(cache_batch_idx):
        steps = torch.arange(per_row, dtype=torch.int64, device=cache_batch_idx.device)
        index = cache_batch_idx.to(torch.int64)  # int32 entries: no int64 wrap below
        table = _saturated_int32(index[:, None] * per_row + steps[None, :])
    else:
        first = np.asarray(cache_batch_idx, dtype=np.int32)[:, None] * per_row
        table = first + np.arange(per_row, dtype=np.int32)[None, :]
    return pages_k, pages_v, table


def _dtype_key(x: Any) -> str:
    """"bfloat16", "float16" or "float32" (what DecodePlan takes as a name) for torch and NumPy."""
    return str(x.dtype).replace("torch.", "")


def _device_key(x: Any) -> str:
    return str(x.device) if _is_torch(x) and x.is_cuda else "cpu"


# DecodePlans by problem shape (batch, q_per_seq, heads_q, heads_kv, head_dim, head_dim_v,
# max_seqlen_k, page_size, dtype, device); None for a shape the decode kernels do not take. A
# plain dict, so that torch.compile reads a plan made by an earlier eager call as a constant.
_PLANS: dict = {}
_MAX_PLANS = 64


def _decode_plan(key: tuple) -> Optional[DecodePlan]:
    """The DecodePlan for one shape, made once per shape; None where the decode kernels do not
    take it (a head dim they were not built for, fp32 on CUDA) or where it would have to be made
    inside a torch.compile trace, so that attention() runs instead."""
    if key in _PLANS:
        return _PLANS[key]
    if _compiling():
        return None
    plan = None
    batch, q_per_seq, heads_q, heads_kv, head_dim, head_dim_v, max_seqlen_k, page_size, dtype, device = key
    if not (device.startswith("cuda") and dtype == "float32"):
        try:
            plan = DecodePlan(batch, q_per_seq, heads_q, heads_kv, head_dim, head_dim_v, max_seqlen_k, page_size,
                              dtype=dtype, device=device, allocate_workspace=not device.startswith("cuda"))
        except (ValueError, TypeError):  # (a dtype the plan does not take: attention() names q)
            plan = None
    if len(_PLANS) >= _MAX_PLANS:  # forget the oldest shape
        del _PLANS[next(iter(_PLANS))]
    _PLANS[key] = plan
    return plan


def flash_attn_with_kvcache(q: Array, k_cache: Array, v_cache: Array, k: Optional[Array] = None,
                            v: Optional[Array] = None, rotary_cos: Optional[Array] = None,
                            rotary_sin: Optional[Array] = None, cache_seqlens: Union[int, Array, None] = None,
                            cache_batch_idx: Optional[Array] = None, cache_leftpad: Optional[Array] = None,
                            page_table: Optional[Array] = None, softmax_scale: Optional[float] = None,
                            causal: bool = False, window_size: Sequence[Optional[int]] = (-1, -1),
                            softcap: float = 0.0, rotary_interleaved: bool = True,
                            alibi_slopes: Optional[Array] = None, num_splits: int = 0,
                            return_softmax_lse: bool = False, *, block_table: Optional[Array] = None,
                            learnable_sink: Optional[Array] = None) -> Union[Array, Tuple[Array, Array]]:
    """FlashAttention's flash_attn_with_kvcache: attention of new queries over a KV cache,
    appending the new keys and values to the cache first.

    q (B, Sq, H, D). k_cache, v_cache: a contiguous cache (B_cache, S_cache, Hkv, D|Dv) whose row
    b (or cache_batch_idx[b], int (B)) holds sequence b, or with page_table (alias block_table,
    the name and position flash-attn 2.x gives it) int32 (B, max_blocks) a paged cache
    (num_blocks, page_size, Hkv, D|Dv), page_size 1..256. cache_seqlens, an int or int32 (B),
    is the number of tokens each sequence has in the cache; None means the whole cache.

    If k and v (B, S_new, Hkv, D|Dv) are given they are written into k_cache and v_cache IN
    PLACE at positions cache_seqlens[b] .. cache_seqlens[b] + S_new - 1, and attention then reads
    cache_seqlens[b] + S_new keys. Every argument is checked before the append writes, and the
    entries of cache_seqlens, page_table and cache_batch_idx too where they are on the host; on
    CUDA (read without a synchronisation) an entry that would write outside the cache, a
    negative one included, has those writes dropped, and attention reads lengths and pages
    clamped to the cache. Masks, scale, softcap and learnable_sink are as in flash_attn_func,
    causal aligned to the bottom right of each sequence's keys.

    Returns out (B, Sq, H, Dv), or (out, softmax_lse (B, H, Sq) float32) with
    return_softmax_lse. Up to 16 queries per sequence run flashbuf's split-KV decode, planned once
    per shape (num_splits=1 asks for the unsplit attention() path instead); longer queries run
    attention() over the cache. No host synchronisation with tensor cache_seqlens, so a call can
    be captured in a CUDA graph. rotary_cos/rotary_sin, cache_leftpad and alibi_slopes raise
    NotImplementedError.
    """
    _refuse_unsupported(rotary_cos=rotary_cos, rotary_sin=rotary_sin, cache_leftpad=cache_leftpad,
                        alibi_slopes=alibi_slopes)
    page_table, table_name = _page_table(page_table, block_table)
    if isinstance(num_splits, bool) or not isinstance(num_splits, (int, np.integer)) or num_splits < 0:
        raise ValueError(f"num_splits: expected an int >= 0 (0 = heuristic, 1 = no split), got {num_splits!r}")
    sinks = _sinks(learnable_sink, q)
    q, k, v = _unit_last_stride(q), _unit_last_stride(k), _unit_last_stride(v)
    # (The checks and the append name the page table as the caller did: block_table or page_table.)
    table_named = _CallersNames(page_table=table_name)
    with table_named:
        _check_kv_cache_args(q, k_cache, v_cache, k, v, cache_batch_idx, page_table)
        batch, seqlen_q = q.shape[0], q.shape[1]
        capacity = page_table.shape[1] * k_cache.shape[1] if page_table is not None else k_cache.shape[1]
        if cache_batch_idx is not None:
            cache_batch_idx = _as_int32(_integer_array("cache_batch_idx", cache_batch_idx, (batch,)))
        if page_table is not None:
            page_table = _integer_array("page_table", page_table, tuple(page_table.shape))
        appending = k is not None and k.shape[0] > 0 and k.shape[1] > 0
        if k is not None and cache_seqlens is None:
            raise ValueError("cache_seqlens: required with k and v (the positions to append them at)")
        raw_lengths = capacity if cache_seqlens is None else cache_seqlens
        lengths = _int32_lengths("cache_seqlens", raw_lengths, batch, q)
        append_at = lengths
        if appending:  # (cache_batch_idx's rows included)
            _check_append_entries(k_cache, k, _host_lengths(raw_lengths, batch), cache_batch_idx, page_table)
        elif cache_batch_idx is not None:
            _check_cache_rows(k_cache, cache_batch_idx)
    if k is not None:
        lengths = lengths + k.shape[1]

    keys, values, table = k_cache, v_cache, page_table
    if cache_batch_idx is not None:  # (rows to be copied: after the append, stand-ins for its checks)
        keys, values, table = _cache_rows_by_index(k_cache, v_cache, cache_batch_idx, gather=not appending)
    masks: dict[str, Any] = dict(causal=flag("causal", causal), window=_window(window_size), softcap=_softcap(softcap),
                                 scale=softmax_scale)
    return_lse = flag("return_softmax_lse", return_softmax_lse)

    # Every check of the attention that follows, made before the append writes into the cache
    # (under torch.compile the operators' fake functions make them while the graph is traced).
    # The checks of whichever runs: the decode plan's, or attention()'s.
    plan = None
    if 1 <= seqlen_q <= _MAX_DECODE_QUERIES and num_splits != 1:
        page_size = keys.shape[1] if table is not None else 0
        plan = _decode_plan((batch, seqlen_q, q.shape[2], keys.shape[2], q.shape[3], values.shape[3], capacity,
                             page_size, _dtype_key(q), _device_key(q)))
    # (The attention's errors name what the caller passed: the cache, its lengths, the sinks.)
    callers_names = _CallersNames(k="k_cache", v="v_cache", seqlens_k="cache_seqlens", sinks="learnable_sink",
                                  page_table=table_name)
    if appending and not _compiling():
        with callers_names:
            if plan is not None:
                plan._check(q, keys, values, lengths, table, **masks, **sinks)
            else:
                _check_attention(q, keys, values, seqlens_k=lengths, page_table=table, **masks, **sinks)
        # (Not under torch.compile: fake tensors have no addresses.)
        _refuse_inputs_in_cache(k_cache, v_cache, q=q, learnable_sink=sinks.get("sinks"))
    if appending:
        with table_named:
            append_kv(k_cache, v_cache, k, v, append_at, cache_batch_idx=cache_batch_idx, page_table=page_table)
        if cache_batch_idx is not None and table is None:  # the rows, copied now that they hold k and v
            keys, values, table = _cache_rows_by_index(k_cache, v_cache, cache_batch_idx)
    if plan is not None:
        # A workspace of this run's own: the cached plan is shared by every caller, thread and
        # stream, and a CUDA graph captured around this call keeps the allocator's block (the
        # plan may be forgotten, with a workspace of its own, while the graph still replays). A
        # CPU plan traced by torch.compile runs on its own one (a NumPy buffer is not traceable),
        # which no run writes: the CPU backend does not split, its workspace_bytes is 0.
        workspace = None if _compiling() and plan.device == "cpu" else plan.new_workspace()
        with callers_names:
            return plan.run(q, keys, values, lengths, table, return_lse=return_lse, workspace=workspace, **masks,
                            **sinks)
    with callers_names:
        return attention(q, keys, values, seqlens_k=lengths, page_table=table, return_lse=return_lse, **masks,
                         **sinks)
