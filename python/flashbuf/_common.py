"""Helpers shared by the NumPy path (_api.py) and the PyTorch operators (_torch_ops.py).

Output shapes live here once, because the eager code, the fake-tensor rules of the operators
and the tests must agree on them. The layouts are those of include/flashbuf/flashbuf.hpp.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Sequence, Tuple, Union

import numpy as np

if TYPE_CHECKING:  # annotations only: the package works without PyTorch
    import torch

# What the entry points take and return: PyTorch tensors (CPU or CUDA) or NumPy arrays.
Array = Union["torch.Tensor", np.ndarray]
# A sliding window (left, right), -1 for an unbounded side.
Window = Tuple[int, int]

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


def int32(name: str, value: Any) -> int:
    """An int argument as the C++ API takes it (int), or a ValueError/TypeError naming it."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    try:
        value = int(value.__index__())
    except TypeError:  # an array with __index__ that refuses it (NumPy's of bools, or of several elements)
        raise TypeError(f"{name}: expected an int, got {type(value).__name__} {value!r:.40}") from None
    if not -INT32_MAX - 1 <= value <= INT32_MAX:
        raise ValueError(f"{name}: {value} is outside the int32 range the library takes")
    return value


def real(name: str, value: Any) -> float:
    """A float argument, or a TypeError naming it (text and bools, which float() would take, too)."""
    if isinstance(value, (str, bytes, bool)):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__}") from None


def flag(name: str, value: Any) -> bool:
    """A bool argument: True/False (NumPy's, 0-d NumPy bool arrays and 0-d integer tensors' too)
    or the ints 0 and 1, else a TypeError naming it. Text is refused because bool() would read
    "False" as true, and arrays because a mask per element is not what the flag means."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]  # its scalar: np.bool_, or a NumPy number
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if not isinstance(value, (str, bytes)) and hasattr(value, "__index__") and getattr(value, "ndim", 0) == 0:
        try:
            index = value.__index__()
        except TypeError:  # one whose __index__ refuses it (a 0-d float tensor)
            index = None
        if index in (0, 1):
            return bool(index)
    raise TypeError(f"{name}: expected a bool, got {type(value).__name__} {value!r:.40}")


def window_pair(window: Window | None) -> tuple[int, int]:
    """(left, right) with -1 for an unbounded side; None means no window."""
    if window is None:
        return -1, -1
    try:
        left, right = window
    except (TypeError, ValueError):
        raise ValueError(f"window: expected a pair (left, right) of ints, -1 for unbounded; got {window!r}") from None
    return (window_side("window[0]", left, "mask.window_left"),
            window_side("window[1]", right, "mask.window_right"))


def window_side(name: str, value: Any, side: str | None = None) -> int:
    """One side of a window: an int (named `name`) >= -1, -1 meaning unbounded; below -1 the
    error names `side` (the library's name for it, by default `name`), as the library's own
    check would, which the Python binding's mask, reading any negative side as unbounded, never
    reaches."""
    value = int32(name, value)
    if value < -1:
        raise ValueError(f"{side or name}: expected >= -1 (-1 = unbounded), got {value}")
    return value


# Magnitudes that float32 rounds to 0 (at most 2^-150) or to infinity (from its largest finite
# value plus half a unit in the last place, 2^128 - 2^103).
_FLOAT32_ROUNDS_TO_ZERO = 2.0**-150
_FLOAT32_ROUNDS_TO_INF = 2.0**128 - 2.0**103


def as_float32(name: str, value: float) -> float:
    """value, refused (named) where the library's float would turn it from nonzero into 0 (which
    the library reads as "the default" or "off") or from finite into infinity. Plain comparisons,
    so that torch.compile traces them."""
    if value != 0.0 and math.isfinite(value) and not _FLOAT32_ROUNDS_TO_ZERO < abs(value) < _FLOAT32_ROUNDS_TO_INF:
        raise ValueError(f"{name}: {value} is outside float32's range (the library takes a float)")
    return value


def softmax_scale(scale: float | None) -> float:
    """0.0 tells the library to use 1/sqrt(head_dim)."""
    if scale is None:
        return 0.0
    scale = real("scale", scale)
    if not math.isfinite(scale) or scale <= 0.0:
        raise ValueError(f"scale: expected a positive finite number, got {scale}")
    return as_float32("scale", scale)


def attention_output_shapes(q_shape: Sequence[int], v_shape: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
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


def decode_output_shapes(batch: int, q_per_seq: int, heads_q: int,
                         head_dim_v: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(o shape, lse shape) of a decode step: o (B, q_per_seq, Hq, Dv), lse (B, Hq, q_per_seq)."""
    return (batch, q_per_seq, heads_q, head_dim_v), (batch, heads_q, q_per_seq)


def merge_output_shapes(o_parts_shape: Sequence[int],
                        lse_parts_shape: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(o shape, lse shape) of merge_states, in attention's layouts:
    varlen o_parts (N, T, H, Dv) with lse_parts (N, H, T) -> o (T, H, Dv), lse (H, T);
    batch  o_parts (N, B, S, H, Dv) with lse_parts (N, B, H, S) -> o (B, S, H, Dv), lse (B, H, S)."""
    o_parts_shape, lse_parts_shape = tuple(o_parts_shape), tuple(lse_parts_shape)
    want: tuple[int, ...]
    o_shape: tuple[int, ...]
    lse_shape: tuple[int, ...]
    if len(o_parts_shape) == 4:
        n, t, h, dv = o_parts_shape
        want, names = (n, h, t), "(num_parts, heads, tokens)"
        o_shape, lse_shape = (t, h, dv), (h, t)
    elif len(o_parts_shape) == 5:
        n, b, s, h, dv = o_parts_shape
        want, names = (n, b, h, s), "(num_parts, batch, heads, seqlen)"
        o_shape, lse_shape = (b, s, h, dv), (b, h, s)
    else:
        raise ValueError(f"o_parts: expected rank 4 (num_parts, tokens, heads, head_dim_v) or rank 5 (num_parts, "
                         f"batch, seqlen, heads, head_dim_v), got shape {o_parts_shape}")
    if lse_parts_shape != want:
        raise ValueError(f"lse_parts: expected shape {want} {names}, attention's LSE layout, for o_parts of shape "
                         f"{o_parts_shape}; got {lse_parts_shape}")
    return o_shape, lse_shape


def merge_contract_inputs(o_parts: Array, lse_parts: Array) -> tuple[Array, Array]:
    """merge_states' inputs (NumPy arrays or torch tensors, of the shapes merge_output_shapes
    accepted) as the C++ contract takes them: o_parts (N, T, H, Dv), lse_parts (N, T, H) with
    any strides. Varlen needs only a transposed view; the batch form flattens (B, S) into T,
    which copies lse_parts (and o_parts if not contiguous) unless S or H is 1."""
    if o_parts.ndim == 4:
        return o_parts, lse_parts.swapaxes(1, 2)
    n, b, s, h, dv = o_parts.shape
    return o_parts.reshape(n, b * s, h, dv), lse_parts.swapaxes(2, 3).reshape(n, b * s, h)


def merge_contract_outputs(o: Array, lse: Array | None) -> tuple[Array, Array | None, Callable[[], None]]:
    """merge_states' outputs (freshly allocated, in attention's layouts: o (T, H, Dv) or
    (B, S, H, Dv), lse (H, T) or (B, H, S)) as the C++ contract takes them: o (T, H, Dv),
    lse (T, H). The batch form writes lse through a scratch (B * S, H) buffer unless S or H
    is 1. Returns the two views and a function to call after the merge ran (it copies the
    scratch LSE back; otherwise it does nothing)."""
    def nothing() -> None:
        return None

    if o.ndim == 3:
        return o, None if lse is None else lse.swapaxes(0, 1), nothing
    b, s, h, dv = o.shape
    ov = o.reshape(b * s, h, dv)
    if lse is None:
        return ov, None, nothing
    if s == 1 or h == 1:  # (B, H, S) transposed flattens to (B * S, H) without a copy
        return ov, lse.swapaxes(1, 2).reshape(b * s, h), nothing
    scratch = lse.new_empty((b * s, h)) if hasattr(lse, "new_empty") else np.empty((b * s, h), dtype=lse.dtype)

    def copy_back() -> None:
        lse[...] = scratch.reshape(b, s, h).swapaxes(1, 2)

    return ov, scratch, copy_back


# The order of the plan tuple returned by _C.plan_decode (python/src/flashbuf_ext.cpp).
PLAN_FIELDS = ("batch", "q_per_seq", "heads_q", "heads_kv", "head_dim", "head_dim_v", "max_seqlen_k",
               "page_size", "dtype", "device", "device_index", "num_splits", "keys_per_split",
               "workspace_bytes")
WORKSPACE_ALIGNMENT = 256  # bytes, as flashbuf::DecodeArgs requires
