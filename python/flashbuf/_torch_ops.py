"""flashbuf's entry points as PyTorch custom operators (torch.library), imported only when
PyTorch is installed.

Operators, rather than plain Python calls, let torch.compile trace through flashbuf (the
register_fake rules give output shapes and dtypes without running anything) and let CUDA-graph
capture record the launch: each operator runs on PyTorch's current stream and allocates its
outputs through PyTorch's allocator. Tensors reach the C++ library through DLPack without a
copy. All operators are forward only (no autograd formula is registered).

  flashbuf::attention       (q, k, v, ...) -> (o, lse)     lse is empty unless return_lse
  flashbuf::attention_out   same, writing into caller-provided out (and lse)
  flashbuf::decode          (q, k, v, seqlens_k, page_table, workspace, plan, ...) -> (o, lse)
  flashbuf::merge_states    (o_parts, lse_parts, return_lse) -> (o, lse)
"""
from __future__ import annotations

import contextlib
from typing import Optional

import torch
from torch import Tensor

from . import _C
from ._common import attention_output_shapes, decode_output_shapes, last, merge_output_shapes, PLAN_FIELDS


def _arg(t: Optional[Tensor]):
    # DLPack export refuses tensors that require grad; the operators are forward only.
    return None if t is None else t.detach()


def _stream(t: Tensor) -> int:
    return torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else 0


def _cpu_threads(t: Tensor) -> int:
    # The CPU backend runs on as many threads as torch itself would use (0 = its default).
    return 0 if t.is_cuda else torch.get_num_threads()


def _on_device(t: Tensor):
    return torch.cuda.device(t.device) if t.is_cuda else contextlib.nullcontext()


# ---- attention --------------------------------------------------------------------------------

def _attention_outputs(q: Tensor, v: Tensor, return_lse: bool) -> tuple[Tensor, Tensor]:
    o_shape, lse_shape = attention_output_shapes(tuple(q.shape), tuple(v.shape))
    o = q.new_empty(o_shape)
    lse = q.new_empty(lse_shape if return_lse else (0,), dtype=torch.float32)
    return o, lse


def _run_attention(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table, max_seqlen_q,
                   max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap, backend):
    with _on_device(q):
        last.name = _C.attention(
            _arg(q), _arg(k), _arg(v), _arg(out), _arg(lse), _arg(cu_seqlens_q), _arg(cu_seqlens_k),
            _arg(seqlens_k), _arg(page_table), max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left,
            window_right, softcap, _stream(q), backend, _cpu_threads(q))


@torch.library.custom_op("flashbuf::attention", mutates_args=())
def attention(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
              seqlens_k: Optional[Tensor], page_table: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int,
              softmax_scale: float, causal: bool, window_left: int, window_right: int, softcap: float,
              return_lse: bool, backend: str = "auto") -> tuple[Tensor, Tensor]:
    o, lse = _attention_outputs(q, v, return_lse)
    _run_attention(q, k, v, o, lse if return_lse else None, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table,
                   max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap, backend)
    return o, lse


@attention.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table, max_seqlen_q, max_seqlen_k, softmax_scale,
      causal, window_left, window_right, softcap, return_lse, backend="auto"):
    return _attention_outputs(q, v, return_lse)


@torch.library.custom_op("flashbuf::attention_out", mutates_args=("out", "lse"))
def attention_out(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Optional[Tensor],
                  cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor], seqlens_k: Optional[Tensor],
                  page_table: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float,
                  causal: bool, window_left: int, window_right: int, softcap: float, backend: str = "auto") -> None:
    _run_attention(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table, max_seqlen_q,
                   max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap, backend)


@attention_out.register_fake
def _(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table, max_seqlen_q, max_seqlen_k,
      softmax_scale, causal, window_left, window_right, softcap, backend="auto"):
    return None


# ---- decode -----------------------------------------------------------------------------------

def _decode_outputs(q: Tensor, plan: list[int], return_lse: bool) -> tuple[Tensor, Tensor]:
    f = dict(zip(PLAN_FIELDS, plan))
    o_shape, lse_shape = decode_output_shapes(f["batch"], f["q_per_seq"], f["heads_q"], f["head_dim_v"])
    o = q.new_empty(o_shape)
    lse = q.new_empty(lse_shape if return_lse else (0,), dtype=torch.float32)
    return o, lse


@torch.library.custom_op("flashbuf::decode", mutates_args=("workspace",))
def decode(q: Tensor, k: Tensor, v: Tensor, seqlens_k: Tensor, page_table: Optional[Tensor], workspace: Tensor,
           plan: list[int], softmax_scale: float, causal: bool, window_left: int, window_right: int,
           softcap: float, return_lse: bool) -> tuple[Tensor, Tensor]:
    o, lse = _decode_outputs(q, plan, return_lse)
    with _on_device(q):
        _C.decode(plan, _arg(q), _arg(k), _arg(v), _arg(seqlens_k), _arg(page_table), o,
                  lse if return_lse else None, workspace, softmax_scale, causal, window_left, window_right,
                  softcap, _stream(q), _cpu_threads(q))
    last.name = "decode" if q.is_cuda else "cpu"
    return o, lse


@decode.register_fake
def _(q, k, v, seqlens_k, page_table, workspace, plan, softmax_scale, causal, window_left, window_right, softcap,
      return_lse):
    return _decode_outputs(q, plan, return_lse)


# ---- merge_states -----------------------------------------------------------------------------

def _merge_outputs(o_parts: Tensor, lse_parts: Tensor, return_lse: bool) -> tuple[Tensor, Tensor]:
    o_shape, lse_shape = merge_output_shapes(tuple(o_parts.shape), tuple(lse_parts.shape))
    o = o_parts.new_empty(o_shape)
    lse = o_parts.new_empty(lse_shape if return_lse else (0,), dtype=torch.float32)
    return o, lse


@torch.library.custom_op("flashbuf::merge_states", mutates_args=())
def merge_states(o_parts: Tensor, lse_parts: Tensor, return_lse: bool) -> tuple[Tensor, Tensor]:
    o, lse = _merge_outputs(o_parts, lse_parts, return_lse)
    with _on_device(o_parts):
        last.name = _C.merge_states(_arg(o_parts), _arg(lse_parts), o, lse if return_lse else None,
                                    _stream(o_parts))
    return o, lse


@merge_states.register_fake
def _(o_parts, lse_parts, return_lse):
    return _merge_outputs(o_parts, lse_parts, return_lse)
