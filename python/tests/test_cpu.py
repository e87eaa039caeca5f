"""flashbuf's Python package on the CPU backend, against the float64 reference.

Runs anywhere (CI has no GPU): NumPy inputs in fp32, fp16 and (with ml_dtypes) bf16; odd
sizes; every mask; GQA/MQA; varlen with empty sequences; paged K/V with shuffled pages; the
decode plan/run split; merge_states; error translation.
"""
from __future__ import annotations

import numpy as np
import pytest

import attention_reference as ref
import flashbuf
from flashbuf._common import NUMPY_BF16

DTYPES = {"fp32": np.float32, "fp16": np.float16}
if NUMPY_BF16 is not None:
    DTYPES["bf16"] = NUMPY_BF16


def randn(rng, shape, dtype):
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def assert_close(actual, expected, dtype_name, scale=1.0):
    err = np.max(np.abs(ref.as_f64(actual) - expected)) if expected.size else 0.0
    tol = ref.tolerance(dtype_name) * scale
    assert err <= tol, f"max abs error {err:.3g} > {tol:.3g}"


def assert_lse_close(actual, expected):
    actual = np.asarray(actual, dtype=np.float64)
    assert np.array_equal(np.isneginf(actual), np.isneginf(expected)), "-inf rows differ"
    finite = np.isfinite(expected)
    assert np.max(np.abs(actual[finite] - expected[finite]), initial=0.0) <= 1e-3


MASKS = {
    "none": dict(),
    "causal": dict(causal=True),
    "window": dict(window=(3, 2)),
    "window_left_only": dict(window=(4, -1)),
    "causal_window": dict(causal=True, window=(5, -1)),
    "window_wider_than_the_keys": dict(window=(2**31 - 1, 2**31 - 1)),  # unbounded, no int overflow
    "softcap": dict(softcap=5.0, causal=True),
    "scale": dict(scale=0.3),
}


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("heads", [(4, 4), (6, 2), (3, 1)], ids=["mha", "gqa", "mqa"])
def test_batch_matches_reference(dtype_name, mask, heads):
    rng = np.random.default_rng(0)
    dtype = DTYPES[dtype_name]
    hq, hkv = heads
    b, sq, sk, d, dv = 2, 7, 19, 40, 24  # odd sizes, sq < sk (bottom-right masks), D != Dv
    q, k, v = randn(rng, (b, sq, hq, d), dtype), randn(rng, (b, sk, hkv, d), dtype), randn(rng, (b, sk, hkv, dv), dtype)
    o, lse = flashbuf.attention(q, k, v, return_lse=True, **MASKS[mask])
    assert o.shape == (b, sq, hq, dv) and o.dtype == dtype
    assert lse.shape == (b, hq, sq) and lse.dtype == np.float32
    o_ref, lse_ref = ref.attention(q, k, v, **MASKS[mask])
    assert_close(o, o_ref, dtype_name)
    assert_lse_close(lse, lse_ref)
    assert flashbuf.last_backend() == "cpu"


def test_rows_without_keys_are_zero_with_minus_inf_lse():
    rng = np.random.default_rng(1)
    # sq > sk with a causal mask: the first sq - sk query rows sit before every key.
    q, k, v = randn(rng, (1, 6, 2, 16), np.float32), randn(rng, (1, 3, 2, 16), np.float32), randn(rng, (1, 3, 2, 16), np.float32)
    o, lse = flashbuf.attention(q, k, v, causal=True, return_lse=True)
    assert np.all(o[0, :3] == 0) and np.all(np.isneginf(lse[0, :, :3]))
    assert not np.any(np.isnan(o)) and np.all(np.isfinite(lse[0, :, 3:]))
    o_ref, _ = ref.attention(q, k, v, causal=True)
    assert_close(o, o_ref, "fp32")


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_matches_reference(dtype_name, causal):
    rng = np.random.default_rng(2)
    dtype = DTYPES[dtype_name]
    lens_q = [3, 0, 9, 1, 5]
    lens_k = [7, 4, 9, 0, 12]  # an empty query sequence and one with no keys
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    hq, hkv, d = 4, 2, 32
    q = randn(rng, (cu_q[-1], hq, d), dtype)
    k = randn(rng, (cu_k[-1], hkv, d), dtype)
    v = randn(rng, (cu_k[-1], hkv, d), dtype)
    o, lse = flashbuf.attention(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, return_lse=True)
    assert o.shape == q.shape and lse.shape == (hq, cu_q[-1])
    o_ref, lse_ref = ref.attention(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert_close(o, o_ref, dtype_name)
    assert_lse_close(lse, lse_ref)
    # max_seqlen_* given explicitly (the capturable form) gives the same result
    o2 = flashbuf.attention(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                            max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k))
    assert np.array_equal(o.view(np.uint8), o2.view(np.uint8))


def make_paged(rng, k, v, lens, page_size, spare_pages=3):
    """Scatter contiguous (B, S, H, D) caches into a shuffled page pool; returns k, v, table."""
    b, s = k.shape[:2]
    max_pages = -(-s // page_size)
    num_pages = b * max_pages + spare_pages
    order = rng.permutation(num_pages)
    table = order[: b * max_pages].reshape(b, max_pages).astype(np.int32)
    kp = randn(rng, (num_pages, page_size) + k.shape[2:], k.dtype)  # garbage where unused
    vp = randn(rng, (num_pages, page_size) + v.shape[2:], v.dtype)
    for i in range(b):
        for j in range(lens[i]):
            kp[table[i, j // page_size], j % page_size] = k[i, j]
            vp[table[i, j // page_size], j % page_size] = v[i, j]
    return kp, vp, table


@pytest.mark.parametrize("page_size", [1, 3, 16])
@pytest.mark.parametrize("mask", ["none", "causal", "window"])
def test_paged_matches_reference_and_contiguous(page_size, mask):
    rng = np.random.default_rng(3)
    dtype_name = "bf16" if "bf16" in DTYPES else "fp16"
    dtype = DTYPES[dtype_name]
    b, sq, s, hq, hkv, d = 3, 4, 29, 4, 2, 32
    lens = np.array([29, 5, 17], dtype=np.int32)
    q, k, v = randn(rng, (b, sq, hq, d), dtype), randn(rng, (b, s, hkv, d), dtype), randn(rng, (b, s, hkv, d), dtype)
    kp, vp, table = make_paged(rng, k, v, lens, page_size)
    o = flashbuf.attention(q, kp, vp, seqlens_k=lens, page_table=table, **MASKS[mask])
    o_ref, _ = ref.attention(q, kp, vp, seqlens_k=lens, page_table=table, **MASKS[mask])
    assert_close(o, o_ref, dtype_name)
    o_contiguous = flashbuf.attention(q, k, v, seqlens_k=lens, **MASKS[mask])
    assert_close(o, ref.as_f64(o_contiguous), dtype_name)


@pytest.mark.parametrize("page_size", [0, 5])
@pytest.mark.parametrize("q_per_seq", [1, 3])
def test_decode_plan_run(page_size, q_per_seq):
    rng = np.random.default_rng(4)
    dtype_name = "bf16" if "bf16" in DTYPES else "fp16"
    dtype = DTYPES[dtype_name]
    b, smax, hq, hkv, d = 4, 37, 8, 2, 64
    plan = flashbuf.DecodePlan(b, q_per_seq, hq, hkv, d, d, smax, page_size, dtype=dtype, device="cpu")
    assert plan.num_splits >= 1 and plan.batch == b and plan.heads_kv == hkv and plan.dtype == dtype_name
    assert plan.workspace_bytes == 0  # the CPU backend does not split
    q = randn(rng, (b, q_per_seq, hq, d), dtype)
    k, v = randn(rng, (b, smax, hkv, d), dtype), randn(rng, (b, smax, hkv, d), dtype)
    for lens in ([37, 1, 20, 9], [5, 36, 0, 37]):  # the same plan, new lengths
        lens = np.array(lens, dtype=np.int32)
        if page_size:
            kp, vp, table = make_paged(rng, k, v, lens, page_size)
            o, lse = plan.run(q, kp, vp, lens, table, causal=True, return_lse=True)
            o_ref, lse_ref = ref.attention(q, kp, vp, seqlens_k=lens, page_table=table, causal=True)
        else:
            o, lse = plan.run(q, k, v, lens, causal=True, return_lse=True)
            o_ref, lse_ref = ref.attention(q, k, v, seqlens_k=lens, causal=True)
        assert o.shape == (b, q_per_seq, hq, d) and lse.shape == (b, hq, q_per_seq)
        assert_close(o, o_ref, dtype_name)
        assert_lse_close(lse, lse_ref)


def test_masked_arrays_are_refused_not_read_under_their_mask():
    x = np.zeros((1, 4, 2, 16), np.float32)
    masked = np.ma.array(x, mask=np.zeros_like(x, dtype=bool))
    with pytest.raises(TypeError, match=r"^k: a numpy.ma.MaskedArray"):
        flashbuf.attention(x, masked, x)


def test_decode_plan_rejects_mismatched_inputs():
    with pytest.raises(ValueError, match=r"^device: expected 'cpu' or 'cuda\[:index\]', got 'cuda:abc'"):
        flashbuf.DecodePlan(2, 1, 4, 4, 32, 32, 16, 0, dtype="fp32", device="cuda:abc")
    plan = flashbuf.DecodePlan(2, 1, 4, 4, 32, 32, 16, 0, dtype="fp32", device="cpu")
    q = np.zeros((2, 1, 4, 32), np.float16)
    k = np.zeros((2, 16, 4, 32), np.float16)
    with pytest.raises(TypeError, match=r"^q: .*plan"):
        plan.run(q, k, k, np.array([1, 2], np.int32))
    q = np.zeros((3, 1, 4, 32), np.float32)
    k = np.zeros((2, 16, 4, 32), np.float32)
    with pytest.raises(ValueError, match=r"^q: "):
        plan.run(q, k, k, np.array([1, 2], np.int32))
    with pytest.raises(ValueError, match=r"^page_table: "):
        plan.run(q[:2], k, k, np.array([1, 2], np.int32), np.zeros((2, 1), np.int32))


@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_merge_states_recombines_key_splits(dtype_name):
    rng = np.random.default_rng(5)
    dtype = DTYPES[dtype_name]
    sq, sk, h, d = 9, 40, 3, 32
    q, k, v = randn(rng, (1, sq, h, d), np.float32), randn(rng, (1, sk, h, d), np.float32), randn(rng, (1, sk, h, d), np.float32)
    bounds = [0, 11, 11, 30, 40]  # the second chunk is empty: its lse is -inf everywhere
    o_parts, lse_parts = [], []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        o, lse = flashbuf.attention(q, k[:, lo:hi], v[:, lo:hi], return_lse=True)
        o_parts.append(o[0])      # (T, H, Dv)
        lse_parts.append(lse[0])  # (H, T), merged as attention wrote it
    o_parts = np.stack(o_parts).astype(dtype)
    lse_parts = np.stack(lse_parts)
    assert np.all(np.isneginf(lse_parts[1]))
    o, lse = flashbuf.merge_states(o_parts, lse_parts, return_lse=True)
    assert o.shape == (sq, h, d) and o.dtype == dtype and lse.shape == (h, sq)
    o_ref, lse_ref = ref.attention(q, k, v)
    assert_close(o, o_ref[0], dtype_name, scale=2.0)  # the parts were rounded to dtype once
    assert_lse_close(lse, lse_ref[0])
    assert flashbuf.merge_states(o_parts, lse_parts).shape == (sq, h, d)  # return_lse defaults to False


@pytest.mark.parametrize("sq", [1, 6], ids=["one_query", "queries"])
def test_merge_states_takes_batch_attention_outputs_as_they_are(sq):
    rng = np.random.default_rng(8)
    b, sk, h, d = 3, 30, 4, 16
    q, k, v = randn(rng, (b, sq, h, d), np.float32), randn(rng, (b, sk, h, d), np.float32), randn(rng, (b, sk, h, d), np.float32)
    parts = [flashbuf.attention(q, k[:, lo:hi], v[:, lo:hi], return_lse=True) for lo, hi in ((0, 13), (13, 30))]
    o_parts = np.stack([o for o, _ in parts])        # (N, B, S, H, Dv)
    lse_parts = np.stack([lse for _, lse in parts])  # (N, B, H, S)
    o, lse = flashbuf.merge_states(o_parts, lse_parts, return_lse=True)
    o_ref, lse_ref = ref.attention(q, k, v)
    assert o.shape == (b, sq, h, d) and lse.shape == (b, h, sq)
    assert_close(o, o_ref, "fp32")
    assert_lse_close(lse, lse_ref)


def test_merge_states_names_a_wrong_lse_layout():
    o_parts = np.zeros((2, 5, 3, 8), np.float32)
    with pytest.raises(ValueError, match=r"^lse_parts: expected shape \(2, 3, 5\) \(num_parts, heads, tokens\)"):
        flashbuf.merge_states(o_parts, np.zeros((2, 5, 3), np.float32))
    with pytest.raises(ValueError, match=r"^lse_parts: expected shape \(2, 4, 3, 5\)"):
        flashbuf.merge_states(np.zeros((2, 4, 5, 3, 8), np.float32), np.zeros((2, 4, 5, 3), np.float32))
    with pytest.raises(ValueError, match=r"^o_parts: expected rank 4"):
        flashbuf.merge_states(o_parts[0], np.zeros((3, 5), np.float32))


def test_out_argument_is_written():
    rng = np.random.default_rng(6)
    q, k, v = randn(rng, (1, 5, 2, 16), np.float32), randn(rng, (1, 5, 2, 16), np.float32), randn(rng, (1, 5, 2, 16), np.float32)
    out = np.full((1, 5, 2, 16), np.nan, np.float32)
    assert flashbuf.attention(q, k, v, out=out) is out
    assert_close(out, ref.attention(q, k, v)[0], "fp32")


# ---- errors: the C++ validation's message, as ValueError or TypeError ----------------------------

def qkv(shape_q=(1, 4, 2, 16), shape_k=(1, 6, 2, 16), dtype=np.float32):
    return np.zeros(shape_q, dtype), np.zeros(shape_k, dtype), np.zeros(shape_k, dtype)


def test_error_heads_not_a_multiple():
    q, k, v = qkv((1, 4, 3, 16), (1, 6, 2, 16))
    with pytest.raises(ValueError, match=r"^q: heads_q = 3 is not a multiple of heads_kv = 2"):
        flashbuf.attention(q, k, v)


def test_backend_argument():
    q, k, v = qkv()
    flashbuf.attention(q, k, v, backend="cpu")
    assert flashbuf.last_backend() == "cpu"
    with pytest.raises(ValueError, match=r"^backend: sm90 was requested but the tensors are CPU tensors"):
        flashbuf.attention(q, k, v, backend="sm90")
    with pytest.raises(ValueError, match=r"^backend: unknown backend 'fastest'"):
        flashbuf.attention(q, k, v, backend="fastest")
    with pytest.raises(TypeError, match=r"^backend: expected a string"):
        flashbuf.attention(q, k, v, backend=90)


def test_error_dtype_mismatch_is_type_error():
    q, k, v = qkv()
    with pytest.raises(TypeError, match=r"^k: "):
        flashbuf.attention(q, k.astype(np.float16), v)


def test_error_index_dtype_is_type_error():
    q, k, v = qkv((8, 2, 16), (6, 2, 16))
    cu = np.array([0, 3, 8], dtype=np.int64)
    with pytest.raises(TypeError, match=r"^cu_seqlens_q: "):
        flashbuf.attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=np.array([0, 2, 6], np.int32), max_seqlen_q=5,
                           max_seqlen_k=4)


def test_error_cu_seqlens_contents_named():
    q, k, v = qkv((8, 2, 16), (6, 2, 16))
    with pytest.raises(ValueError, match=r"^cu_seqlens_k"):
        flashbuf.attention(q, k, v, cu_seqlens_q=np.array([0, 3, 8], np.int32),
                           cu_seqlens_k=np.array([0, 4, 2], np.int32))


def test_error_page_table_out_of_range_writes_nothing():
    q = np.zeros((2, 1, 2, 16), np.float32)
    kp = np.zeros((4, 8, 2, 16), np.float32)
    table = np.array([[0, 1], [2, 9]], dtype=np.int32)
    out = np.full((2, 1, 2, 16), 7.0, np.float32)
    with pytest.raises(ValueError, match=r"^page_table\[1\]\[1\]: "):
        flashbuf.attention(q, kp, kp, seqlens_k=np.array([16, 12], np.int32), page_table=table, out=out)
    assert np.all(out == 7.0)


def test_error_seqlens_k_exceeds_capacity():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"^seqlens_k\[0\]: "):
        flashbuf.attention(q, k, v, seqlens_k=np.array([7], np.int32))


def test_error_bad_ranks_and_arguments_in_python():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"^q: expected rank 4"):
        flashbuf.attention(q[0, 0], k, v)
    with pytest.raises(ValueError, match=r"^window: "):
        flashbuf.attention(q, k, v, window=3)
    with pytest.raises(ValueError, match=r"^scale: "):
        flashbuf.attention(q, k, v, scale=-1.0)
    with pytest.raises(TypeError, match=r"^k: expected a numpy.ndarray"):
        flashbuf.attention(q, k.tolist(), v)
    with pytest.raises(TypeError, match=r"^q: dtype uint16"):
        flashbuf.attention(q.astype(np.uint16), k, v)
    with pytest.raises(TypeError, match=r"^q: unsupported dtype"):
        flashbuf.attention(q.astype(np.float64), k, v)


def test_numpy_scalars_as_arguments():
    """0-d NumPy arrays: a bool one is a flag; one that is no int (bools, floats, several
    elements) is refused with the argument's name, not NumPy's own TypeError."""
    q, k, v = qkv()
    want = flashbuf.attention(q, k, v, causal=True)
    assert np.array_equal(flashbuf.attention(q, k, v, causal=np.array(True)), want)
    assert np.array_equal(flashbuf.attention(q, k, v, causal=True, window=(np.array(-1), np.int64(0))), want)
    with pytest.raises(TypeError, match=r"^causal: expected a bool"):
        flashbuf.attention(q, k, v, causal=np.array(1.0))
    with pytest.raises(TypeError, match=r"^max_seqlen_q: expected an int"):
        flashbuf.attention(q, k, v, max_seqlen_q=np.array(True))
    with pytest.raises(TypeError, match=r"^window\[0\]: expected an int"):
        flashbuf.attention(q, k, v, window=(np.array([1, 2]), 0))


def test_error_out_shape():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"^o: "):
        flashbuf.attention(q, k, v, out=np.zeros((1, 4, 2, 8), np.float32))


def test_package_metadata():
    assert isinstance(flashbuf.build_info(), str) and "CPU" in flashbuf.build_info()
    assert isinstance(flashbuf.cuda_available(), bool)
    assert flashbuf.__version__
