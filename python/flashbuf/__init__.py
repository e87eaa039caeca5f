"""flashbuf: exact flash attention for NVIDIA Hopper, with a CPU backend.

    import flashbuf
    o = flashbuf.attention(q, k, v, causal=True)                 # (B, S, H, D) layout
    o, lse = flashbuf.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                max_seqlen_q=mq, max_seqlen_k=mk, return_lse=True)
    plan = flashbuf.DecodePlan(B, 1, 32, 8, 128, 128, max_seqlen_k=32768, page_size=16,
                               dtype=torch.bfloat16, device="cuda")
    o = plan.run(q, k_cache, v_cache, seqlens_k, page_table)      # graph-capturable
    o, lse = flashbuf.merge_states(o_parts, lse_parts, return_lse=True)   # lse_parts (N, H, T)

FlashAttention's entry points (flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache
and the packed forms) live in flashbuf.flash_attn, which code written for flash-attn can import
in its place; flashbuf.integrations.transformers registers flashbuf with Hugging Face
transformers as attn_implementation="flashbuf".

PyTorch tensors (CUDA or CPU) go through the custom operators flashbuf::attention,
flashbuf::attention_out, flashbuf::decode and flashbuf::merge_states (torch.compile and CUDA
graphs work; eager inference calls their bodies without the dispatcher); NumPy arrays run on
the CPU backend. PyTorch is optional.
"""
from ._api import DecodePlan, append_kv, attention, build_info, cuda_available, last_backend, merge_states
from . import flash_attn
from .flash_attn import (flash_attn_func, flash_attn_kvpacked_func, flash_attn_qkvpacked_func,
                         flash_attn_varlen_func, flash_attn_varlen_kvpacked_func, flash_attn_varlen_qkvpacked_func,
                         flash_attn_with_kvcache)

from . import _C

__version__: str = _C.__version__  # written once, in include/flashbuf/version.hpp
__all__ = ["attention", "DecodePlan", "merge_states", "append_kv", "cuda_available", "build_info", "last_backend",
           "flash_attn",
           "flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache", "flash_attn_qkvpacked_func",
           "flash_attn_kvpacked_func", "flash_attn_varlen_qkvpacked_func", "flash_attn_varlen_kvpacked_func"]
