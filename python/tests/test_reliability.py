"""Reliability rules that are not refusals (docs/errors.md): merge_states' rule for non-finite
LSEs, scalars at the ends of their accepted range, and on CUDA: no host synchronisation for
device index tensors unless check_inputs=True, and memory safety for unchecked bad indices.
The CPU cases run in CI; the CUDA ones skip without a GPU (scripts/gpu/reliability.sh runs
them, under compute-sanitizer too)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import flashbuf

try:
    import torch
except ImportError:  # the NumPy cases still run
    torch = None

HAS_CUDA = torch is not None and torch.cuda.is_available() and flashbuf.cuda_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
D = 128


def _frameworks():
    out = ["numpy"]
    if torch is not None:
        out.append("torch-cpu")
    if HAS_CUDA:
        out.append("torch-cuda")
    return out


def _to(framework, a):
    if framework == "numpy":
        return a
    t = torch.from_numpy(a)
    return t.cuda() if framework == "torch-cuda" else t


def _np(x):
    return x.float().cpu().numpy() if torch is not None and isinstance(x, torch.Tensor) else np.asarray(x, np.float32)


@pytest.mark.parametrize("framework", _frameworks())
def test_merge_states_non_finite_lse_rule(framework):
    """Per row: -inf parts skipped; all -inf -> o 0, lse -inf; a NaN lse -> NaN row; +inf parts
    share the weight equally, lse +inf; finite rows unaffected by the others."""
    rng = np.random.default_rng(1)
    n, t, h = 3, 6, 2
    o_parts = rng.standard_normal((n, t, h, D)).astype(np.float32)
    lse_parts = rng.standard_normal((n, t, h)).astype(np.float32)
    inf, nan = np.inf, np.nan
    lse_parts[:, 0, 0] = [inf, 0.5, -inf]     # one +inf part: o = that part
    lse_parts[:, 1, 0] = [inf, 0.5, inf]      # two: their mean
    lse_parts[:, 2, 0] = [nan, 0.5, 1.0]      # a NaN: NaN row
    lse_parts[:, 3, 0] = [-inf, -inf, -inf]   # nothing: o = 0, lse = -inf
    lse_parts[:, 4, 0] = [nan, nan, nan]      # all NaN: NaN, not "empty"
    lse_parts[:, 5, 0] = [-inf, 0.25, -inf]   # one live part: o = that part
    o_parts[0, 3, 0] = np.nan                 # an empty part's o is never read
    o_parts[2, 5, 0] = np.nan
    # merge_states takes attention's LSE layout, lse_parts (N, H, T), and returns lse (H, T).
    lse_parts_nht = np.ascontiguousarray(lse_parts.transpose(0, 2, 1))
    o, lse = flashbuf.merge_states(_to(framework, o_parts), _to(framework, lse_parts_nht), return_lse=True)
    o, lse = _np(o), _np(lse).T
    np.testing.assert_allclose(o[0, 0], o_parts[0, 0, 0], rtol=1e-6)
    assert lse[0, 0] == inf
    np.testing.assert_allclose(o[1, 0], (o_parts[0, 1, 0] + o_parts[2, 1, 0]) / 2, rtol=1e-5, atol=1e-6)
    assert lse[1, 0] == inf
    assert np.isnan(o[2, 0]).all() and np.isnan(lse[2, 0])
    assert (o[3, 0] == 0).all() and lse[3, 0] == -inf
    assert np.isnan(o[4, 0]).all() and np.isnan(lse[4, 0])
    np.testing.assert_allclose(o[5, 0], o_parts[1, 5, 0], rtol=1e-6)
    np.testing.assert_allclose(lse[5, 0], 0.25, rtol=1e-6)
    # The finite head of every token: the plain formula.
    m = lse_parts[:, :, 1].max(axis=0)
    w = np.exp(lse_parts[:, :, 1] - m)
    ref = (w[:, :, None] * o_parts[:, :, 1]).sum(axis=0) / w.sum(axis=0)[:, None]
    np.testing.assert_allclose(o[:, 1], ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lse[:, 1], m + np.log(w.sum(axis=0)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("framework", ["numpy"] + (["torch-cuda"] if HAS_CUDA else []))
@pytest.mark.parametrize("softcap", [1e-30, 3e-38])
def test_smallest_accepted_softcap_gives_uniform_attention(framework, softcap):
    """softcap -> 0 flattens every score to 0: o = mean of the visible values, lse = ln(Sk).
    The smallest softcaps the validator accepts must compute that, not O = 0 / LSE = -inf."""
    rng = np.random.default_rng(2)
    sk = 37
    q = rng.standard_normal((1, 5, 2, D)).astype(np.float32)
    k = rng.standard_normal((1, sk, 2, D)).astype(np.float32)
    v = rng.standard_normal((1, sk, 2, D)).astype(np.float32)
    if framework == "torch-cuda":
        q, k, v = (torch.from_numpy(x).to("cuda", torch.bfloat16) for x in (q, k, v))
        v_ref = v.float().cpu().numpy()
        tol = 2e-2
    else:
        v_ref, tol = v, 1e-5
    try:
        o, lse = flashbuf.attention(q, k, v, softcap=softcap, return_lse=True)
    except ValueError as e:  # refused by the range check: then it must say softcap
        assert str(e).startswith("softcap:"), e
        return
    o, lse = _np(o), _np(lse)
    np.testing.assert_allclose(o[0], np.broadcast_to(v_ref[0].mean(axis=0), o[0].shape), atol=tol)
    np.testing.assert_allclose(lse, math.log(sk), rtol=1e-3)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_fake_functions_make_the_same_checks():
    """torch.compile's fake tensors reach the library's checks as metadata: the same named
    errors, before anything is traced further, and the right shapes for valid inputs."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q, k = torch.empty(2, 8, 2, D, dtype=torch.bfloat16), torch.empty(3, 8, 2, D, dtype=torch.bfloat16)
        with pytest.raises(ValueError, match=r"^k: expected shape"):
            torch.ops.flashbuf.attention(q, k, k, None, None, None, None, 0, 0, 0.0, False, -1, -1, 0.0, False)
        with pytest.raises(ValueError, match=r"^softcap: "):
            torch.ops.flashbuf.attention(q, q, q, None, None, None, None, 0, 0, 0.0, False, -1, -1, -1.0, False)
        tq = torch.empty(8, 2, D, dtype=torch.bfloat16)
        cu = torch.empty(3, dtype=torch.int32)
        o, lse = torch.ops.flashbuf.attention(tq, tq, tq, cu, cu, None, None, 0, 0, 0.0, False, -1, -1, 0.0, True)
        assert tuple(o.shape) == (8, 2, D) and tuple(lse.shape) == (2, 8)
        with pytest.raises(ValueError, match=r"^lse_parts: "):
            torch.ops.flashbuf.merge_states(torch.empty(3, 5, 4, D), torch.empty(3, 5, 5), True)
        kc, lens = torch.empty(2, 16, 2, D, dtype=torch.bfloat16), torch.empty(2, dtype=torch.int32)
        kn = torch.empty(2, 1, 2, D, dtype=torch.bfloat16)
        with pytest.raises(ValueError, match=r"^v: expected shape"):
            torch.ops.flashbuf.append_kv(kc, kc, kn, kn[:, :, :1], lens, None, None)
        with pytest.raises(ValueError, match=r"^cache_batch_idx: cannot be combined with page_table"):
            torch.ops.flashbuf.append_kv(kc, kc, kn, kn, lens, lens, torch.empty(2, 1, dtype=torch.int32))
        torch.ops.flashbuf.append_kv(kc, kc.clone(), kn, kn, lens, None, None)  # valid: no error


# ---- CUDA: no hidden synchronisation ---------------------------------------------------------

SLEEP_CYCLES = 3_000_000_000  # about 1.5-2 s of a GPU clock: far longer than any call here


def _returns_before_earlier_work(call) -> bool:
    """Queues a long sleep on the current stream, makes the call, and says whether the call
    returned while the sleep was still running (query() False: the stream has work left)."""
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)
    call()
    pending = not torch.cuda.current_stream().query()
    torch.cuda.synchronize()
    return pending


def _bf16(*shape):
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16)


@needs_cuda
def test_eager_calls_with_device_index_tensors_do_not_wait():
    cu = torch.tensor([0, 30, 30, 77], dtype=torch.int32, device="cuda")
    q, k, v = _bf16(77, 4, D), _bf16(77, 2, D), _bf16(77, 2, D)
    varlen = dict(cu_seqlens_q=cu, cu_seqlens_k=cu)
    table = torch.tensor([[3, 0, 1], [2, 5, 4]], dtype=torch.int32, device="cuda")
    lens = torch.tensor([40, 9], dtype=torch.int32, device="cuda")
    kp, vp = _bf16(6, 16, 2, D), _bf16(6, 16, 2, D)
    plan = flashbuf.DecodePlan(2, 1, 4, 2, D, D, 48, 16, dtype=torch.bfloat16, device="cuda")
    qd = _bf16(2, 1, 4, D)
    calls = {
        "varlen, max_seqlen given": lambda: flashbuf.attention(q, k, v, max_seqlen_q=47, max_seqlen_k=47, **varlen),
        "varlen, max_seqlen omitted": lambda: flashbuf.attention(q, k, v, **varlen),
        "paged prefill": lambda: flashbuf.attention(_bf16(2, 5, 4, D), kp, vp, page_table=table, seqlens_k=lens),
        "decode": lambda: plan.run(qd, kp, vp, lens, table),
        "merge_states": lambda: flashbuf.merge_states(torch.randn(3, 5, 4, D, device="cuda"),
                                                      torch.randn(3, 4, 5, device="cuda")),
    }
    for name, call in calls.items():
        call()  # warm up: first-call work (plans, attributes) is not the point
        assert _returns_before_earlier_work(call), f"{name}: the call waited for earlier work on its stream"
    # The test can fail: check_inputs=True reads the index tensors, which waits for the sleep.
    assert not _returns_before_earlier_work(lambda: flashbuf.attention(q, k, v, check_inputs=True, **varlen))
    assert not _returns_before_earlier_work(lambda: plan.run(qd, kp, vp, lens, table, check_inputs=True))


@needs_cuda
def test_unchecked_bad_device_indices_stay_in_bounds():
    """Garbage offsets, lengths and page indices on the device, not checked (the default): the
    kernels clamp them, so the calls complete without a fault (compute-sanitizer memcheck in
    scripts/gpu/reliability.sh sees every access) and the good sequences are still right."""
    q, k, v = _bf16(20, 4, D), _bf16(24, 2, D), _bf16(24, 2, D)
    bad_offsets = [
        [0, 10, 20],            # valid, for reference
        [-5, 10, 20],           # negative start
        [0, 10, 1 << 30],       # past the rows
        [0, 15, 7],             # decreasing
        [3, 2 ** 31 - 1, 20],   # everything at once
    ]
    for cu in bad_offsets:
        cu_t = torch.tensor(cu, dtype=torch.int32, device="cuda")
        flashbuf.attention(q, k, v, cu_seqlens_q=cu_t, cu_seqlens_k=cu_t, max_seqlen_q=20, max_seqlen_k=24)
        torch.cuda.synchronize()
    kp, vp = _bf16(4, 16, 2, D), _bf16(4, 16, 2, D)
    bad_tables = [[[0, 1], [2, 3]], [[-1, 1], [2, 99]], [[2 ** 31 - 1, -(2 ** 31)], [0, 0]]]
    bad_lens = [[20, 32], [-7, 32], [2 ** 31 - 1, 5]]
    plan = flashbuf.DecodePlan(2, 1, 4, 2, D, D, 32, 16, dtype=torch.bfloat16, device="cuda")
    qb, qd = _bf16(2, 3, 4, D), _bf16(2, 1, 4, D)
    for table in bad_tables:
        for lens in bad_lens:
            t = torch.tensor(table, dtype=torch.int32, device="cuda")
            s = torch.tensor(lens, dtype=torch.int32, device="cuda")
            flashbuf.attention(qb, kp, vp, page_table=t, seqlens_k=s)
            plan.run(qd, kp, vp, s, t)
            torch.cuda.synchronize()
    # A pool of no pages behind a table of some width: no length may reach a page.
    k0, v0 = _bf16(0, 16, 2, D), _bf16(0, 16, 2, D)
    t0 = torch.zeros(2, 2, dtype=torch.int32, device="cuda")
    s0 = torch.tensor([5, 2 ** 31 - 1], dtype=torch.int32, device="cuda")
    o0 = flashbuf.attention(qb, k0, v0, page_table=t0, seqlens_k=s0)
    d0 = plan.run(qd, k0, v0, s0, t0)
    torch.cuda.synchronize()
    assert (o0 == 0).all() and (d0 == 0).all()  # no key: o = 0
    # A good sequence next to a bad one is still computed right (decode, contiguous cache).
    kc, vc = _bf16(2, 32, 2, D), _bf16(2, 32, 2, D)
    plan_c = flashbuf.DecodePlan(2, 1, 4, 2, D, D, 32, 0, dtype=torch.bfloat16, device="cuda")
    good = plan_c.run(qd, kc, vc, torch.tensor([32, 5], dtype=torch.int32, device="cuda"))
    mixed = plan_c.run(qd, kc, vc, torch.tensor([32, -9], dtype=torch.int32, device="cuda"))
    torch.cuda.synchronize()
    torch.testing.assert_close(mixed[0], good[0])
