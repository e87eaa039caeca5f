"""FlashAttention-4's sm90 forward kernel (the `fa4` anchor of bench/bench.py) compiled here,
without a GPU, so that its SASS can be read beside flashbuf's (bench/sass_loops.py) with no
device time: the configuration its interface picks for the head dims (tile, stages, register
P), bf16, no GQA packing, no varlen, no paging.

Once, on this machine (FA4's site from scripts/gpu/fa4_site.sh's parts; its CuTe DSL wheels are
built for Python 3.12, and need their own small dependencies; where pyenv holds 3.12 without
putting it on PATH, its interpreter is ~/.pyenv/versions/3.12.*/bin/python3.12):

    mkdir -p /tmp/fa4site && cat .fa4site/part.* | xz -d | tar -x -C /tmp/fa4site
    python3.12 -m venv /tmp/fa4venv && /tmp/fa4venv/bin/pip install typing_extensions protobuf \\
        einops numpy "cuda-bindings>=13,<14" "nvidia-cuda-nvdisasm>=13.4,<14"
    /tmp/fa4venv/bin/python bench/fa4_offline_sass.py --site /tmp/fa4site --out /tmp/fa4sass 128 128
    python3 bench/sass_loops.py /tmp/fa4sass/*.cubin --regions

torch and triton are not installed: FA4's modules import them for their host API (tensor
checks, autotuning), which this compile does not call. Stand-in modules answer those imports
(every attribute an inert placeholder; CUDA reported absent, compute capability 9.0).
"""
import argparse
import glob
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types


class _Placeholder:
    """Any attribute, call, iteration or base-class use of a stand-in module's names."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        return _Placeholder(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        return _Placeholder(f"{self._name}()")

    def __iter__(self):
        return iter(())

    def __or__(self, other):  # `torch.Tensor | None` in annotations
        return self

    __ror__ = __or__

    def __mro_entries__(self, bases):  # `class X(torch.autograd.Function)`
        return (_Base,)

    def __repr__(self):
        return f"<stand-in {self._name}>"


class _Base:
    @classmethod
    def apply(cls, *args, **kwargs):
        return None


# The names FA4's and quack's import-time code uses as more than placeholders.
_SPECIAL = {
    "torch.cuda": {"is_available": lambda: False, "get_device_capability": lambda device=None: (9, 0),
                   "current_device": lambda: 0},
    "torch._subclasses.fake_tensor": {"FakeTensor": type("FakeTensor", (), {}),
                                      "FakeTensorMode": type("FakeTensorMode", (), {})},
    "torch": {"Tensor": type("Tensor", (), {}), "device": type("device", (), {"__init__": lambda self, *a, **k: None})},
}


# Stand-in submodules reached as attributes (`torch.cuda.is_available()` after `import torch`).
_SUBMODULES = {"torch": ("cuda", "autograd", "nn"), "torch.nn": ("functional",)}


def _module_attribute(module_name: str, attr: str):
    if attr in _SUBMODULES.get(module_name, ()):
        return importlib.import_module(f"{module_name}.{attr}")
    return _Placeholder(f"{module_name}.{attr}")


class _StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in ("torch", "triton"):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__dict__.update(_SPECIAL.get(spec.name, {}))
        module.__getattr__ = lambda attr, _n=spec.name: _module_attribute(_n, attr)
        return module

    def exec_module(self, module):
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("d", type=int)
    ap.add_argument("dv", type=int)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--site", required=True, help="FA4's unpacked site (flash_attn, quack, nvidia_cutlass_dsl)")
    ap.add_argument("--out", required=True, help="where the cubin, SASS and PTX are written")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    os.environ.update(CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="cubin,sass,ptx", CUTE_DSL_DUMP_DIR=args.out)
    sys.path[:0] = [args.site, os.path.join(args.site, "nvidia_cutlass_dsl", "dsl_packages")]
    sys.meta_path.insert(0, _StandIns())

    import cutlass
    import cutlass.cute as cute
    from flash_attn.cute.flash_fwd_sm90 import FlashAttentionForwardSm90
    from flash_attn.cute.interface import _tile_size_fwd_sm90
    from flash_attn.cute.utils import AuxData

    cfg = _tile_size_fwd_sm90(args.d, args.dv, args.causal, False)
    kernel = FlashAttentionForwardSm90(
        cutlass.BFloat16, args.d, args.dv, 1, is_causal=args.causal, is_local=False, pack_gqa=False,
        tile_m=cfg.m_block_size, tile_n=cfg.n_block_size, num_stages=2, num_threads=384, Q_in_regs=False,
        intra_wg_overlap=cfg.intra_wg_overlap, mma_pv_is_rs=cfg.mma_pv_is_rs, mask_mod=None, score_mod=None,
        has_aux_tensors=False, q_subtile_factor=None, paged_kv_non_tma=False)
    batch, seqlen_q, heads, seqlen_k = (cute.sym_int32() for _ in range(4))

    def bshd(seqlen, dim):  # (batch, seqlen, heads, dim), dim contiguous, as the interface passes them
        return cute.runtime.make_fake_compact_tensor(cutlass.BFloat16, (batch, seqlen, heads, dim),
                                                     stride_order=(3, 2, 1, 0), assumed_align=16)

    lse = cute.runtime.make_fake_compact_tensor(cutlass.Float32, (batch, heads, seqlen_q), stride_order=(2, 1, 0),
                                                assumed_align=4)
    # The forward's arguments in the order FlashAttentionForwardSm90.__call__ takes them: no
    # varlen, paging, window, sinks, block sparsity or aux tensors.
    cute.compile(kernel, bshd(seqlen_q, args.d), bshd(seqlen_k, args.d), bshd(seqlen_k, args.dv),
                 bshd(seqlen_q, args.dv), lse, 1.0 / args.d ** 0.5, None, None, None, None, None, None, None, None,
                 None, AuxData(None, None), None, None, cute.runtime.make_fake_stream(use_tvm_ffi_env_stream=True),
                 options="--enable-tvm-ffi")
    print(f"FA4 sm90 forward, D {args.d} / Dv {args.dv}{' causal' if args.causal else ''}, tile {cfg.m_block_size} x "
          f"{cfg.n_block_size}: " + ", ".join(sorted(glob.glob(os.path.join(args.out, "*.cubin")))))


if __name__ == "__main__":
    main()
