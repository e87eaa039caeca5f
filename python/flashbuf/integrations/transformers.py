"""flashbuf as an attention implementation of Hugging Face transformers (5.x).

    import flashbuf.integrations.transformers
    flashbuf.integrations.transformers.register()
    model = AutoModelForCausalLM.from_config(config, attn_implementation="flashbuf")
    model.generate(...)                     # prefill and decode with the model's own KV cache

transformers treats every attention implementation whose name contains "flash" as a flavour of
FlashAttention: at model initialisation it loads that flavour's flash_attn_func,
flash_attn_varlen_func and flash_attn_with_kvcache by name, and its FlashAttention attention
function then calls them, handing over the 2-D padding mask (padded batches run as packed
variable-length sequences), sliding windows, softcap, scaling, GQA without repeat_kv, s_aux
sinks as learnable_sink, and padding-free batches. flashbuf.flash_attn provides those three
functions with FlashAttention's signatures, so register() makes "flashbuf" such a flavour:

  * transformers' FlashAttention attention and mask functions are registered under the name in
    AttentionInterface and AttentionMaskInterface (as transformers itself does for FlashAttention
    kernels it loads from the Hub);
  * transformers' loader of FlashAttention flavours learns the name and returns
    flashbuf.flash_attn's functions for it. transformers has no public hook for this step; the
    loader (modeling_flash_attention_utils._lazy_imports, the same in 5.17 through 5.24) is
    wrapped, and any other name still goes to the original.

What flashbuf.flash_attn refuses (dropout during training, ALiBi) raises its NotImplementedError
from inside the model's forward.
"""
from __future__ import annotations

from typing import Any, Callable

from .. import flash_attn

NAME = "flashbuf"
# The FlashAttention flavour whose attention and mask functions transformers runs for us.
_TEMPLATE = "flash_attention_2"


def register(name: str = NAME) -> None:
    """Makes name (default "flashbuf") a valid attn_implementation for transformers' models, run
    by flashbuf.flash_attn. Safe to call more than once. The name must contain "flash", as
    transformers routes only such names through its FlashAttention path."""
    if "flash" not in name:
        raise ValueError(f"name: transformers runs its FlashAttention path only for names containing 'flash', "
                         f"got {name!r}")
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers import modeling_flash_attention_utils as fa_utils

    AttentionInterface.register(name, AttentionInterface()[_TEMPLATE])
    AttentionMaskInterface.register(name, AttentionMaskInterface()[_TEMPLATE])

    loader = fa_utils._lazy_imports
    if not isinstance(loader, _LoaderWithFlashbuf):
        loader = fa_utils._lazy_imports = _LoaderWithFlashbuf(loader, fa_utils)
    loader.names.add(name)


class _LoaderWithFlashbuf:
    """transformers' FlashAttention loader, answering for flashbuf's names and deferring the rest."""

    def __init__(self, original: Callable, fa_utils: Any) -> None:
        self.original = original
        self.fa_utils = fa_utils
        self.names: set[str] = set()

    def __call__(self, implementation: Any, *args: Any, **kwargs: Any) -> tuple:
        if implementation in self.names:
            return (flash_attn.flash_attn_func, flash_attn.flash_attn_varlen_func, flash_attn.flash_attn_with_kvcache,
                    self.fa_utils._pad_input, self.fa_utils._unpad_input)
        return self.original(implementation, *args, **kwargs)
