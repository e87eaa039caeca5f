"""The public Python API: attention, DecodePlan, merge_states.

Each entry point accepts either PyTorch tensors (CPU or CUDA; run through the operators of
_torch_ops.py by _torch_ops.run, so that torch.compile and CUDA graphs see them) or NumPy
arrays (CPU backend, called here directly). Outputs are allocated here or by the operators,
never by C++, and only after the C++ library has checked the inputs and given the output
shapes (_C.*_shapes); every check is the library's, whose flashbuf::ArgumentError arrives as
ValueError (or TypeError for dtypes) naming the argument. docs/errors.md lists them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

# PyTorch, when installed, is imported before the extension: torch loads its own CUDA runtime
# (libcudart) and flashbuf._C then binds to that copy, as in any process that imported torch
# first (the benchmark). Loading _C first would make the toolkit's libcudart, found through
# _C's run path, the one torch gets too when both have the same soname; a process must never
# depend on which module happened to be imported first.
try:
    import torch
except ImportError:  # the package works on NumPy alone
    torch = None

from . import _C
from ._common import (NUMPY_BF16, PLAN_FIELDS, WORKSPACE_ALIGNMENT, Array, Window, as_float32, flag,
                      attention_output_shapes, int32, last,
                      merge_contract_inputs, merge_contract_outputs, merge_output_shapes, real, softmax_scale,
                      window_pair)

_torch_ops = None
if torch is not None:
    try:
        from . import _torch_ops
    except ImportError:  # as before: without the operators, torch tensors are not accepted
        torch = None


def _is_torch(x) -> bool:
    return torch is not None and isinstance(x, torch.Tensor)


def _torch_form(*tensors) -> bool:
    """Whether a call takes the torch path: any of its main tensors is a torch.Tensor (so that a
    missing or mistyped one is named as such, not as the first torch tensor in a NumPy call)."""
    return any(_is_torch(t) for t in tensors)


def _compiling() -> bool:
    """Whether torch.compile is tracing this call (False without PyTorch)."""
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling())


# ---- NumPy plumbing ---------------------------------------------------------------------------

_NUMPY_DTYPES = (np.float16, np.float32, np.int32)


def _np_in(name: str, a):
    """A NumPy array as the C++ binding takes it (bfloat16 travels as its uint16 bits)."""
    if a is None:
        return None
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name}: expected a numpy.ndarray (or torch.Tensor inputs throughout), got {type(a).__name__}")
    if isinstance(a, np.ma.MaskedArray):  # (its mask would be ignored: the values under it are read)
        raise TypeError(f"{name}: a numpy.ma.MaskedArray; pass a plain array (a.filled(...) or np.ma.getdata(a))")
    if a.dtype == np.uint16:  # would be read as bfloat16 bits (see _C)
        raise TypeError(f"{name}: dtype uint16 is not supported; {_C.EXPECTED_DTYPES}")
    if NUMPY_BF16 is not None and a.dtype == NUMPY_BF16:
        return a.view(np.uint16)
    if a.dtype not in _NUMPY_DTYPES:  # float8, float64, ...: named here, before DLPack
        raise TypeError(f"{name}: unsupported dtype {a.dtype}; {_C.EXPECTED_DTYPES}")
    return a


def _np_empty(shape, dtype):
    return np.empty(shape, dtype=dtype)


def _check_named(required: tuple[str, ...] = (), **tensors) -> None:
    """torch inputs checked by name (dtype, device, layout; `required` ones present), so that
    errors name the argument before torch's own schema check does."""
    for name, t in tensors.items():
        (_torch_ops._check_required if name in required else _torch_ops._check)(name, t)


# ---- attention --------------------------------------------------------------------------------

def attention(q: Array, k: Array, v: Array, *, causal: bool = False, window: Window | None = (-1, -1),
              softcap: float = 0.0, scale: float | None = None, cu_seqlens_q: Array | None = None,
              cu_seqlens_k: Array | None = None, max_seqlen_q: int | None = None, max_seqlen_k: int | None = None,
              seqlens_k: Array | None = None, page_table: Array | None = None, return_lse: bool = False,
              out: Array | None = None, backend: str = "auto",
              sinks: Array | None = None, check_inputs: bool = False) -> Array | tuple[Array, Array]:
    """Exact softmax attention, softmax(scale * q k^T + mask) v, in FlashAttention's layout.

    Batch:  q (B, Sq, Hq, D), k (B, Sk, Hkv, D), v (B, Sk, Hkv, Dv) -> o (B, Sq, Hq, Dv),
            lse (B, Hq, Sq) float32; with int32 seqlens_k (B), k and v are a cache of Sk rows
            of which sequence b uses its first seqlens_k[b].
    Varlen: q (Tq, Hq, D), k (Tk, Hkv, D), v (Tk, Hkv, Dv) packed, with int32 cu_seqlens_q and
            cu_seqlens_k (B + 1 offsets) -> o (Tq, Hq, Dv), lse (Hq, Tq).
    Paged:  k (pages, page_size, Hkv, D), v (pages, page_size, Hkv, Dv), int32 page_table
            (B, max_pages) and seqlens_k (B); q in the batch or varlen form.

    Hq must be a multiple of Hkv (GQA/MQA). causal and window are bottom-right aligned: query i
    of a sequence sits at key position i + Sk - Sq; window (left, right) keeps keys within
    [pos - left, pos + right], -1 meaning unbounded; causal is window (left, 0). softcap > 0
    applies softcap * tanh(s / softcap) to the scaled scores. scale defaults to 1/sqrt(D). A row
    that sees no key gets o = 0 and lse = -inf.

    sinks: optional float32 (Hq,), a learned sink logit per query head (gpt-oss), in the units
    of the scaled, soft-capped scores. It joins each row's softmax denominator and adds no value:
    o = sum_j exp(s_j - m) v_j / (sum_j exp(s_j - m) + exp(sink - m)), m = max(max_j s_j, sink);
    the returned lse includes it, and a row that sees no key gets o = 0 and lse = sink.

    Tensors: torch tensors on CUDA (run on the current stream, no copies) or the CPU, or NumPy
    arrays (bfloat16 through ml_dtypes). Returns o, or (o, lse) with return_lse. out, if given,
    receives o. max_seqlen_q/k bound the varlen lengths; omitted, the library takes the longest
    sequence from host offsets, or the total rows for CUDA offsets (no device read: more empty
    blocks, so pass them when known). backend: "auto" (the fastest kernel for the device and
    head dims), or "cpu", "sm80" (mma.sync kernel), "sm90" (Hopper wgmma kernel) explicitly.

    Index tensors on the GPU (cu_seqlens_*, seqlens_k, page_table) are not read by the host, so
    a call never synchronises; check_inputs=True checks their entries too (a copy and a stream
    synchronisation). Unchecked, a bad entry gives wrong rows, never an out-of-bounds access.
    """
    if not isinstance(backend, str):
        raise TypeError(f"backend: expected a string ('auto', 'cpu', 'sm80', 'sm90'), got {type(backend).__name__}")
    scalars = _attention_scalars(causal, window, softcap, scale, max_seqlen_q, max_seqlen_k)
    return_lse = flag("return_lse", return_lse)
    check_inputs = flag("check_inputs", check_inputs)

    if _torch_form(q, k, v):
        _check_named(("q", "k", "v"), q=q, k=k, v=v, out=out, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                     seqlens_k=seqlens_k, page_table=page_table, sinks=sinks)
        if out is None:
            o, lse = _torch_ops.run("attention", q, k, v, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table,
                                    *scalars, return_lse, backend, sinks, check_inputs)
            return (o, lse) if return_lse else o
        _refuse_out_under_autograd(q=q, k=k, v=v, sinks=sinks, out=out)
        lse = None
        if return_lse:
            if _compiling():  # the shape from q's alone (a library call is not traceable); the
                _, lse_shape = attention_output_shapes(q.shape, v.shape)  # operator's fake checks the rest
            else:
                tensors = (q, k, v, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table)
                _, lse_shape = _torch_ops._attention_shapes(tensors, scalars, metadata_only=True, sinks=sinks)
            lse = q.new_empty(lse_shape, dtype=torch.float32)
        _torch_ops.run("attention_out", q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqlens_k, page_table,
                       *scalars, backend, sinks, check_inputs)
        return (out, lse) if return_lse else out

    inputs = (_np_in("q", q), _np_in("k", k), _np_in("v", v), _np_in("cu_seqlens_q", cu_seqlens_q),
              _np_in("cu_seqlens_k", cu_seqlens_k), _np_in("seqlens_k", seqlens_k), _np_in("page_table", page_table))
    sinks_in = _np_in("sinks", sinks)
    o_shape, lse_shape = _C.attention_shapes(*inputs, *scalars, sinks=sinks_in)
    o = _np_empty(o_shape, q.dtype) if out is None else out
    lse = _np_empty(lse_shape, np.float32) if return_lse else None
    q_in, k_in, v_in, cu_q, cu_k, lens_k, table = inputs
    last.name = _C.attention(q_in, k_in, v_in, _np_in("out", o), lse, cu_q, cu_k, lens_k, table, *scalars, 0, backend,
                             sinks=sinks_in, check_inputs=check_inputs)
    return (o, lse) if return_lse else o


def _refuse_out_under_autograd(**tensors) -> None:
    """PyTorch's rule for functions with out=: none under autograd. A write into `out` is not
    one autograd can record, so an `out` that requires grad would keep its old graph (its
    gradients silently wrong), and one written from inputs that require grad would carry none."""
    if not torch.is_grad_enabled():
        return
    for name, t in tensors.items():
        if t is not None and t.requires_grad:
            raise RuntimeError(f"{name}: requires grad, and attention() with out= does not support automatic "
                               "differentiation (as PyTorch's functions with out=); call it under torch.no_grad(), "
                               "or without out=")


def _mask_scalars(causal, window, softcap, scale) -> tuple:
    """(scale, causal, window_left, window_right, softcap) as the library takes them, each checked
    and named: DecodePlan.run()'s scalars, and the last of attention()'s."""
    window_left, window_right = window_pair(window)
    scale = softmax_scale(scale)
    softcap = as_float32("softcap", real("softcap", softcap))
    return (scale, flag("causal", causal), window_left, window_right, softcap)


def _attention_scalars(causal, window, softcap, scale, max_seqlen_q, max_seqlen_k) -> tuple:
    """attention()'s scalar arguments as the library takes them, each checked and named."""
    mask = _mask_scalars(causal, window, softcap, scale)
    # 0: the library derives the bound (no device read, see flashbuf.hpp).
    max_q = int32("max_seqlen_q", max_seqlen_q) if max_seqlen_q is not None else 0
    max_k = int32("max_seqlen_k", max_seqlen_k) if max_seqlen_k is not None else 0
    return (max_q, max_k) + mask


def _check_attention(q: Array, k: Array, v: Array, *, causal: bool = False, window: Window | None = (-1, -1),
                     softcap: float = 0.0, scale: float | None = None, max_seqlen_q: int | None = None,
                     max_seqlen_k: int | None = None, seqlens_k: Array | None = None,
                     page_table: Array | None = None, sinks: Array | None = None) -> None:
    """Every check attention() makes of these arguments (batch or paged form), nothing allocated
    or run: for a caller that writes into its inputs first (flash_attn_with_kvcache's append)."""
    scalars = _attention_scalars(causal, window, softcap, scale, max_seqlen_q, max_seqlen_k)
    if _torch_form(q, k, v):
        _check_named(("q", "k", "v"), q=q, k=k, v=v, seqlens_k=seqlens_k, page_table=page_table, sinks=sinks)
        _torch_ops._attention_shapes((q, k, v, None, None, seqlens_k, page_table), scalars,
                                     metadata_only=_compiling(), sinks=sinks)
        return
    inputs = (_np_in("q", q), _np_in("k", k), _np_in("v", v), None, None, _np_in("seqlens_k", seqlens_k),
              _np_in("page_table", page_table))
    _C.attention_shapes(*inputs, *scalars, sinks=_np_in("sinks", sinks))


# ---- decode -----------------------------------------------------------------------------------

_DTYPE_NAMES = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "half": "fp16",
                "fp32": "fp32", "float32": "fp32", "float": "fp32"}


def _dtype_name(dtype) -> str:
    if torch is not None and isinstance(dtype, torch.dtype):
        names = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
        if dtype in names:
            return names[dtype]
    elif isinstance(dtype, str) and dtype in _DTYPE_NAMES:
        return _DTYPE_NAMES[dtype]
    else:
        try:
            np_dtype = np.dtype(dtype)
        except TypeError:
            np_dtype = None
        if np_dtype is not None:
            if NUMPY_BF16 is not None and np_dtype == NUMPY_BF16:
                return "bf16"
            if np_dtype == np.float16:
                return "fp16"
            if np_dtype == np.float32:
                return "fp32"
    raise TypeError(f"dtype: unsupported dtype {dtype!r}; expected bfloat16, float16 or float32")


def _device_pair(device) -> tuple[str, int]:
    if torch is not None and isinstance(device, torch.device):
        kind, index = device.type, device.index
    else:
        kind, _, text = str(device).partition(":")
        if text and not text.isdigit():
            raise ValueError(f"device: expected 'cpu' or 'cuda[:index]', got {device!r}")
        index = int(text) if text else None
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"device: expected 'cpu' or 'cuda[:index]', got {device!r}")
    if kind == "cuda" and index is None:
        index = torch.cuda.current_device() if torch is not None and torch.cuda.is_available() else 0
    return kind, index or 0


class DecodePlan:
    """Token generation over a KV cache, planned once per batch shape and run many times.

    The plan fixes the split of the keys across blocks for max_seqlen_k and owns the workspace
    that holds the partial results (a torch tensor on CUDA, a NumPy buffer on the CPU), so
    run() allocates nothing but its outputs and does not synchronise: a run can be captured in a
    CUDA graph and replayed with new seqlens_k (and page table contents).

    plan = DecodePlan(batch, q_per_seq, heads_q, heads_kv, head_dim, head_dim_v, max_seqlen_k,
                      page_size, dtype, device)
    o = plan.run(q, k, v, seqlens_k, page_table)

    q (B, q_per_seq, Hq, D); k, v (B, Smax, Hkv, D|Dv) contiguous cache, or (pages, page_size,
    Hkv, D|Dv) with page_table int32 (B, max_pages) when page_size > 0; seqlens_k int32 (B).

    Arguments: batch B; q_per_seq, the query tokens per sequence (1..16, more for speculative
    decoding); heads_q and heads_kv (heads_q a multiple of heads_kv); head_dim D and head_dim_v
    Dv; max_seqlen_k, an upper bound on any seqlens_k the runs will see; page_size, tokens per
    page (1..256) or 0 for a contiguous cache; dtype of q, k, v and o ("bf16", "fp16", "fp32" on
    the CPU only, or the torch / NumPy dtype); device, "cuda[:index]" or "cpu". Raises ValueError
    for sizes the decode kernels do not take. The plan's fields (num_splits, keys_per_split,
    workspace_bytes, batch, ...) read as attributes.
    """

    def __init__(self, batch: int, q_per_seq: int, heads_q: int, heads_kv: int, head_dim: int, head_dim_v: int,
                 max_seqlen_k: int, page_size: int = 0, dtype: Any = "bf16", device: Any = "cuda", *,
                 allocate_workspace: bool = True) -> None:
        kind, index = _device_pair(device)
        self._plan = tuple(_C.plan_decode(int32("batch", batch), int32("q_per_seq", q_per_seq),
                                          int32("heads_q", heads_q), int32("heads_kv", heads_kv),
                                          int32("head_dim", head_dim), int32("head_dim_v", head_dim_v),
                                          int32("max_seqlen_k", max_seqlen_k), int32("page_size", page_size),
                                          _dtype_name(dtype), kind, index))
        self._fields = dict(zip(PLAN_FIELDS, self._plan))
        self.device = f"{kind}:{index}" if kind == "cuda" else "cpu"
        if kind == "cuda" and torch is None:
            raise RuntimeError("a CUDA DecodePlan needs PyTorch, which is not installed")
        self._workspace_torch = None
        self.workspace = self.new_workspace() if allocate_workspace else None
        if _is_torch(self.workspace):
            self._workspace_torch = self.workspace

    def new_workspace(self) -> Array:
        """A workspace for this plan's runs (at least workspace_bytes, 256-byte aligned): a torch
        uint8 tensor from PyTorch's allocator on a CUDA plan (a CUDA graph captured around a run
        keeps it, like the run's outputs), an aligned NumPy buffer on a CPU plan. The plan holds
        one for run() unless made with allocate_workspace=False; a caller that runs one plan on
        several streams or threads at once gives each run its own (run(workspace=...))."""
        nbytes = max(self.workspace_bytes, WORKSPACE_ALIGNMENT)  # never zero: the operator takes a tensor
        if self.device != "cpu":
            return torch.empty(nbytes, dtype=torch.uint8, device=self.device)
        raw = np.empty(nbytes + WORKSPACE_ALIGNMENT, dtype=np.uint8)
        offset = (-raw.ctypes.data) % WORKSPACE_ALIGNMENT
        return raw[offset:offset + nbytes]

    def _run_workspace(self, workspace: Any, torch_inputs: bool) -> Any:
        """The workspace a run takes: the caller's (checked, named `workspace`) or the plan's own,
        as a torch tensor for torch inputs."""
        if workspace is None:
            if self.workspace is None:
                raise ValueError("workspace: this plan holds none (allocate_workspace=False); pass "
                                 "run(workspace=plan.new_workspace())")
            if torch_inputs and self._workspace_torch is None:  # a CPU plan with torch CPU tensors
                self._workspace_torch = torch.from_numpy(self.workspace)
            return self._workspace_torch if torch_inputs else self.workspace
        need = max(self.workspace_bytes, WORKSPACE_ALIGNMENT)
        if _is_torch(workspace):
            ok = (workspace.dtype == torch.uint8 and workspace.is_contiguous() and workspace.numel() >= need
                  and (str(workspace.device) == self.device or (self.device == "cpu" and not workspace.is_cuda)))
        else:
            ok = (isinstance(workspace, np.ndarray) and workspace.dtype == np.uint8 and workspace.ndim == 1
                  and workspace.flags.c_contiguous and workspace.flags.writeable and workspace.size >= need
                  and self.device == "cpu")
        # (Alignment where the library reads the workspace, and outside a torch.compile trace,
        # whose fake tensors have no address; the allocator's blocks are aligned.)
        if not ok or (self.workspace_bytes and not _compiling() and self._address(workspace) % WORKSPACE_ALIGNMENT):
            raise ValueError(f"workspace: expected a contiguous uint8 buffer of at least {need} bytes on "
                             f"{self.device}, {WORKSPACE_ALIGNMENT}-byte aligned (plan.new_workspace() makes one)")
        if torch_inputs and not _is_torch(workspace):
            return torch.from_numpy(workspace)
        if not torch_inputs and _is_torch(workspace):
            raise TypeError("workspace: a torch tensor, but q is a NumPy array")
        return workspace

    @staticmethod
    def _address(buf) -> int:
        return buf.data_ptr() if _is_torch(buf) else buf.ctypes.data

    def __getattr__(self, name):
        # batch, heads_q, ..., num_splits, keys_per_split, workspace_bytes: the plan's fields.
        fields = self.__dict__.get("_fields")
        if fields is not None and name in fields:
            return fields[name]
        raise AttributeError(f"'DecodePlan' object has no attribute '{name}'")

    @property
    def dtype(self) -> str:
        """The plan's element type: "bf16", "fp16" or "fp32"."""
        return ("bf16", "fp16", "fp32")[self._fields["dtype"]]

    @property
    def plan(self) -> tuple:
        """The plan as the C++ library returned it (field order: flashbuf._common.PLAN_FIELDS)."""
        return self._plan

    def __repr__(self) -> str:
        f = self._fields
        return (f"DecodePlan(batch={f['batch']}, q_per_seq={f['q_per_seq']}, heads={f['heads_q']}/{f['heads_kv']}, "
                f"head_dim={f['head_dim']}/{f['head_dim_v']}, max_seqlen_k={f['max_seqlen_k']}, "
                f"page_size={f['page_size']}, device={self.device}, num_splits={f['num_splits']}, "
                f"keys_per_split={f['keys_per_split']}, workspace_bytes={f['workspace_bytes']})")

    def run(self, q: Array, k: Array, v: Array, seqlens_k: Array, page_table: Array | None = None, *,
            causal: bool = False, window: Window | None = (-1, -1), softcap: float = 0.0, scale: float | None = None,
            return_lse: bool = False, sinks: Array | None = None, check_inputs: bool = False,
            workspace: Array | None = None) -> Array | tuple[Array, Array]:
        """One decode step over the cache as it is (it appends nothing; flashbuf.flash_attn_with_kvcache
        writes new keys and values into the cache first).

        q (B, q_per_seq, Hq, D) of the plan's dtype, on its device. k, v: the contiguous cache
        (B, Smax, Hkv, D|Dv) with Smax >= every seqlens_k, or with a paged plan the pages
        (pages, page_size, Hkv, D|Dv) and page_table int32 (B, max_pages). seqlens_k int32 (B):
        the keys each sequence reads (at most max_seqlen_k); it may change between CUDA-graph
        replays, as may the page table's contents. causal, window, softcap and scale mean what
        they mean for attention(); causal and window are bottom-right aligned, so query i of a
        sequence sits at key position seqlens_k - q_per_seq + i. sinks: optional float32 (Hq,)
        sink logits, as in attention(); counted once per row, not once per split of the keys.
        check_inputs=True also checks the entries of CUDA seqlens_k / page_table (a copy and a
        stream synchronisation); unchecked, a bad entry gives wrong rows, never an
        out-of-bounds access.

        Returns o (B, q_per_seq, Hq, Dv), or (o, lse) with return_lse, lse float32 (B, Hq,
        q_per_seq). Runs on the current CUDA stream without synchronising; the plan's workspace
        is shared by its runs, so one plan must not run on two streams (or threads) at once unless
        each run gets a workspace of its own (workspace=plan.new_workspace()). Raises ValueError
        (TypeError for dtypes) naming the argument before anything runs.
        """
        scalars = _mask_scalars(causal, window, softcap, scale)
        return_lse = flag("return_lse", return_lse)
        check_inputs = flag("check_inputs", check_inputs)
        if _torch_form(q, k, v):
            _check_named(("q", "k", "v"), q=q, k=k, v=v, seqlens_k=seqlens_k, page_table=page_table, sinks=sinks)
            workspace = self._run_workspace(workspace, torch_inputs=True)
            o, lse = _torch_ops.run("decode", q, k, v, seqlens_k, page_table, workspace, list(self._plan), *scalars,
                                    return_lse, sinks, check_inputs)
            return (o, lse) if return_lse else o

        if self.device != "cpu":
            raise TypeError("q: a CUDA DecodePlan runs on torch CUDA tensors, got a NumPy array")
        workspace = self._run_workspace(workspace, torch_inputs=False)
        inputs = (_np_in("q", q), _np_in("k", k), _np_in("v", v), _np_in("seqlens_k", seqlens_k),
                  _np_in("page_table", page_table))
        sinks_in = _np_in("sinks", sinks)
        o_shape, lse_shape = _C.decode_shapes(list(self._plan), *inputs, *scalars, sinks=sinks_in)
        o = _np_empty(o_shape, q.dtype)
        lse = _np_empty(lse_shape, np.float32) if return_lse else None
        q_in, k_in, v_in, lens_k, table = inputs
        last.name = _C.decode(list(self._plan), q_in, k_in, v_in, lens_k, table, _np_in("out", o), lse,
                              workspace, *scalars, 0, sinks=sinks_in, check_inputs=check_inputs)
        return (o, lse) if return_lse else o

    def _check(self, q: Array, k: Array, v: Array, seqlens_k: Array, page_table: Array | None = None, *,
               causal: bool = False, window: Window | None = (-1, -1), softcap: float = 0.0,
               scale: float | None = None, sinks: Array | None = None) -> None:
        """Every check run() makes of these arguments, nothing allocated or run (for a caller that
        writes into its inputs first: flash_attn_with_kvcache's append)."""
        scalars = _mask_scalars(causal, window, softcap, scale)
        if _torch_form(q, k, v):
            _check_named(("q", "k", "v"), q=q, k=k, v=v, seqlens_k=seqlens_k, page_table=page_table, sinks=sinks)
            _torch_ops._decode_shapes((q, k, v, seqlens_k, page_table), list(self._plan), scalars,
                                      metadata_only=_compiling(), sinks=sinks)
            return
        inputs = (_np_in("q", q), _np_in("k", k), _np_in("v", v), _np_in("seqlens_k", seqlens_k),
                  _np_in("page_table", page_table))
        _C.decode_shapes(list(self._plan), *inputs, *scalars, sinks=_np_in("sinks", sinks))


# ---- append_kv --------------------------------------------------------------------------------

def append_kv(k_cache: Array, v_cache: Array, k: Array, v: Array, cache_seqlens: Array, *,
              cache_batch_idx: Array | None = None, page_table: Array | None = None,
              check_inputs: bool = False) -> None:
    """Writes new keys and values into a KV cache in place: token i of sequence b at position
    cache_seqlens[b] + i of cache row cache_batch_idx[b] (b without it) of a contiguous cache
    k_cache (Bc, S, Hkv, D), v_cache (Bc, S, Hkv, Dv), or, with page_table int32 (B, max_pages),
    of that sequence's pages in a paged cache (num_pages, page_size, Hkv, D|Dv). k (B, S_new, Hkv,
    D) and v (B, S_new, Hkv, Dv) have the caches' dtype; the index tensors are int32.

    One operation on the caches' device. Host index entries are checked (ValueError naming the
    first bad one, before anything is written); CUDA ones only with check_inputs=True (a copy and
    a synchronisation). Unchecked, a token whose position or page lies outside the cache is not
    written, and nothing else is: no synchronisation, capturable in a CUDA graph. k_cache and
    v_cache may be the two halves of one pool (pool[:, 0] and pool[:, 1]); tokens whose entries
    name one place (repeated cache_batch_idx rows, a page two sequences share) leave it
    unspecified on CUDA, as in FlashAttention."""
    check_inputs = flag("check_inputs", check_inputs)
    if _torch_form(k_cache, v_cache, k, v):
        _check_named(("k_cache", "v_cache", "k", "v", "cache_seqlens"), k_cache=k_cache, v_cache=v_cache, k=k, v=v,
                     cache_seqlens=cache_seqlens, cache_batch_idx=cache_batch_idx, page_table=page_table)
        _torch_ops.run("append_kv", k_cache, v_cache, k, v, cache_seqlens, cache_batch_idx, page_table, check_inputs)
        return
    _C.append_kv(_np_in("k_cache", k_cache), _np_in("v_cache", v_cache), _np_in("k", k), _np_in("v", v),
                 _np_in("cache_seqlens", cache_seqlens), _np_in("cache_batch_idx", cache_batch_idx),
                 _np_in("page_table", page_table), 0, check_inputs=check_inputs)


# ---- merge_states -----------------------------------------------------------------------------

def merge_states(o_parts: Array, lse_parts: Array, *, return_lse: bool = False) -> Array | tuple[Array, Array]:
    """Combines N partial attention results over disjoint key sets into one.

    The parts are what attention (or DecodePlan.run) returned for each key set, stacked on a
    new first axis, with the LSE in attention's layout:

    Varlen: o_parts (N, T, H, Dv), lse_parts float32 (N, H, T) -> o (T, H, Dv), lse (H, T).
    Batch:  o_parts (N, B, S, H, Dv), lse_parts float32 (N, B, H, S) -> o (B, S, H, Dv),
            lse (B, H, S).

    o = sum_i exp(lse_i - lse) o_i with lse = log sum_i exp(lse_i); a part with lse = -inf
    contributes nothing, and a row whose parts are all empty gets o = 0 and lse = -inf. A NaN
    lse makes the row NaN (o and lse); parts with lse = +inf share all the weight equally
    (lse = +inf).
    o has o_parts' dtype (bfloat16, float16 or float32). Returns o, or (o, lse) with
    return_lse, as attention does. Raises ValueError for mismatched shapes, TypeError for dtypes.

    There is no sinks argument: parts computed without sinks, merged here, then given the sink
    as one more part (o = 0, lse = sink) are attention with sinks over all their keys.
    """
    return_lse = flag("return_lse", return_lse)
    if _torch_form(o_parts, lse_parts):
        _check_named(("o_parts", "lse_parts"), o_parts=o_parts, lse_parts=lse_parts)
        o, lse = _torch_ops.run("merge_states", o_parts, lse_parts, return_lse)
        return (o, lse) if return_lse else o
    op_in, lp_in = _np_in("o_parts", o_parts), _np_in("lse_parts", lse_parts)
    if op_in is None or lp_in is None:
        _C.merge_shapes(op_in, lp_in)  # refuses the missing one, naming it
    o_shape, lse_shape = merge_output_shapes(op_in.shape, lp_in.shape)
    op_view, lp_view = merge_contract_inputs(op_in, lp_in)
    _C.merge_shapes(op_view, lp_view)  # the library's checks, on the C++ contract's views, before o exists
    o = _np_empty(o_shape, o_parts.dtype)
    lse = _np_empty(lse_shape, np.float32) if return_lse else None
    o_view, lse_view, finish = merge_contract_outputs(_np_in("out", o), lse)
    last.name = _C.merge_states(op_view, lp_view, o_view, lse_view, 0)
    finish()
    return (o, lse) if return_lse else o


def last_backend() -> str | None:
    """The flashbuf backend ('cpu', 'sm80', 'sm90', 'decode') that ran the latest eager call."""
    return last.name


def cuda_available() -> bool:
    """Whether this build has CUDA kernels and a usable GPU is present."""
    return bool(_C.cuda_available())


def build_info() -> str:
    """What the C++ library instantiated (head dims, dtypes, architectures)."""
    return _C.build_info()
