"""Helpers shared by the NumPy path (_api.py) and the PyTorch operators (_torch_ops.py).

Output shapes live here once, because the eager code, the fake-tensor rules of the operators
and the tests must agree on them. The layouts are those of include/flashbuf/flashbuf.hpp.
"""
from __future__ import annotations

import math

try:  # NumPy has no bfloat16; ml_dtypes provides one when installed.
    import ml_dtypes as _ml_dtypes

    NUMPY_BF16 = _ml_dtypes.bfloat16
except ImportError:  # pragma: no cover - depends on the environment
    NUMPY_BF16 = None


class _LastBackend:
    """The flashbuf backend ('cpu', 'sm80', 'sm90', 'decode') of the latest eager call."""

    name: str | None = None


last = _LastBackend()


INT32_MAX = 2**31 - 1


def int32(name: str, value) -> int:
    """An int argument as the C++ API takes it (int), or a ValueError/TypeError naming it."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    value = int(value.__index__())
    if not -INT32_MAX - 1 <= value <= INT32_MAX:
        raise ValueError(f"{name}: {value} is outside the int32 range the library takes")
    return value


def real(name: str, value) -> float:
    """A float argument, or a TypeError naming it."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__}") from None


def window_pair(window) -> tuple[int, int]:
    """(left, right) with -1 for an unbounded side; None means no window."""
    if window is None:
        return -1, -1
    try:
        left, right = window
    except (TypeError, ValueError):
        raise ValueError(f"window: expected a pair (left, right) of ints, -1 for unbounded; got {window!r}") from None
    return int32("window[0]", left), int32("window[1]", right)


def softmax_scale(scale) -> float:
    """0.0 tells the library to use 1/sqrt(head_dim)."""
    if scale is None:
        return 0.0
    scale = real("scale", scale)
    if not math.isfinite(scale) or scale <= 0.0:
        raise ValueError(f"scale: expected a positive finite number, got {scale}")
    return scale


def attention_output_shapes(q_shape, v_shape) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(o shape, lse shape) for attention: batch (B, Sq, Hq, D) or varlen (Tq, Hq, D) queries."""
    if len(v_shape) not in (3, 4):
        raise ValueError(
            f"v: expected rank 4 (batch, seqlen, heads, head_dim_v), (pages, page_size, heads, "
            f"head_dim_v) or rank 3 (total_tokens, heads, head_dim_v); got rank {len(v_shape)}")
    dv = int(v_shape[-1])
    if len(q_shape) == 4:
        b, s, h, _ = q_shape
        return (b, s, h, dv), (b, h, s)
    if len(q_shape) == 3:
        t, h, _ = q_shape
        return (t, h, dv), (h, t)
    raise ValueError(
        f"q: expected rank 4 (batch, seqlen, heads, head_dim) or rank 3 (total_tokens, heads, "
        f"head_dim) with cu_seqlens_q; got rank {len(q_shape)}")


def decode_output_shapes(batch: int, q_per_seq: int, heads_q: int, head_dim_v: int):
    """(o shape, lse shape) of a decode step: o (B, q_per_seq, Hq, Dv), lse (B, Hq, q_per_seq)."""
    return (batch, q_per_seq, heads_q, head_dim_v), (batch, heads_q, q_per_seq)


def merge_output_shapes(o_parts_shape, lse_parts_shape):
    """(o shape, lse shape) of merge_states: o_parts (N, T, H, Dv) -> o (T, H, Dv), lse (T, H)."""
    if len(o_parts_shape) != 4:
        raise ValueError(f"o_parts: expected rank 4 (parts, tokens, heads, head_dim_v), got rank {len(o_parts_shape)}")
    _, t, h, dv = o_parts_shape
    return (t, h, dv), (t, h)


# The order of the plan tuple returned by _C.plan_decode (python/src/flashbuf_ext.cpp).
PLAN_FIELDS = ("batch", "q_per_seq", "heads_q", "heads_kv", "head_dim", "head_dim_v", "max_seqlen_k",
               "page_size", "dtype", "device", "device_index", "num_splits", "keys_per_split",
               "workspace_bytes")
WORKSPACE_ALIGNMENT = 256  # bytes, as flashbuf::DecodeArgs requires
