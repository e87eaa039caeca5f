"""Attention sinks through the Python API: flashbuf.attention(..., sinks=) and
DecodePlan.run(..., sinks=) on the CPU (NumPy and torch) and on CUDA, against the float64
reference with each row's sink joined on top (one more logit that adds no value:
lse' = ln(e^lse + e^sink), o' = o e^(lse - lse'); a row with no key gets o = 0, lse = sink);
merge_states of sink-free parts plus the sink as one more part; the NaN rule on CUDA (a NaN
query row gives NaN o and NaN lse); argument errors naming `sinks`.
"""
from __future__ import annotations

import numpy as np
import pytest

import attention_reference as ref
import flashbuf
from flashbuf._common import NUMPY_BF16

try:
    import torch
except ImportError:
    torch = None


def join_sinks(o, lse, sinks):
    """The reference (o (B, S, Hq, Dv), lse (B, Hq, S), float64) with each row's sink joined,
    at the formula's limits: a row without keys gets o = 0 and lse = sink; a sink of -inf adds
    nothing, one of +inf takes all the weight (o = 0, lse = +inf)."""
    s = np.asarray(sinks, dtype=np.float64)[None, :, None]
    lse_out = np.logaddexp(lse, s)
    with np.errstate(invalid="ignore"):  # -inf - -inf, in rows without keys
        factor = np.where(lse == -np.inf, 0.0, np.exp(lse - lse_out))
    return o * factor.transpose(0, 2, 1)[..., None], lse_out


def assert_lse_close(actual, expected, tol):
    """Within tol, and infinite exactly where the reference is (inf - inf is NaN)."""
    np.testing.assert_allclose(ref.as_f64(actual), expected, rtol=0, atol=tol)


INFINITE_SINKS = [-np.inf, np.inf, 1.5, -np.inf]  # per head: adds nothing, takes all, finite


def rand_sinks(rng, heads, lo=-2.0, hi=5.0):
    return rng.uniform(lo, hi, size=heads).astype(np.float32)


def assert_close(actual, expected, tol):
    err = float(np.max(np.abs(ref.as_f64(actual) - expected))) if expected.size else 0.0
    assert err <= tol, f"max abs error {err:.3g} > {tol:.3g}"


# ---- CPU (NumPy) --------------------------------------------------------------------------------

CPU_DTYPES = {"fp32": np.float32}
if NUMPY_BF16 is not None:
    CPU_DTYPES["bf16"] = NUMPY_BF16


@pytest.mark.parametrize("dtype_name", list(CPU_DTYPES))
@pytest.mark.parametrize("mask", [dict(), dict(causal=True), dict(causal=True, window=(8, -1)), dict(softcap=4.0)],
                         ids=["none", "causal", "window", "softcap"])
def test_cpu_sinks_match_reference(dtype_name, mask):
    rng = np.random.default_rng(1)
    dt = CPU_DTYPES[dtype_name]
    q = rng.standard_normal((2, 11, 6, 32)).astype(np.float32).astype(dt)
    k = rng.standard_normal((2, 19, 2, 32)).astype(np.float32).astype(dt)
    v = rng.standard_normal((2, 19, 2, 32)).astype(np.float32).astype(dt)
    sinks = rand_sinks(rng, 6)
    o, lse = flashbuf.attention(q, k, v, return_lse=True, sinks=sinks, **mask)
    o_ref, lse_ref = join_sinks(*ref.attention(q, k, v, **mask), sinks)
    assert_close(o, o_ref, ref.tolerance(dtype_name))
    assert np.max(np.abs(lse - lse_ref)) <= 1e-3


def test_cpu_rows_without_keys_get_the_sink():
    rng = np.random.default_rng(2)
    q = rng.standard_normal((1, 10, 4, 16)).astype(np.float32)
    k = rng.standard_normal((1, 4, 4, 16)).astype(np.float32)
    sinks = np.array([30.0, -30.0, 0.5, 3.0], dtype=np.float32)
    o, lse = flashbuf.attention(q, k, k, causal=True, return_lse=True, sinks=sinks)  # rows 0..5 see no key
    assert np.all(o[0, :6] == 0.0)
    assert np.array_equal(lse[0, :, :6], np.repeat(sinks[:, None], 6, axis=1))
    o_ref, lse_ref = join_sinks(*ref.attention(q, k, k, causal=True), sinks)
    assert_close(o, o_ref, ref.tolerance("fp32"))
    assert np.max(np.abs(lse - lse_ref)) <= 1e-3


def test_cpu_infinite_sinks_take_their_limits():
    rng = np.random.default_rng(7)
    q = rng.standard_normal((1, 10, 4, 16)).astype(np.float32)
    k = rng.standard_normal((1, 4, 4, 16)).astype(np.float32)
    sinks = np.array(INFINITE_SINKS, dtype=np.float32)
    o, lse = flashbuf.attention(q, k, k, causal=True, return_lse=True, sinks=sinks)  # rows 0..5 see no key
    assert np.all(o[0, :, 1] == 0.0) and np.all(lse[0, 1] == np.inf)
    assert np.all(o[0, :6, 0] == 0.0) and np.all(lse[0, 0, :6] == -np.inf)
    o_ref, lse_ref = join_sinks(*ref.attention(q, k, k, causal=True), sinks)
    assert_close(o, o_ref, ref.tolerance("fp32"))
    assert_lse_close(lse, lse_ref, 1e-3)


def test_cpu_nan_sink_gives_its_head_nan_rows():
    """A NaN sink is read by every row of its head, rows without keys included (the NaN rule);
    the other heads are unaffected."""
    rng = np.random.default_rng(8)
    q = rng.standard_normal((1, 10, 4, 16)).astype(np.float32)
    k = rng.standard_normal((1, 4, 4, 16)).astype(np.float32)
    sinks = np.array([0.5, np.nan, 1.5, -1.0], dtype=np.float32)
    o, lse = flashbuf.attention(q, k, k, causal=True, return_lse=True, sinks=sinks)  # rows 0..5 see no key
    assert np.all(np.isnan(o[0, :, 1])) and np.all(np.isnan(lse[0, 1]))
    keep = [0, 2, 3]
    o_ref, lse_ref = join_sinks(*ref.attention(q, k, k, causal=True), np.nan_to_num(sinks))
    assert_close(o[:, :, keep], o_ref[:, :, keep], ref.tolerance("fp32"))
    assert_lse_close(lse[:, keep], lse_ref[:, keep], 1e-3)


@pytest.mark.parametrize("page_size", [0, 4])
def test_cpu_decode_plan_run_with_sinks(page_size):
    rng = np.random.default_rng(3)
    b, t, hq, hkv, d, smax = 3, 2, 8, 2, 16, 24
    plan = flashbuf.DecodePlan(b, t, hq, hkv, d, d, smax, page_size, dtype="fp32", device="cpu")
    q = rng.standard_normal((b, t, hq, d)).astype(np.float32)
    kc = rng.standard_normal((b, smax, hkv, d)).astype(np.float32)
    vc = rng.standard_normal((b, smax, hkv, d)).astype(np.float32)
    lens = np.array([24, 0, 9], dtype=np.int32)
    table = None
    k, v = kc, vc
    if page_size:
        pages = smax // page_size
        perm = rng.permutation(b * pages)
        table = perm.reshape(b, pages).astype(np.int32)
        k = np.empty((b * pages, page_size, hkv, d), np.float32)
        v = np.empty_like(k)
        k[perm] = kc.reshape(b * pages, page_size, hkv, d)
        v[perm] = vc.reshape(b * pages, page_size, hkv, d)
    sinks = rand_sinks(rng, hq)
    o, lse = plan.run(q, k, v, lens, table, causal=True, return_lse=True, sinks=sinks)
    o_ref, lse_ref = join_sinks(*ref.attention(q, kc, vc, seqlens_k=lens, causal=True), sinks)
    assert_close(o, o_ref, ref.tolerance("fp32"))
    assert np.max(np.abs(lse - lse_ref)) <= 1e-3


def test_merge_of_sink_free_parts_plus_the_sink_part():
    """merge_states has no sinks: the sink is one more part (o = 0, lse = sink)."""
    rng = np.random.default_rng(4)
    q = rng.standard_normal((1, 7, 4, 16)).astype(np.float32)
    k = rng.standard_normal((1, 30, 4, 16)).astype(np.float32)
    v = rng.standard_normal((1, 30, 4, 16)).astype(np.float32)
    sinks = rand_sinks(rng, 4)
    parts = [flashbuf.attention(q, k[:, lo:hi], v[:, lo:hi], return_lse=True) for lo, hi in ((0, 12), (12, 30))]
    o_parts = np.stack([o[0] for o, _ in parts] + [np.zeros((7, 4, 16), np.float32)])
    lse_parts = np.stack([lse[0] for _, lse in parts] + [np.broadcast_to(sinks[:, None], (4, 7))]).astype(np.float32)
    o, lse = flashbuf.merge_states(o_parts, lse_parts, return_lse=True)
    o_ref, lse_ref = join_sinks(*ref.attention(q, k, v), sinks)
    assert_close(o, o_ref[0], ref.tolerance("fp32"))
    assert np.max(np.abs(lse - lse_ref[0])) <= 1e-3


@pytest.mark.parametrize("sinks, error, match", [
    (np.zeros(5, np.float32), ValueError, r"^sinks"),
    (np.zeros((2, 2), np.float32), ValueError, r"^sinks"),
    (np.zeros(4, np.float16), TypeError, r"^sinks"),
    (np.zeros(4, np.float64), TypeError, r"^sinks"),
], ids=["length", "rank", "fp16", "fp64"])
def test_cpu_bad_sinks_are_named(sinks, error, match):
    q = np.zeros((1, 3, 4, 16), np.float32)
    k = np.zeros((1, 5, 2, 16), np.float32)
    with pytest.raises(error, match=match):
        flashbuf.attention(q, k, k, sinks=sinks)


# ---- torch operators (CPU): schema and fake rules with sinks ----------------------------------

@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_torch_ops_take_sinks():
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(2, 5, 4, 16, generator=gen).to(torch.bfloat16)
    k = torch.randn(2, 7, 2, 16, generator=gen).to(torch.bfloat16)
    sinks = torch.rand(4, generator=gen) * 4 - 1
    args = (q, k, k, None, None, None, None, 0, 0, 0.0, True, -1, -1, 0.0, True, "auto", sinks)
    torch.library.opcheck(torch.ops.flashbuf.attention.default, args, test_utils=("test_schema", "test_faketensor"))
    plan = flashbuf.DecodePlan(2, 1, 4, 2, 16, 16, 7, 0, dtype=torch.bfloat16, device="cpu")
    lens = torch.tensor([7, 3], dtype=torch.int32)
    ws = torch.from_numpy(plan.workspace)
    args = (q[:, :1].contiguous(), k, k, lens, None, ws, list(plan.plan), 0.0, False, -1, -1, 0.0, True, sinks)
    torch.library.opcheck(torch.ops.flashbuf.decode.default, args, test_utils=("test_schema", "test_faketensor"))


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_torch_cpu_sinks_match_reference():
    gen = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(*s, generator=gen) for s in ((2, 9, 4, 32), (2, 13, 2, 32), (2, 13, 2, 32)))
    sinks = torch.rand(4, generator=gen) * 6 - 2
    o, lse = flashbuf.attention(q, k, v, causal=True, return_lse=True, sinks=sinks)
    o_ref, lse_ref = join_sinks(*ref.attention(q, k, v, causal=True), sinks.numpy())
    assert_close(o, o_ref, ref.tolerance("fp32"))
    assert np.max(np.abs(lse.numpy() - lse_ref)) <= 1e-3


# ---- CUDA ----------------------------------------------------------------------------------------

def _cuda_ok() -> bool:
    return torch is not None and torch.cuda.is_available() and flashbuf.cuda_available()


cuda = pytest.mark.skipif(not _cuda_ok(), reason="needs a CUDA GPU and a flashbuf build with CUDA")


def _built_d():
    info = flashbuf.build_info()
    for d in (128, 64, 256):
        if f"bf16_{d}_{d}" in info:
            return d
    pytest.skip("no bf16 prefill head dim of 64, 128 or 256 in this build")


def _cuda_randn(*shape):
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16)


def _cuda_sinks(hq, lo=-2.0, hi=5.0):
    return torch.empty(hq, device="cuda", dtype=torch.float32).uniform_(lo, hi)


@cuda
@pytest.mark.parametrize("backend", ["auto", "sm80", "sm90"])
@pytest.mark.parametrize("mask", [dict(), dict(causal=True), dict(causal=True, window=(128, -1)), dict(softcap=20.0)],
                         ids=["none", "causal", "window128", "softcap"])
def test_cuda_prefill_sinks(backend, mask):
    if backend == "sm90" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the sm90 kernel needs a compute capability 9.0 device")
    d = _built_d()
    q, k, v = _cuda_randn(2, 333, 16, d), _cuda_randn(2, 400, 2, d), _cuda_randn(2, 400, 2, d)
    sinks = _cuda_sinks(16)
    o, lse = flashbuf.attention(q, k, v, return_lse=True, sinks=sinks, backend=backend, **mask)
    o_ref, lse_ref = join_sinks(*ref.attention(q, k, v, **mask), sinks.cpu().numpy())
    assert_close(o, o_ref, ref.tolerance("bf16"))
    assert np.max(np.abs(lse.cpu().numpy() - lse_ref)) <= 1e-2


@cuda
def test_cuda_extreme_sinks_and_rows_without_keys():
    d = _built_d()
    q, k, v = _cuda_randn(1, 100, 8, d), _cuda_randn(1, 40, 8, d), _cuda_randn(1, 40, 8, d)
    sinks = torch.tensor([30.0, -30.0, float("inf"), float("-inf")] * 2, device="cuda")
    o, lse = flashbuf.attention(q, k, v, causal=True, return_lse=True, sinks=sinks)  # rows 0..59: no key
    assert torch.all(o[0, :60] == 0)
    assert torch.equal(lse[0, :, :60], sinks[:, None].expand(8, 60))
    assert torch.all(o[0, :, 2] == 0) and torch.all(lse[0, 2] == float("inf"))  # +inf takes every row
    o_ref, lse_ref = join_sinks(*ref.attention(q, k, v, causal=True), sinks.cpu().numpy())
    assert_close(o, o_ref, ref.tolerance("bf16"))
    assert_lse_close(lse.cpu(), lse_ref, 1e-2)


@cuda
@pytest.mark.parametrize("page_size", [0, 16])
@pytest.mark.parametrize("q_per_seq", [1, 4])
def test_cuda_decode_sinks(page_size, q_per_seq):
    b, hq, hkv, d, smax = 3, 32, 4, 128, 4096
    plan = flashbuf.DecodePlan(b, q_per_seq, hq, hkv, d, d, smax, page_size, dtype=torch.bfloat16, device="cuda")
    q, kc, vc = _cuda_randn(b, q_per_seq, hq, d), _cuda_randn(b, smax, hkv, d), _cuda_randn(b, smax, hkv, d)
    if page_size:
        pages = smax // page_size
        perm = torch.randperm(b * pages, device="cuda")
        table = perm.view(b, pages).to(torch.int32)
        k = torch.empty(b * pages, page_size, hkv, d, device="cuda", dtype=torch.bfloat16)
        v = torch.empty_like(k)
        k[perm] = kc.reshape(b * pages, page_size, hkv, d)
        v[perm] = vc.reshape(b * pages, page_size, hkv, d)
    else:
        table, k, v = None, kc, vc
    seqlens = torch.tensor([4096, 0, 700], dtype=torch.int32, device="cuda")
    sinks = _cuda_sinks(hq, 4.0, 9.0)  # near the rows' own LSE: a sink counted per split would show
    for mask in (dict(causal=True), dict(causal=True, window=(128, -1))):
        o, lse = plan.run(q, k, v, seqlens, table, return_lse=True, sinks=sinks, **mask)
        o_ref, lse_ref = join_sinks(*ref.attention(q, kc, vc, seqlens_k=seqlens, **mask), sinks.cpu().numpy())
        assert_close(o, o_ref, ref.tolerance("bf16"))
        assert np.max(np.abs(lse.cpu().numpy() - lse_ref)) <= 1e-2


def _cuda_decode_with_sinks(sinks, d=128):
    """One decode step of 8/2 heads over three sequences of 4096 keys (split), none and 700, with
    `sinks`: (o, lse) and the step's q, k, v, seqlens_k."""
    b, hq, hkv, smax = 3, 8, 2, 4096
    plan = flashbuf.DecodePlan(b, 1, hq, hkv, d, d, smax, 0, dtype=torch.bfloat16, device="cuda")
    q, k, v = _cuda_randn(b, 1, hq, d), _cuda_randn(b, smax, hkv, d), _cuda_randn(b, smax, hkv, d)
    seqlens = torch.tensor([4096, 0, 700], dtype=torch.int32, device="cuda")
    o, lse = plan.run(q, k, v, seqlens, None, return_lse=True, sinks=sinks)
    return o, lse, (q, k, v, seqlens)


@cuda
def test_cuda_decode_infinite_sinks():
    """Split and unsplit rows (4096 keys, none, 700) with sinks of -inf, +inf and 1.5: the limits
    hold after the splits' merge as in one pass."""
    sinks = torch.tensor(INFINITE_SINKS * 2, dtype=torch.float32, device="cuda")
    o, lse, (q, k, v, seqlens) = _cuda_decode_with_sinks(sinks)
    assert torch.all(o[:, :, 1::4] == 0) and torch.all(lse[:, 1::4] == float("inf"))
    o_ref, lse_ref = join_sinks(*ref.attention(q, k, v, seqlens_k=seqlens), sinks.cpu().numpy())
    assert_close(o, o_ref, ref.tolerance("bf16"))
    assert_lse_close(lse.cpu(), lse_ref, 1e-2)


@cuda
def test_cuda_nan_sink_gives_its_head_nan_rows():
    """Prefill (rows without keys included) and decode, split and not: a NaN sink's head is NaN,
    the other heads are as with a finite sink."""
    d = _built_d()
    q, k = _cuda_randn(1, 100, 8, d), _cuda_randn(1, 40, 8, d)
    sinks = _cuda_sinks(8)
    sinks[5] = float("nan")
    o, lse = flashbuf.attention(q, k, k, causal=True, return_lse=True, sinks=sinks)
    assert torch.isnan(o[0, :, 5]).all() and torch.isnan(lse[0, 5]).all()
    assert not torch.isnan(o[0, :, :5]).any() and not torch.isnan(lse[0, :5]).any()
    o, lse, _ = _cuda_decode_with_sinks(sinks, d)
    assert torch.isnan(o[:, :, 5]).all() and torch.isnan(lse[:, 5]).all()
    assert not torch.isnan(o[:, :, :5]).any() and not torch.isnan(lse[:, :5]).any()


@cuda
def test_cuda_nan_query_row_gives_nan_o_and_lse():
    d = _built_d()
    q, k, v = _cuda_randn(1, 64, 4, d), _cuda_randn(1, 96, 2, d), _cuda_randn(1, 96, 2, d)
    q[0, 10, 3, 0] = float("nan")
    for sinks in (None, _cuda_sinks(4)):
        o, lse = flashbuf.attention(q, k, v, causal=True, return_lse=True, sinks=sinks)
        assert torch.isnan(o[0, 10, 3]).all() and torch.isnan(lse[0, 3, 10])
        mask = torch.ones_like(lse, dtype=torch.bool)
        mask[0, 3, 10] = False
        assert torch.isfinite(lse[mask]).all()
    # Decode of one long sequence: split across blocks, so the NaN row's parts are merged.
    try:
        plan = flashbuf.DecodePlan(1, 1, 4, 2, d, d, 4096, 0, dtype=torch.bfloat16, device="cuda")
    except ValueError as e:
        pytest.skip(f"decode bf16 D {d} not in this build: {e}")
    kd, vd = _cuda_randn(1, 4096, 2, d), _cuda_randn(1, 4096, 2, d)
    qd = _cuda_randn(1, 1, 4, d)
    qd[0, 0, 2, 5] = float("nan")
    seqlens = torch.tensor([4096], dtype=torch.int32, device="cuda")
    for sinks in (None, _cuda_sinks(4)):
        o, lse = plan.run(qd, kd, vd, seqlens, return_lse=True, sinks=sinks)
        assert torch.isnan(o[0, 0, 2]).all() and torch.isnan(lse[0, 2, 0])
        assert torch.isfinite(lse[0, [0, 1, 3], 0]).all()


@cuda
def test_cuda_sinks_under_torch_compile():
    torch._dynamo.reset()
    d = _built_d()
    q, k, v = _cuda_randn(1, 128, 8, d), _cuda_randn(1, 128, 2, d), _cuda_randn(1, 128, 2, d)
    sinks = _cuda_sinks(8)

    def block(q, k, v, sinks):
        o, lse = flashbuf.attention(q, k, v, causal=True, return_lse=True, sinks=sinks)
        return o * 2.0, lse

    compiled = torch.compile(block, fullgraph=True)
    o, lse = compiled(q, k, v, sinks)
    o_eager, lse_eager = block(q, k, v, sinks)
    assert torch.equal(o, o_eager) and torch.equal(lse, lse_eager)
