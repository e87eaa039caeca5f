"""flashbuf's entry points as PyTorch custom operators (torch.library), imported only when
PyTorch is installed.

Operators, rather than plain Python calls, let torch.compile trace through flashbuf (the
register_fake rules give output shapes and dtypes without running anything) and let CUDA-graph
capture record the launch: each operator runs on PyTorch's current stream and allocates its
outputs through PyTorch's allocator. Tensors reach the C++ library through DLPack without a
copy. All operators are forward only (no autograd formula is registered).

Every operator asks the library to check its inputs' metadata and to size its outputs before
it allocates anything (the fake functions make the same checks), and the library checks
everything again before the run launches or writes.

  flashbuf::attention       (q, k, v, ..., sinks) -> (o, lse)     lse is empty unless return_lse
  flashbuf::attention_out   same, writing into caller-provided out (and lse)
  flashbuf::decode          (q, k, v, seqlens_k, page_table, workspace, plan, ...) -> (o, lse)
  flashbuf::merge_states    (o_parts, lse_parts, return_lse) -> (o, lse)   LSEs in attention's layout
  flashbuf::append_kv       (k_cache, v_cache, k, v, cache_seqlens, cache_batch_idx, page_table,
                             check_inputs) -> None                    k, v written into the caches
"""
from __future__ import annotations

import contextlib
import inspect
from typing import Optional

import torch
from torch import Tensor

from . import _C
from ._common import last, merge_contract_inputs, merge_contract_outputs, merge_output_shapes

# The dtypes the library takes; anything else is refused here, naming the argument, before
# DLPack (which may not export it) is asked, told what the extension tells (_C.EXPECTED_DTYPES).
_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.int32: "int32"}


def _check(name: str, t: Optional[Tensor]) -> None:
    if t is None:
        return
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor (or None), got {type(t).__name__}")
    if t.is_nested or t.layout != torch.strided:  # (their sizes and strides are not a dense array's)
        raise TypeError(f"{name}: expected a dense (strided) tensor, got layout {'nested' if t.is_nested else t.layout}")
    if t.dtype not in _DTYPE_NAMES:
        raise TypeError(f"{name}: unsupported dtype {t.dtype}; {_C.EXPECTED_DTYPES}")
    if t.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{name}: tensors must live on the CPU or a CUDA device, got {t.device}")


def _check_required(name: str, t: Optional[Tensor]) -> None:
    """_check of a tensor the call cannot do without: None is refused as the library refuses it."""
    if t is None:
        raise ValueError(f"{name}: required tensor is missing")
    _check(name, t)


def _refuse_negative_view(name: str, t: Optional[Tensor]) -> None:
    """Refuses a negative view, whose values are the negation of its memory: the library reads (or
    writes) the memory as it is. Asked in the operators' bodies and fake rules, where every call
    passes (torch.compile traces them with fake tensors; is_neg() itself does not trace), and
    where the dispatcher has not already materialised the view."""
    if t is not None and t.is_neg():
        raise ValueError(f"{name}: a negative view (is_neg(), e.g. x.conj().imag) is not supported; "
                         "pass x.resolve_neg()")


def _arg(name: str, t: Optional[Tensor]):
    # DLPack export refuses tensors that require grad; the operators are forward only.
    _check(name, t)
    _refuse_negative_view(name, t)
    return None if t is None else t.detach()


def _describe(name: str, t: Optional[Tensor]):
    """A tensor's metadata for the library's checks without data (fake tensors)."""
    _check(name, t)
    _refuse_negative_view(name, t)
    if t is None:
        return None
    return (_DTYPE_NAMES[t.dtype], tuple(t.shape), tuple(t.stride()), t.device.type, t.device.index or 0)


def _stream(t: Tensor) -> int:
    return torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else 0


def _cpu_threads(t: Tensor) -> int:
    # The CPU backend runs on as many threads as torch itself would use (0 = its default).
    return 0 if t.is_cuda else torch.get_num_threads()


def _on_device(t: Tensor):
    return torch.cuda.device(t.device) if t.is_cuda else contextlib.nullcontext()


# ---- calling the operators --------------------------------------------------------------------

# Each operator's Python body, for run(): (body, positions of the arguments it mutates).
_BODIES: dict = {}


def _operator(name: str, mutates_args: tuple = ()):
    """torch.library.custom_op("flashbuf::<name>"), keeping the body for run()."""
    def register(body):
        params = list(inspect.signature(body).parameters)
        _BODIES[name] = (body, tuple(params.index(arg) for arg in mutates_args))
        return torch.library.custom_op(f"flashbuf::{name}", mutates_args=mutates_args)(body)
    return register


try:
    from torch.utils._python_dispatch import _get_current_dispatch_mode
    _tracing_state = torch._C._get_tracing_state
    _functorch_active = torch._C._are_functorch_transforms_active
except (ImportError, AttributeError):  # an older PyTorch: always through the dispatcher
    def _get_current_dispatch_mode():
        return True


def _through_dispatcher(args) -> bool:
    """Whether a call must go through PyTorch's dispatcher: under torch.compile (the fake rules
    give shapes), torch.jit.trace (which records only what the dispatcher sees) or a functorch
    transform (vmap, grad: its tensors are wrappers), under a dispatch mode (tracers, fake
    tensors, FLOP counters see the operator), on tensor subclasses, or where autograd records
    the call (an input requires grad under grad mode: a backward then raises, since the
    operators register no formula). Elsewhere, eager inference, the dispatcher's Python layers
    cost tens of microseconds a call for nothing."""
    if torch.compiler.is_compiling() or _get_current_dispatch_mode() is not None:
        return True
    if _tracing_state() is not None or _functorch_active():
        return True
    grad = torch.is_grad_enabled()
    for a in args:
        if isinstance(a, Tensor) and (type(a) is not Tensor or (grad and a.requires_grad)):
            return True
    return False


def run(name: str, *args):
    """torch.ops.flashbuf.<name>(*args) (positional, in the schema's order), or, where the
    dispatcher would add nothing, its body called directly, bumping the version counters of the
    tensors it writes as the dispatcher would."""
    if _through_dispatcher(args):
        return getattr(torch.ops.flashbuf, name)(*args)
    body, mutated = _BODIES[name]
    result = body(*args)
    for i in mutated:
        if args[i] is not None and not args[i].is_inference():  # (inference tensors keep no count)
            torch.autograd.graph.increment_version(args[i])
    return result


def _empty_outputs(like: Tensor, shapes, return_lse: bool) -> tuple[Tensor, Tensor]:
    o_shape, lse_shape = shapes
    o = like.new_empty(o_shape)
    lse = like.new_empty(lse_shape if return_lse else (0,), dtype=torch.float32)
    return o, lse


# ---- attention --------------------------------------------------------------------------------

_ATTENTION_INPUTS = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "seqlens_k", "page_table")


def _attention_shapes(tensors, scalars, metadata_only: bool, sinks=None):
    """(o shape, lse shape), after the library checked the inputs: the operators allocate only
    then. metadata_only: the checks of shapes, strides, dtypes and devices alone, from
    descriptions (nothing is dereferenced), which is all the shapes depend on; the operators
    take these, since the run checks everything again before it launches or writes (a second
    DLPack export of every tensor would only repeat it). The full checks are for a caller that
    writes before the run (flash_attn_with_kvcache's append)."""
    convert = _describe if metadata_only else _arg
    inputs = [convert(name, t) for name, t in zip(_ATTENTION_INPUTS, tensors)]
    return _C.attention_shapes(*inputs, *scalars, sinks=convert("sinks", sinks), metadata_only=metadata_only)


def _run_attention(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table, max_seqlen_q,
                   max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap, backend, sinks,
                   check_inputs):
    with _on_device(q):
        last.name = _C.attention(
            _arg("q", q), _arg("k", k), _arg("v", v), _arg("out", out), _arg("lse", lse),
            _arg("cu_seqlens_q", cu_seqlens_q), _arg("cu_seqlens_k", cu_seqlens_k), _arg("seqlens_k", seqlens_k),
            _arg("page_table", page_table), max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left,
            window_right, softcap, _stream(q), backend, sinks=_arg("sinks", sinks), check_inputs=check_inputs,
            num_threads=_cpu_threads(q))


@_operator("attention")
def attention(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
              seqlens_k: Optional[Tensor], page_table: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int,
              softmax_scale: float, causal: bool, window_left: int, window_right: int, softcap: float,
              return_lse: bool, backend: str = "auto", sinks: Optional[Tensor] = None,
              check_inputs: bool = False) -> tuple[Tensor, Tensor]:
    scalars = (max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap)
    shapes = _attention_shapes((q, k, v, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table), scalars,
                               metadata_only=True, sinks=sinks)
    o, lse = _empty_outputs(q, shapes, return_lse)
    _run_attention(q, k, v, o, lse if return_lse else None, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table,
                   max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap, backend,
                   sinks, check_inputs)
    return o, lse


@attention.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table, max_seqlen_q, max_seqlen_k, softmax_scale,
      causal, window_left, window_right, softcap, return_lse, backend="auto", sinks=None, check_inputs=False):
    scalars = (max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap)
    shapes = _attention_shapes((q, k, v, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table), scalars,
                               metadata_only=True, sinks=sinks)
    return _empty_outputs(q, shapes, return_lse)


@_operator("attention_out", mutates_args=("out", "lse"))
def attention_out(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Optional[Tensor],
                  cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor], seqlens_k: Optional[Tensor],
                  page_table: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float,
                  causal: bool, window_left: int, window_right: int, softcap: float, backend: str = "auto",
                  sinks: Optional[Tensor] = None, check_inputs: bool = False) -> None:
    _run_attention(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table, max_seqlen_q,
                   max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap, backend, sinks,
                   check_inputs)


@attention_out.register_fake
def _(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table, max_seqlen_q, max_seqlen_k,
      softmax_scale, causal, window_left, window_right, softcap, backend="auto", sinks=None, check_inputs=False):
    scalars = (max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap)
    o_shape, lse_shape = _attention_shapes((q, k, v, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table), scalars,
                                           metadata_only=True, sinks=sinks)
    if tuple(out.shape) != tuple(o_shape):
        raise ValueError(f"o: expected shape {tuple(o_shape)}, got {tuple(out.shape)}")
    if lse is not None and tuple(lse.shape) != tuple(lse_shape):
        raise ValueError(f"lse: expected shape {tuple(lse_shape)}, got {tuple(lse.shape)}")
    return None


# ---- decode -----------------------------------------------------------------------------------

_DECODE_INPUTS = ("q", "k", "v", "seqlens_k", "page_table")


def _decode_shapes(tensors, plan, scalars, metadata_only: bool, sinks=None):
    """(o shape, lse shape) of a decode run, as _attention_shapes."""
    convert = _describe if metadata_only else _arg
    inputs = [convert(name, t) for name, t in zip(_DECODE_INPUTS, tensors)]
    return _C.decode_shapes(plan, *inputs, *scalars, sinks=convert("sinks", sinks), metadata_only=metadata_only)


@_operator("decode", mutates_args=("workspace",))
def decode(q: Tensor, k: Tensor, v: Tensor, seqlens_k: Optional[Tensor], page_table: Optional[Tensor],
           workspace: Tensor, plan: list[int], softmax_scale: float, causal: bool, window_left: int,
           window_right: int, softcap: float, return_lse: bool, sinks: Optional[Tensor] = None,
           check_inputs: bool = False) -> tuple[Tensor, Tensor]:
    scalars = (softmax_scale, causal, window_left, window_right, softcap)
    shapes = _decode_shapes((q, k, v, seqlens_k, page_table), plan, scalars, metadata_only=True, sinks=sinks)
    o, lse = _empty_outputs(q, shapes, return_lse)
    with _on_device(q):
        _C.decode(plan, _arg("q", q), _arg("k", k), _arg("v", v), _arg("seqlens_k", seqlens_k),
                  _arg("page_table", page_table), o, lse if return_lse else None, workspace, softmax_scale, causal,
                  window_left, window_right, softcap, _stream(q), sinks=_arg("sinks", sinks), check_inputs=check_inputs,
            num_threads=_cpu_threads(q))
    last.name = "decode" if q.is_cuda else "cpu"
    return o, lse


@decode.register_fake
def _(q, k, v, seqlens_k, page_table, workspace, plan, softmax_scale, causal, window_left, window_right, softcap,
      return_lse, sinks=None, check_inputs=False):
    scalars = (softmax_scale, causal, window_left, window_right, softcap)
    shapes = _decode_shapes((q, k, v, seqlens_k, page_table), plan, scalars, metadata_only=True, sinks=sinks)
    return _empty_outputs(q, shapes, return_lse)


# ---- append_kv --------------------------------------------------------------------------------

@_operator("append_kv", mutates_args=("k_cache", "v_cache"))
def append_kv(k_cache: Tensor, v_cache: Tensor, k: Tensor, v: Tensor, cache_seqlens: Tensor,
              cache_batch_idx: Optional[Tensor], page_table: Optional[Tensor], check_inputs: bool = False) -> None:
    with _on_device(k_cache):
        _C.append_kv(_arg("k_cache", k_cache), _arg("v_cache", v_cache), _arg("k", k), _arg("v", v),
                     _arg("cache_seqlens", cache_seqlens), _arg("cache_batch_idx", cache_batch_idx),
                     _arg("page_table", page_table), _stream(k_cache), check_inputs=check_inputs)


@append_kv.register_fake
def _(k_cache, v_cache, k, v, cache_seqlens, cache_batch_idx, page_table, check_inputs=False):
    _C.append_kv_check(_describe("k_cache", k_cache), _describe("v_cache", v_cache), _describe("k", k),
                       _describe("v", v), _describe("cache_seqlens", cache_seqlens),
                       _describe("cache_batch_idx", cache_batch_idx), _describe("page_table", page_table),
                       metadata_only=True)
    return None


# ---- merge_states -----------------------------------------------------------------------------

def _merge_inputs(o_parts, lse_parts):
    """(o shape, lse shape) in attention's layouts and the inputs as the C++ contract's views
    (merge_contract_inputs), after the library checked those views' metadata: the operator
    allocates only then (the run checks everything again, as _attention_shapes says)."""
    _check("o_parts", o_parts)
    _check("lse_parts", lse_parts)
    shapes = merge_output_shapes(tuple(o_parts.shape), tuple(lse_parts.shape))
    op_view, lp_view = merge_contract_inputs(o_parts.detach(), lse_parts.detach())
    _C.merge_shapes(_describe("o_parts", op_view), _describe("lse_parts", lp_view), metadata_only=True)
    return shapes, op_view, lp_view


@_operator("merge_states")
def merge_states(o_parts: Tensor, lse_parts: Tensor, return_lse: bool) -> tuple[Tensor, Tensor]:
    shapes, op_view, lp_view = _merge_inputs(o_parts, lse_parts)
    o, lse = _empty_outputs(o_parts, shapes, return_lse)
    o_view, lse_view, finish = merge_contract_outputs(o, lse if return_lse else None)
    with _on_device(o_parts):
        last.name = _C.merge_states(op_view, lp_view, o_view, lse_view, _stream(o_parts))
    finish()
    return o, lse


@merge_states.register_fake
def _(o_parts, lse_parts, return_lse):
    return _empty_outputs(o_parts, _merge_inputs(o_parts, lse_parts)[0], return_lse)
