"""The PyTorch operators on CPU tensors: same results as the NumPy path, torch.library's own
operator checks (schema, fake rules), torch.compile, and error translation through the
dispatcher. Skipped where PyTorch is not installed.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import attention_reference as ref  # noqa: E402
import flashbuf  # noqa: E402


def randn(*shape, dtype=torch.bfloat16, generator=None):
    return torch.randn(*shape, generator=generator).to(dtype)


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(0)


def test_operators_are_registered():
    for name in ("attention", "attention_out", "decode", "merge_states"):
        assert hasattr(torch.ops.flashbuf, name)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_torch_cpu_matches_reference(dtype, gen):
    q, k, v = randn(2, 9, 4, 32, dtype=dtype, generator=gen), randn(2, 13, 2, 32, dtype=dtype, generator=gen), \
        randn(2, 13, 2, 32, dtype=dtype, generator=gen)
    o, lse = flashbuf.attention(q, k, v, causal=True, return_lse=True)
    assert isinstance(o, torch.Tensor) and o.dtype == dtype and o.shape == (2, 9, 4, 32)
    assert lse.dtype == torch.float32 and lse.shape == (2, 4, 9)
    o_ref, lse_ref = ref.attention(q, k, v, causal=True)
    name = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}[dtype]
    assert np.max(np.abs(ref.as_f64(o) - o_ref)) <= ref.tolerance(name)
    assert np.max(np.abs(lse.numpy() - lse_ref)) <= 1e-3


def test_requires_grad_inputs_are_accepted(gen):
    q = randn(1, 4, 2, 16, dtype=torch.float32, generator=gen).requires_grad_()
    k = randn(1, 4, 2, 16, dtype=torch.float32, generator=gen)
    o = flashbuf.attention(q, k, k)
    assert o.shape == (1, 4, 2, 16)
    assert torch.equal(o.detach(), flashbuf.attention(q.detach(), k, k))
    # Forward only (docs/python-api.md): backward raises rather than returning gradients.
    with pytest.raises(RuntimeError, match="no autograd formula"):
        o.sum().backward()
    assert q.grad is None


def test_out_is_refused_where_autograd_would_record_the_call(gen):
    """attention(out=) follows PyTorch's rule for out=: an `out` that requires grad would keep
    its old graph (silently wrong gradients), so under grad mode the call is refused, naming the
    tensor, before out is written; under no_grad, or with nothing requiring grad, it runs."""
    q, k, v = (randn(2, 5, 4, 16, dtype=torch.float32, generator=gen) for _ in range(3))
    want = flashbuf.attention(q, k, v)
    base = torch.zeros(2, 5, 4, 16, requires_grad=True)
    for name, args, out in (("out", (q, k, v), base * 1), ("out", (q, k, v), base),
                            ("q", (q.clone().requires_grad_(), k, v), torch.zeros_like(q)),
                            ("v", (q, k, v.clone().requires_grad_()), torch.zeros_like(q))):
        before = out.detach().clone()
        with pytest.raises(RuntimeError, match=f"^{name}: requires grad"):
            flashbuf.attention(*args, out=out)
        assert torch.equal(out.detach(), before)
        with torch.no_grad():
            flashbuf.attention(*args, out=out)
        assert torch.allclose(out.detach(), want, atol=1e-6, rtol=0)
    out = torch.zeros_like(q)
    assert flashbuf.attention(q, k, v, out=out) is out
    assert torch.allclose(out, want, atol=1e-6, rtol=0)


def test_eager_calls_skip_the_dispatcher_only_where_it_adds_nothing(gen):
    """Eager inference calls the operators' bodies directly (the dispatcher's Python layers cost
    tens of microseconds a call); a call autograd must record, one under a dispatch mode (a
    tracer, fake tensors) and one on a tensor subclass go through torch.ops as before, and a
    direct call that writes into out bumps out's version counter as the operator would."""
    from flashbuf import _torch_ops
    from torch.utils._python_dispatch import TorchDispatchMode

    q, k, v = (randn(1, 6, 2, 16, dtype=torch.float32, generator=gen) for _ in range(3))
    assert not _torch_ops._through_dispatcher((q, k, v, None, 3, True))
    grad_q = q.clone().requires_grad_()
    assert _torch_ops._through_dispatcher((grad_q, k, v))
    with torch.no_grad():
        assert not _torch_ops._through_dispatcher((grad_q, k, v))
    assert _torch_ops._through_dispatcher((torch.nn.Parameter(q), k, v))

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    want = flashbuf.attention(q, k, v, causal=True)
    with Seen() as seen:
        got = flashbuf.attention(q, k, v, causal=True)
    assert any(op.startswith("flashbuf.attention") for op in seen.ops), seen.ops
    assert torch.equal(got, want)
    out = torch.empty_like(q)
    before = out._version
    flashbuf.attention(q, k, v, causal=True, out=out)
    assert out._version > before and torch.equal(out, want)
    with torch.inference_mode():  # inference tensors keep no version counter
        out = torch.empty_like(q)
        flashbuf.attention(q, k, v, causal=True, out=out)
    assert torch.equal(out, want)


def test_jit_trace_and_vmap_see_the_operators(gen):
    """torch.jit.trace records only what reaches the dispatcher, and vmap's tensors are
    wrappers: both go through torch.ops, so a traced function replays the attention and vmap
    runs it once a batch entry."""
    q, k, v = (randn(1, 6, 2, 16, dtype=torch.float32, generator=gen) for _ in range(3))
    want = flashbuf.attention(q, k, v, causal=True)
    traced = torch.jit.trace(lambda q, k, v: flashbuf.attention(q, k, v, causal=True), (q, k, v))
    assert "flashbuf::attention" in str(traced.graph)
    q2 = randn(1, 6, 2, 16, dtype=torch.float32, generator=gen)
    assert torch.equal(traced(q, k, v), want)
    assert torch.equal(traced(q2, k, v), flashbuf.attention(q2, k, v, causal=True))
    qs = torch.stack([q, q2])
    try:
        got = torch.func.vmap(lambda q: flashbuf.attention(q, k, v, causal=True))(qs)
    except RuntimeError as e:  # a PyTorch whose custom operators take no vmap without a rule
        assert "vmap" in str(e) or "Batching rule" in str(e), e
    else:
        assert torch.equal(got[0], want) and torch.equal(got[1], flashbuf.attention(q2, k, v, causal=True))


def test_out_variant(gen):
    q, k, v = (randn(1, 6, 2, 16, dtype=torch.float32, generator=gen) for _ in range(3))
    out = torch.full((1, 6, 2, 16), float("nan"))
    o, lse = flashbuf.attention(q, k, v, out=out, return_lse=True)
    assert o is out and not torch.isnan(out).any()
    assert torch.equal(out, flashbuf.attention(q, k, v))


def _attention_args(q, k, v, return_lse=True):
    return (q, k, v, None, None, None, None, 0, 0, 0.0, True, -1, -1, 0.0, return_lse)


def test_opcheck_attention(gen):
    q, k, v = randn(2, 5, 4, 16, generator=gen), randn(2, 7, 2, 16, generator=gen), randn(2, 7, 2, 16, generator=gen)
    for return_lse in (True, False):
        torch.library.opcheck(torch.ops.flashbuf.attention.default, _attention_args(q, k, v, return_lse),
                              test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))


def test_opcheck_varlen_and_paged(gen):
    cu_q = torch.tensor([0, 3, 8], dtype=torch.int32)
    cu_k = torch.tensor([0, 4, 10], dtype=torch.int32)
    q, k, v = randn(8, 4, 16, generator=gen), randn(10, 2, 16, generator=gen), randn(10, 2, 16, generator=gen)
    args = (q, k, v, cu_q, cu_k, None, None, 5, 6, 0.0, False, -1, -1, 0.0, True)
    torch.library.opcheck(torch.ops.flashbuf.attention.default, args, test_utils=("test_schema", "test_faketensor"))
    kp, vp = randn(6, 4, 2, 16, generator=gen), randn(6, 4, 2, 16, generator=gen)
    table = torch.tensor([[5, 0, 3], [1, 2, 4]], dtype=torch.int32)
    lens = torch.tensor([9, 12], dtype=torch.int32)
    qb = randn(2, 3, 4, 16, generator=gen)
    args = (qb, kp, vp, None, None, lens, table, 0, 0, 0.0, True, -1, -1, 0.0, False)
    torch.library.opcheck(torch.ops.flashbuf.attention.default, args, test_utils=("test_schema", "test_faketensor"))


def test_opcheck_decode_and_merge(gen):
    plan = flashbuf.DecodePlan(2, 2, 4, 2, 16, 16, 12, 4, dtype=torch.bfloat16, device="cpu")
    q = randn(2, 2, 4, 16, generator=gen)
    kp, vp = randn(6, 4, 2, 16, generator=gen), randn(6, 4, 2, 16, generator=gen)
    table = torch.tensor([[5, 0, 3], [1, 2, 4]], dtype=torch.int32)
    lens = torch.tensor([9, 12], dtype=torch.int32)
    ws = torch.from_numpy(plan.workspace)
    args = (q, kp, vp, lens, table, ws, list(plan.plan), 0.0, True, -1, -1, 0.0, True)
    torch.library.opcheck(torch.ops.flashbuf.decode.default, args, test_utils=("test_schema", "test_faketensor"))
    o_parts = randn(3, 5, 4, 16, dtype=torch.float32, generator=gen)
    lse_parts = randn(3, 4, 5, dtype=torch.float32, generator=gen)  # attention's (N, H, T)
    torch.library.opcheck(torch.ops.flashbuf.merge_states.default, (o_parts, lse_parts, True),
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))
    o_parts = randn(3, 2, 5, 4, 16, dtype=torch.float32, generator=gen)
    lse_parts = randn(3, 2, 4, 5, dtype=torch.float32, generator=gen)  # batch (N, B, H, S)
    torch.library.opcheck(torch.ops.flashbuf.merge_states.default, (o_parts, lse_parts, True),
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))


def test_opcheck_append_kv(gen):
    lens = torch.tensor([3, 0], dtype=torch.int32)
    k, v = randn(2, 2, 2, 16, generator=gen), randn(2, 2, 2, 16, generator=gen)
    contiguous = (randn(2, 8, 2, 16, generator=gen), randn(2, 8, 2, 16, generator=gen))
    paged = (randn(5, 4, 2, 16, generator=gen), randn(5, 4, 2, 16, generator=gen))
    table = torch.tensor([[4, 1], [0, 2]], dtype=torch.int32)
    for args in ((*contiguous, k, v, lens, None, None), (*contiguous, k, v, lens, torch.tensor([1, 0], dtype=torch.int32), None),
                 (*paged, k, v, lens, None, table)):
        torch.library.opcheck(torch.ops.flashbuf.append_kv.default, args, test_utils=("test_schema", "test_faketensor"))


def test_decode_plan_with_torch_cpu_tensors(gen):
    plan = flashbuf.DecodePlan(2, 1, 4, 2, 32, 32, 20, 0, dtype=torch.float16, device="cpu")
    q, k, v = randn(2, 1, 4, 32, dtype=torch.float16, generator=gen), randn(2, 20, 2, 32, dtype=torch.float16, generator=gen), \
        randn(2, 20, 2, 32, dtype=torch.float16, generator=gen)
    lens = torch.tensor([20, 7], dtype=torch.int32)
    o = plan.run(q, k, v, lens)
    o_ref, _ = ref.attention(q, k, v, seqlens_k=lens)
    assert np.max(np.abs(ref.as_f64(o) - o_ref)) <= ref.tolerance("fp16")


def test_torch_compile_fullgraph(gen):
    torch._dynamo.reset()
    q, k, v = randn(1, 16, 4, 32, dtype=torch.float32, generator=gen), randn(1, 16, 2, 32, dtype=torch.float32, generator=gen), \
        randn(1, 16, 2, 32, dtype=torch.float32, generator=gen)

    def block(q, k, v):
        o, lse = flashbuf.attention(q * 2.0, k, v, causal=True, return_lse=True)
        return o.sum(dim=-1), lse

    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    o, lse = compiled(q, k, v)
    o_eager, lse_eager = block(q, k, v)
    assert torch.allclose(o, o_eager) and torch.allclose(lse, lse_eager)

    def into(q, k, v, out):  # out= with the lse, whose shape the trace takes from q's
        return flashbuf.attention(q, k, v, causal=True, return_lse=True, out=out)

    out = torch.empty_like(q)
    o_into, lse_into = torch.compile(into, fullgraph=True, backend="aot_eager")(q, k, v, out)
    o_want, lse_want = flashbuf.attention(q, k, v, causal=True, return_lse=True)
    assert torch.equal(o_into, o_want) and torch.equal(lse_into, lse_want) and torch.equal(out, o_want)


def test_errors_cross_the_dispatcher(gen):
    q, k = randn(1, 4, 3, 16, generator=gen), randn(1, 4, 2, 16, generator=gen)
    with pytest.raises(ValueError, match=r"^q: heads_q = 3 is not a multiple"):
        flashbuf.attention(q, k, k)
    with pytest.raises(TypeError, match=r"^k: "):
        flashbuf.attention(randn(1, 4, 2, 16, generator=gen), k.half(), k.half())
    # layouts whose sizes and strides are not a dense array's, named as such
    with pytest.raises(TypeError, match=r"^k: expected a dense \(strided\) tensor, got layout torch.sparse_coo"):
        flashbuf.attention(k, k.to_sparse(), k)
    nested = torch.nested.nested_tensor([randn(4, 2, 16, generator=gen), randn(3, 2, 16, generator=gen)])
    with pytest.raises(TypeError, match=r"^q: expected a dense \(strided\) tensor, got layout nested"):
        flashbuf.attention(nested, k, k)


def test_flashbuf_imported_before_torch_in_a_fresh_process(tmp_path):
    """The package imports torch before its extension, so importing flashbuf first leaves the
    process as a torch-first import would (one CUDA runtime: torch's). Runs in a subprocess so
    that a crash fails this test instead of killing the session."""
    code = ("import sys, flashbuf; assert 'torch' in sys.modules, 'flashbuf did not import torch first'; "
            "import torch; x = torch.ones(1, 3, 2, 16); "
            "o = flashbuf.attention(x, x, x, causal=True); assert o.shape == (1, 3, 2, 16); print('ok')")
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
