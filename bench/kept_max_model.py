"""A model, in numpy, of the Hopper prefill kernel's online softmax on the inputs of
PrefillGpu.ScoresGrowingAcrossTiles / NearlyOneHotRowsUnderAKeptMax (K row r scaled by
1 + r / 40: nearly one-hot rows), scored as the GPU tests score a kernel
(src/reference/check.hpp: max |O - ref| <= 2 max |lowp - ref| + atol, the LSE likewise):

  exact      each tile's max is the exponent base (main)
  lazy       a row keeps its base until a tile's max passes it by 2^8 (stop 20's and stop 45's
             `lazy-rescale`): the dominant P is up to 2^8, rounded to 16 bits in P V, not in the sum
  lazyexact  lazy, with O's denominator taking each quad lane's largest P of a tile as rounded
             (branch `lazy-exact`, OnlineSoftmax::o_denominator)

Each line: the bounds, then each form's O and LSE errors ("!" over the bound). Not the kernel's
arithmetic bit for bit (its wgmma sums in another order, MUFU is not numpy's exp2): a model of
where the rounding of the dominant term goes.

  python3 bench/kept_max_model.py [SEEDS]      (numpy and ml_dtypes, as the Python tests use)
"""
import sys

import ml_dtypes
import numpy as np

F32 = np.float32
STORAGE = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}
FORMS = ("exact", "lazy", "lazyexact")
SLACK_LOG2 = 8.0
ATOL = {"fp16": 1 / 2048, "bf16": 1 / 256}  # check.hpp's default_atol
LSE_ATOL = 1e-3


def rounded(x, dtype):
    """x (float32) as the 16-bit dtype holds it (round to nearest even), back in float32."""
    return np.asarray(x, F32).astype(STORAGE[dtype]).astype(F32)


def kernel_softmax(s, v, form, dtype, block_n, scale_log2):
    """One head's O (rounded to dtype) and LSE from float32 scores s [rows, keys], tile by tile."""
    rows = s.shape[0]
    row_max = np.full(rows, -np.inf, F32)
    row_sum = np.zeros(rows, F32)
    top_rounding = np.zeros(rows, F32)
    o = np.zeros((rows, v.shape[1]), F32)
    for k0 in range(0, s.shape[1], block_n):
        tile = s[:, k0:k0 + block_n]
        seen = np.maximum(row_max, (tile.max(1) * scale_log2).astype(F32))
        moved = np.ones(rows, bool) if form == "exact" else seen - row_max > SLACK_LOG2
        new_max = np.where(moved, seen, row_max)
        base = np.where(new_max == -np.inf, F32(0), new_max).astype(F32)
        correction = np.exp2((row_max - base).astype(F32)).astype(F32)
        row_max = new_max
        p = np.exp2((tile * scale_log2 - base[:, None]).astype(F32)).astype(F32)
        o = (o * correction[:, None] + rounded(p, dtype) @ v[k0:k0 + block_n]).astype(F32)
        row_sum = (row_sum * correction + p.sum(1)).astype(F32)
        if form == "lazyexact":
            # Lane l of a quad holds the tile's columns c with (c % 8) // 2 == l (the wgmma
            # accumulator's layout); each lane's largest P, and its rounding.
            cols = np.arange(tile.shape[1])
            step = np.zeros(rows, F32)
            for lane in range(4):
                mine = cols[(cols % 8) // 2 == lane]
                if len(mine):
                    top = np.exp2((tile[:, mine].max(1) * scale_log2 - base).astype(F32)).astype(F32)
                    step += rounded(top, dtype) - top
            top_rounding = (top_rounding * correction + step).astype(F32)
    denominator = row_sum + top_rounding if form == "lazyexact" else row_sum
    lse = ((row_max + np.log2(row_sum)) * np.log(2)).astype(np.float64)
    return rounded(o / denominator[:, None], dtype), lse


def lowp_softmax(s, v, dtype, scale):
    """src/reference's lowp: float32 softmax of the whole row, P rounded to dtype for P V."""
    x = (s * F32(scale)).astype(F32)
    m = x.max(1, keepdims=True)
    p = np.exp(x - m).astype(F32)
    o = rounded((rounded(p, dtype) @ v) / p.sum(1, keepdims=True), dtype)
    return o, (m[:, 0] + np.log(p.sum(1))).astype(np.float64)


def run(dtype, d, block_n, seqlen_q, seqlen_k, growth, seed):
    rng = np.random.default_rng(seed)
    batch, heads_q, heads_kv = 2, 4, 2  # test_prefill.cu's base_spec
    q = rounded(rng.standard_normal((batch, seqlen_q, heads_q, d)).astype(F32), dtype)
    k = rounded(rng.standard_normal((batch, seqlen_k, heads_kv, d)).astype(F32), dtype)
    v = rounded(rng.standard_normal((batch, seqlen_k, heads_kv, d)).astype(F32), dtype)
    k = rounded(k * (1 + np.arange(seqlen_k) / growth)[None, :, None, None].astype(F32), dtype)
    scale = 1 / np.sqrt(d)
    scale_log2 = F32(scale * np.log2(np.e))
    o_err = {name: 0.0 for name in FORMS + ("lowp",)}
    lse_err = dict(o_err)
    for b in range(batch):
        for h in range(heads_q):
            hk = h // (heads_q // heads_kv)
            s64 = q[b, :, h].astype(np.float64) @ k[b, :, hk].T.astype(np.float64) * scale
            p64 = np.exp(s64 - s64.max(1, keepdims=True))
            o_ref = p64 @ v[b, :, hk].astype(np.float64) / p64.sum(1, keepdims=True)
            lse_ref = s64.max(1) + np.log(p64.sum(1))
            s = (q[b, :, h] @ k[b, :, hk].T).astype(F32)
            results = {"lowp": lowp_softmax(s, v[b, :, hk], dtype, scale)}
            for form in FORMS:
                results[form] = kernel_softmax(s, v[b, :, hk], form, dtype, block_n, scale_log2)
            for name, (o, lse) in results.items():
                o_err[name] = max(o_err[name], float(np.abs(o - o_ref).max()))
                lse_err[name] = max(lse_err[name], float(np.abs(lse - lse_ref).max()))
    o_bound = 2 * o_err["lowp"] + ATOL[dtype]
    lse_bound = 2 * lse_err["lowp"] + LSE_ATOL
    line = f"{dtype} D {d} (block_n {block_n}) {seqlen_q} x {seqlen_k}: bound O {o_bound:.5f}, LSE {lse_bound:.5f} |"
    for form in FORMS:
        line += (f" {form} {o_err[form]:.5f}{'!' if o_err[form] > o_bound else ''}"
                 f" / {lse_err[form]:.5f}{'!' if lse_err[form] > lse_bound else ''} |")
    print(line, flush=True)


def main():
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for seed in range(seeds):
        for dtype in ("fp16", "bf16"):
            for d, block_n in ((64, 128), (256, 80)):
                for seqlen_q, seqlen_k in ((150, 1100), (70, 700)):
                    run(dtype, d, block_n, seqlen_q, seqlen_k, 40.0, seed)


if __name__ == "__main__":
    main()
